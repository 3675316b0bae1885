"""Prices as data: a JSON table of USD per million tokens per model, with the date and source of each row.

The bundled table is `engine/sim/data/prices.json`. A user points to their own (same shape) with the
`CONTEXTPIPE_PRICES` environment variable or by passing a path, so a price change never needs a code
change. `cost()` bills a cachesim `CallCache` (or totals of several) plus output tokens.

A row may carry `long_context`: other rates for a call whose input (uncached + cache reads + cache
writes) is above `above_input_tokens`, applied to every token of that call, output included (Anthropic
bills Claude Sonnet 4 and 4.5 that way when the 1M-context beta lets a prompt pass 200K). Such a row is
priced call by call: totals of several calls cannot tell which of them crossed the line (`call_cost`,
`crosses_long_context`). A row may also carry `note`: what its one set of rates leaves out (DeepSeek's
off-peak half price), which simulate repeats in its notes.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine.errors import ConfigError
from engine.providers.policy import model_name
from engine.sim.cachesim import CallCache

ENV_VAR = "CONTEXTPIPE_PRICES"
# After a known name and '-': a suffix that names a different model, not a snapshot of the same one.
_OTHER_MODEL = re.compile(r"(\d{1,2}|mini|nano)(-|$)")
BUNDLED = Path(__file__).resolve().parent / "data" / "prices.json"
_REQUIRED = ("provider", "input", "output", "cache_read", "cache_write", "as_of", "source")


class UnknownModelError(ConfigError):
    """The price table has no row for a model."""


@dataclass(frozen=True)
class ModelPrice:
    """A model's prices in USD per million tokens (input, output, cache read and write) and the date they are from."""
    model: str
    provider: str
    input: float  # USD per million uncached input tokens
    output: float
    cache_read: float
    cache_write: float  # 5-minute write (or plain input where writes carry no premium)
    cache_write_1h: float | None
    as_of: str
    source: str
    # Rates for a call whose input is above `long_context_above` tokens (None: one rate at any size).
    long_context: ModelPrice | None = None
    long_context_above: int | None = None
    note: str = ""  # what the rates leave out, said wherever the row prices a session
    # Rates for a call made off-peak (DeepSeek: half the list price), and when that is: `peak_hours` are
    # [start, end) UTC hours, on weekdays only when `peak_weekdays_only`; calls before `off_peak_since`
    # (epoch seconds) or with no real time are billed at the row's own (peak, list) rates.
    off_peak: ModelPrice | None = None
    peak_hours: tuple[tuple[int, int], ...] = ()
    peak_weekdays_only: bool = True
    off_peak_since: float = 0.0


def _num(origin: str, name: str, row: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, float]:
    try:
        nums = {k: float(row[k]) for k in keys}
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"price table {origin}: row {name!r} has a non-numeric price") from exc
    if any(v < 0 for v in nums.values()):
        raise ConfigError(f"price table {origin}: row {name!r} has a negative price")
    return nums


def _long_context(origin: str, name: str, row: Mapping[str, Any], base: ModelPrice) -> ModelPrice:
    """The `long_context` object of row `name` as a ModelPrice of its own (the base row's date/source)."""
    lc = row["long_context"]
    where = f"{name} long_context"
    if not isinstance(lc, dict):
        raise ConfigError(f"price table {origin}: row {name!r}: long_context is not an object")
    missing = [k for k in ("above_input_tokens", "input", "output", "cache_read", "cache_write") if k not in lc]
    if missing:
        raise ConfigError(f"price table {origin}: row {where!r} lacks {', '.join(missing)}")
    above = lc["above_input_tokens"]
    if isinstance(above, bool) or not isinstance(above, int) or above <= 0:
        raise ConfigError(
            f"price table {origin}: row {where!r}: above_input_tokens must be a whole number of tokens "
            f"above 0 (e.g. 200000), not {above!r}"
        )
    nums = _num(origin, where, lc, ("input", "output", "cache_read", "cache_write"))
    w1h = _num(origin, where, lc, ("cache_write_1h",))["cache_write_1h"] if lc.get("cache_write_1h") is not None else None
    return replace(
        base,
        input=nums["input"],
        output=nums["output"],
        cache_read=nums["cache_read"],
        cache_write=nums["cache_write"],
        cache_write_1h=w1h,
        source=str(lc.get("source") or base.source),
        long_context=None,
        long_context_above=above,
    )


