"""The probe's opt-in rules: whether an agent serves its journal, and whether it redacts prompt text."""

from __future__ import annotations

import os
from collections.abc import Mapping

from engine.probe.runtime_dir import SERVE_ENV

REDACT_ENV = "CONTEXTPIPE_REDACT"
MAX_CLIENTS_ENV = "CONTEXTPIPE_PROBE_MAX_CLIENTS"
DEFAULT_MAX_CLIENTS = 32
_TRUE = frozenset({"1", "true", "yes", "on"})


def _env_flag(name: str, explicit: bool | None, environ: Mapping[str, str] | None) -> bool:
    if explicit is not None:
        return explicit
    env = os.environ if environ is None else environ
    return env.get(name, "").strip().lower() in _TRUE


def serve_requested(serve: bool | None = None, environ: Mapping[str, str] | None = None) -> bool:
    """The opt-in rule: an explicit `serve` argument wins, else CONTEXTPIPE_SERVE=1 (or true/yes/on)."""
    return _env_flag(SERVE_ENV, serve, environ)


def redact_requested(redact: bool | None = None, environ: Mapping[str, str] | None = None) -> bool:
    """The same rule for redaction: an explicit `redact` wins, else CONTEXTPIPE_REDACT=1 (or true/yes/on)."""
    return _env_flag(REDACT_ENV, redact, environ)


def max_clients_setting(explicit: int | None = None, environ: Mapping[str, str] | None = None) -> int:
    """How many clients a probe serves at once: an explicit value wins, else CONTEXTPIPE_PROBE_MAX_CLIENTS,
    else DEFAULT_MAX_CLIENTS. A value that is not a positive integer is ignored (with the default used):
    a typo in an environment variable must not stop the agent."""
    if explicit is not None:
        return max(1, int(explicit))
    env = os.environ if environ is None else environ
    raw = env.get(MAX_CLIENTS_ENV, "").strip()
    try:
        n = int(raw)
    except ValueError:
        return DEFAULT_MAX_CLIENTS
    return n if n > 0 else DEFAULT_MAX_CLIENTS
