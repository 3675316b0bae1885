"""The sides `cp-inspect diff` compares, as a command line or a CI config names them (`parse_side`):
`recorded`, another .cpsession recording of the session, a .toml/.json file of settings, or inline
`key=value` pairs (window=N, provider=P, gate.NAME=on|off, threshold.NAME=X), each checked as simulate
checks its options and refused with what is accepted (`DiffError`). engine/sim/session_diff.py replays
each side and compares them.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.errors import ConfigError, ContextPipeError
from engine.providers import canonical_provider
from engine.whatif import GATE_KEYS, THRESHOLD_ALIASES, THRESHOLD_KEYS, Overrides
from engine.wording import nouned


class DiffError(ContextPipeError, ValueError):
    """A side or a gate could not be understood (says which and what is accepted)."""


@dataclass(frozen=True)
class Side:
    """One configuration: `overrides` on the recorded settings, or another `recording` of the session."""

    label: str
    overrides: Overrides = field(default_factory=Overrides)
    recording: Path | None = None


def _table(d: Mapping[str, Any], key: str, where: str) -> dict[str, Any]:
    v = d.get(key)
    if v is None:
        return {}
    if not isinstance(v, Mapping):  # (a string or a number was a traceback in dict())
        raise DiffError(f"{where}: {key} must be a table of NAME = value, got {v!r}")
    return dict(v)


def _gate_value(v: Any, name: str, where: str) -> bool:
    """A gate's value in a config file: true/false, or the words the command line takes (on/off...).
    bool() of any string was True, so `reorder = "off"` turned the gate on."""
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in _ON:
        return _ON[v.strip().lower()]
    raise DiffError(f"{where}: gate {name} must be true/false (or on/off), got {v!r}")


def _overrides_from(d: Mapping[str, Any], where: str) -> Overrides:
    known = {"window", "provider", "gates", "thresholds"}
    unknown = sorted(set(d) - known)
    if unknown:
        raise DiffError(
            f"{where}: unknown {nouned(len(unknown), 'setting')} {unknown}; known: {sorted(known)}"
        )
    gates = _table(d, "gates", where)
    bad = sorted(set(gates) - set(GATE_KEYS))
    if bad:
        raise DiffError(
            f"{where}: unknown {nouned(len(bad), 'gate')} {bad}; known gates: {', '.join(GATE_KEYS)}"
        )
    on = {k: _gate_value(v, k, where) for k, v in gates.items()}
    # The short names (trim, compact, prune) as explain and simulate take them.
    thresholds: dict[str, float] = {}
    for k, v in _table(d, "thresholds", where).items():
        if isinstance(v, bool) or not isinstance(v, (int, float, str)):
            raise DiffError(f"{where}: threshold {k} must be a number (a fraction of the window), got {v!r}")
        try:
            thresholds[THRESHOLD_ALIASES.get(str(k), str(k))] = float(v)
        except ValueError:  # (a traceback)
            raise DiffError(
                f"{where}: threshold {k} must be a number (a fraction of the window), got {v!r}"
            ) from None
    bad = sorted(set(thresholds) - set(THRESHOLD_KEYS))
    if bad:
        short = ", ".join(f"{a} ({k})" for a, k in THRESHOLD_ALIASES.items())
        raise DiffError(
            f"{where}: unknown {nouned(len(bad), 'threshold')} {bad}; known: {', '.join(THRESHOLD_KEYS)} (or {short})"
        )
    provider = d.get("provider")
    if provider is not None:
        try:
            canonical_provider(str(provider))
        except ConfigError as exc:
            raise DiffError(f"{where}: {exc}") from exc
    window = d.get("window")
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window <= 0):
        raise DiffError(f"{where}: window must be a positive number of tokens, got {window!r}")
    if window is not None and window > 100_000_000:
        raise DiffError(f"{where}: window must be between 1 and 100,000,000 tokens, got {window}")
    return Overrides(window, thresholds or None, on or None, provider or None)


_ON = {
    "on": True,
    "true": True,
    "1": True,
    "yes": True,
    "off": False,
    "false": False,
    "0": False,
    "no": False,
}


def parse_side(spec: str) -> Side:
    """A side from the command line: `recorded`; a .cpsession recording; a .toml/.json config file;
    or inline `key=value` pairs joined by commas: window=64000, provider=openai, gate.NAME=on|off,
    threshold.NAME=0.7."""
    s = spec.strip()
    if s in ("", "recorded", "-"):
        return Side("recorded")
    p = Path(s)
    if p.suffix == ".cpsession":
        if not p.is_file():
            raise DiffError(f"{s}: no such recording")
        return Side(p.name, recording=p)
    if p.suffix in (".toml", ".json"):
        if not p.is_file():
            raise DiffError(f"{s}: no such config file")
        try:
            raw = p.read_text()
            data = tomllib.loads(raw) if p.suffix == ".toml" else json.loads(raw)
        except (OSError, ValueError, tomllib.TOMLDecodeError) as exc:
            raise DiffError(f"{s}: cannot read the config ({exc})") from exc
        if not isinstance(data, dict):
            raise DiffError(f"{s}: a config file holds a table/object of settings")
        return Side(p.name, _overrides_from(data, s))
    d: dict[str, Any] = {}
    for pair in s.split(","):
        if "=" not in pair:
            raise DiffError(
                f"{spec!r} is not a recording, a .toml/.json config or key=value pairs "
                "(window=N, provider=P, gate.NAME=on|off, threshold.NAME=X)"
            )
        k, v = (x.strip() for x in pair.split("=", 1))
        if k == "window":
            try:
                n = int(v)
            except ValueError:
                raise DiffError(f"{spec!r}: window must be a whole number of tokens, got {v!r}") from None
            # Said here with the pair it came from, as simulate's --window says it: window=-3 was called
            # not a whole number, and window=999999999999 was refused as a 'budget limit'.
            if not 0 < n <= 100_000_000:
                raise DiffError(f"{spec!r}: window must be between 1 and 100,000,000 tokens, got {v}")
            d["window"] = n
        elif k == "provider":
            d["provider"] = v
        elif k.split(".", 1)[0] in ("gate", "gates") and "." in k:
            if v.lower() not in _ON:
                raise DiffError(f"{spec!r}: gate value must be on or off, got {v!r}")
            d.setdefault("gates", {})[k.split(".", 1)[1]] = _ON[v.lower()]
        elif k.split(".", 1)[0] in ("threshold", "thresholds") and "." in k:
            try:
                d.setdefault("thresholds", {})[k.split(".", 1)[1]] = float(v)
            except ValueError as exc:
                raise DiffError(f"{spec!r}: threshold value must be a number, got {v!r}") from exc
        else:
            raise DiffError(f"{spec!r}: unknown key {k!r} (window, provider, gate.NAME, threshold.NAME)")
    return Side(s, _overrides_from(d, spec))