def _off_peak(origin: str, name: str, row: Mapping[str, Any], base: ModelPrice) -> ModelPrice:
    """Row `name` with its `off_peak` object read: the off-peak rates as a ModelPrice of their own, and
    the peak hours that decide between them."""
    op = row["off_peak"]
    where = f"{name} off_peak"
    if not isinstance(op, dict):
        raise ConfigError(f"price table {origin}: row {name!r}: off_peak is not an object")
    missing = [k for k in ("input", "output", "cache_read", "cache_write", "peak_hours_utc", "since") if k not in op]
    if missing:
        raise ConfigError(f"price table {origin}: row {where!r} lacks {', '.join(missing)}")
    nums = _num(origin, where, op, ("input", "output", "cache_read", "cache_write"))
    hours = op["peak_hours_utc"]
    ok = isinstance(hours, list) and all(
        isinstance(h, list) and len(h) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in h)
        and 0 <= h[0] < h[1] <= 24
        for h in hours
    )
    if not ok:
        raise ConfigError(
            f"price table {origin}: row {where!r}: peak_hours_utc must be a list of [start, end) UTC hours "
            f"such as [[1, 4], [6, 10]], not {hours!r}"
        )
    try:
        since = datetime.fromisoformat(str(op["since"]).replace("Z", "+00:00"))
        if since.tzinfo is None:
            raise ValueError("no time zone")
    except ValueError as exc:
        raise ConfigError(
            f"price table {origin}: row {where!r}: since must be an ISO time with its zone, such as "
            f"2026-08-16T16:00:00Z, not {op['since']!r} ({exc})"
        ) from exc
    rates = replace(
        base, input=nums["input"], output=nums["output"], cache_read=nums["cache_read"],
        cache_write=nums["cache_write"], cache_write_1h=None, long_context=None, long_context_above=None,
    )
    return replace(
        base,
        off_peak=rates,
        peak_hours=tuple((int(a), int(b)) for a, b in hours),
        peak_weekdays_only=bool(op.get("weekdays_only", True)),
        off_peak_since=since.timestamp(),
    )


def rates_at(p: ModelPrice, at: float | None) -> ModelPrice:
    """The rates a call of row `p` made at `at` (epoch seconds; None: not known) bills at: the off-peak
    ones when the row has them and the time is a real one after they began, outside the peak hours (or on
    a weekend, for weekday-only peaks); the row's own otherwise. Public holidays a provider also counts as
    off-peak (DeepSeek: China's) are not known here, so such a call is billed at the list rate."""
    op = p.off_peak
    if op is None or at is None or at < p.off_peak_since:
        return p
    t = datetime.fromtimestamp(at, tz=UTC)
    if p.peak_weekdays_only and t.weekday() >= 5:
        return op
    h = t.hour
    return p if any(a <= h < b for a, b in p.peak_hours) else op


