"""The probe's opt-in rules: whether an agent serves its journal, and whether it redacts prompt text."""

from __future__ import annotations

import os
from collections.abc import Mapping

from engine.probe.runtime_dir import SERVE_ENV

REDACT_ENV = "CONTEXTPIPE_REDACT"
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
