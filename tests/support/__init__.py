"""Scaffolding the tests share: small modules named for what they hold (recordings made by the real
engine, short probe runtime directories). Imported as `tests.support.<module>`."""
