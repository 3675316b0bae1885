"""Sending what the engine knows to other systems: OpenTelemetry spans (`spans` builds the attributes,
`otel` wires the official SDK). Like the probe, an exporter is a journal sink on its own thread: it may
drop, never block or break the agent."""