class PriceTable:
    def __init__(self, rows: Mapping[str, ModelPrice], aliases: Mapping[str, str], origin: str) -> None:
        self.rows = dict(rows)
        self.aliases = dict(aliases)
        self.origin = origin

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None) -> PriceTable:
        """Read a table: `path`, else $CONTEXTPIPE_PRICES, else the bundled one."""
        chosen = Path(path) if path is not None else Path(os.environ.get(ENV_VAR) or BUNDLED)
        try:
            data = json.loads(chosen.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise ConfigError(f"price table {chosen} does not exist (set {ENV_VAR} to a valid file)") from exc
        except json.JSONDecodeError as exc:
            raise ConfigError(f"price table {chosen} is not valid JSON: {exc}") from exc
        except (OSError, UnicodeDecodeError) as exc:  # a directory, unreadable, not text: was a traceback
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise ConfigError(
                f"price table {chosen} cannot be read ({why}); give a JSON price table file"
            ) from exc
        return cls.from_dict(data, str(chosen))

    @classmethod
    def from_dict(cls, data: Any, origin: str = "<dict>") -> PriceTable:
        models = data.get("models") if isinstance(data, dict) else None
        if not isinstance(models, dict) or not models:
            raise ConfigError(f"price table {origin}: expected an object with a non-empty 'models' map")
        rows: dict[str, ModelPrice] = {}
        aliases: dict[str, str] = {}
        for name, row in models.items():
            if not isinstance(row, dict):
                raise ConfigError(f"price table {origin}: row {name!r} is not an object")
            missing = [k for k in _REQUIRED if k not in row]
            if missing:
                raise ConfigError(f"price table {origin}: row {name!r} lacks {', '.join(missing)}")
            nums = _num(origin, name, row, ("input", "output", "cache_read", "cache_write"))
            w1h = (
                _num(origin, name, row, ("cache_write_1h",))["cache_write_1h"]
                if row.get("cache_write_1h") is not None
                else None
            )
            key = name.lower()
            base = ModelPrice(
                model=name,
                provider=str(row["provider"]),
                input=nums["input"],
                output=nums["output"],
                cache_read=nums["cache_read"],
                cache_write=nums["cache_write"],
                cache_write_1h=w1h,
                as_of=str(row["as_of"]),
                source=str(row["source"]),
                note=str(row.get("note") or ""),
            )
            if row.get("off_peak") is not None:
                base = _off_peak(origin, name, row, base)
            if row.get("long_context") is not None:
                lc = _long_context(origin, name, row, base)
                base = replace(base, long_context=lc, long_context_above=lc.long_context_above)
            rows[key] = base
            for a in row.get("aliases") or []:
                aliases[str(a).lower()] = key
        return cls(rows, aliases, origin)

    def known(self) -> list[str]:
        return sorted(p.model for p in self.rows.values())

    def get(self, model: str) -> ModelPrice:
        """Row for `model`. Accepts dated snapshots and provider prefixes: "claude-sonnet-4-20250514",
        "anthropic/claude-sonnet-4", "us.anthropic.claude-3-5-haiku-20241022-v1:0", "gpt-4o-2024-08-06"."""
        # The router's or cloud's spelling undone (OpenRouter's dotted versions, Vertex's MODEL@DATE, which
        # matched claude-opus-4 at the '-' boundary, three times Opus 4.5's price; Bedrock's ids): the same
        # normalizer the engine's cache minimums read.
        name = model_name(model)
        for cand in (name, name.split(":", 1)[0]):
            if cand in self.rows:
                return self.rows[cand]
            if cand in self.aliases:
                return self.rows[self.aliases[cand]]
        # Longest known name that prefixes the given one at a '-' boundary (dated snapshots, -v1 suffixes),
        # unless what follows names another model: a minor version (claude-opus-4-6 is not claude-opus-4,
        # at a third of its price) or a smaller tier (gpt-4.1-nano is not gpt-4.1). Those are refused,
        # saying so, rather than billed at the wrong row.
        names = list(self.rows) + list(self.aliases)
        best = ""
        for k in names:
            if name.startswith(k + "-") and len(k) > len(best) and not _OTHER_MODEL.match(name[len(k) + 1 :]):
                best = k
        if best:
            return self.rows[self.aliases.get(best, best)]
        raise UnknownModelError(
            f"no price for model {model!r} in {self.origin}; known models: {', '.join(self.known())}. "
            f"Add a row to your own table and point {ENV_VAR} at it."
        )


_DEFAULT: PriceTable | None = None


def load_prices(path: str | os.PathLike[str] | None = None) -> PriceTable:
    """The table at `path`, or the default one (cached per process unless $CONTEXTPIPE_PRICES changes)."""
    global _DEFAULT
    if path is not None:
        return PriceTable.load(path)
    origin = os.environ.get(ENV_VAR) or str(BUNDLED)
    if _DEFAULT is None or _DEFAULT.origin != origin:
        _DEFAULT = PriceTable.load()
    return _DEFAULT


def _field(usage: CallCache | Mapping[str, int], name: str) -> int:
    if isinstance(usage, Mapping):
        return int(usage.get(name, 0))
    return int(getattr(usage, name))


def usage_call(usage: Mapping[str, Any]) -> CallCache:
    """A normalised usage event (engine.feedback.Usage.to_dict()) as a billing split: `input_tokens` is
    the whole prompt, so what is neither read nor written is uncached; 1-hour writes are a part of writes."""
    inp = int(usage.get("input_tokens") or 0)
    read = int(usage.get("cache_read_tokens") or 0)
    write = int(usage.get("cache_write_tokens") or 0)
    w1h = min(int(usage.get("cache_write_1h_tokens") or 0), write)
    return CallCache(inp, read, write, max(0, inp - read - write), w1h)


def usage_cost(model: str, usage: Mapping[str, Any], prices: PriceTable | None = None) -> float | None:
    """USD for one call's normalised usage (output included); None for a model the table does not price."""
    try:
        return cost(model, usage_call(usage), int(usage.get("output_tokens") or 0), prices=prices)
    except ConfigError:
        return None


def cost(
    model: str,
    usage: CallCache | Mapping[str, int],
    output_tokens: int = 0,
    *,
    prices: PriceTable | str | os.PathLike[str] | None = None,
    totals: bool = False,
    at: float | None = None,
) -> float:
    """USD for one call (or, with `totals`, the sums of several): uncached input, cache reads, cache
    writes (5m and 1h) and output.

    `usage` is a CallCache or a mapping with keys uncached, cache_read, cache_write, cache_write_1h.
    One call past its row's long-context line bills at those rates, one made off-peak (`at`, epoch
    seconds) at those; sums are billed at the base rates (they cannot say which call crossed, or when each
    was made), so a caller with such calls adds up `call_cost` per call.
    """
    table = prices if isinstance(prices, PriceTable) else load_prices(prices)
    p = table.get(model)
    if totals:
        p = replace(p, long_context=None, long_context_above=None)
    elif p.off_peak is not None:
        p = rates_at(p, at)  # one call, made at `at` (None: not known, the list rate)
    if type(usage) is CallCache:
        return call_cost(p, usage, output_tokens)
    uncached = _field(usage, "uncached")
    read = _field(usage, "cache_read")
    write = _field(usage, "cache_write")
    return _usd(p, uncached, read, write, min(_field(usage, "cache_write_1h"), write), output_tokens)


def call_cost(p: ModelPrice, usage: CallCache, output_tokens: int = 0, at: float | None = None) -> float:
    """`cost` of a CallCache at price row `p` (what `cost` gives for it at the row it looks up): for a
    caller that prices many calls of one model (simulate, per turn) without a lookup per call. `at`: when
    the call was made (epoch seconds), for a row whose rates depend on the hour (`rates_at`)."""
    if p.off_peak is not None:
        p = rates_at(p, at)
    write = int(usage.cache_write)  # int(), as cost() reads any usage
    return _usd(
        p, int(usage.uncached), int(usage.cache_read), write, min(int(usage.cache_write_1h), write), output_tokens
    )


def crosses_long_context(p: ModelPrice, usage: CallCache | Mapping[str, int]) -> bool:
    """Whether one call's input is past `p`'s long-context line, so the whole call bills at those rates.
    Anthropic counts the call's input tokens, cache reads and writes included, and nothing of its output."""
    if p.long_context is None or p.long_context_above is None:
        return False
    billed = _field(usage, "uncached") + _field(usage, "cache_read") + _field(usage, "cache_write")
    return billed > p.long_context_above


def _usd(p: ModelPrice, uncached: int, read: int, write: int, write_1h: int, output_tokens: int) -> float:
    lc = p.long_context
    if lc is not None and p.long_context_above is not None and uncached + read + write > p.long_context_above:
        p = lc  # every token of the call, output too, not only those past the line
    # A table without a 1-hour price (a user's own, or a provider with one TTL) bills those writes at
    # its only write price rather than refusing the whole session.
    rate_1h = p.cache_write if p.cache_write_1h is None else p.cache_write_1h
    usd = (
        uncached * p.input
        + read * p.cache_read
        + (write - write_1h) * p.cache_write
        + write_1h * rate_1h
        + output_tokens * p.output
    )
    return usd / 1_000_000
