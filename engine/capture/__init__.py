"""Capturing agents that do not assemble with the engine: the SDK client tap (`tap`)."""
