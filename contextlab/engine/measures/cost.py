"""Cost of an API request in USD, from its token usage and an editable per-model price table.

cost = (uncached × input + 5m writes × cache_write_5m + 1h writes × cache_write_1h
        + cache reads × cache_read + output × output) / 1e6, prices in $/MTok (spec §6.4, §7).
The rates are explicit per family in ``data/pricing.toml`` rather than derived with the usual
1.25× / 2× / 0.1× multipliers, because the newer families do not follow them.
"""

from __future__ import annotations

import pkgutil
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from contextlab.engine.input.model import Usage

__all__ = ["DEFAULT_KEY", "Price", "PricingTable", "load_pricing", "request_cost"]

#: The key ``price_for`` reports for a model no entry matches.
DEFAULT_KEY = "default"
#: Model id Claude Code writes on assistant records that made no API call (same as
#: ``parsing.SYNTHETIC_MODEL``; not imported, to keep this module free-standing).
SYNTHETIC_MODEL = "<synthetic>"
_RATE_FIELDS = ("input", "cache_write_5m", "cache_write_1h", "cache_read", "output")


@dataclass(frozen=True, slots=True)
class Price:
    """Rates of one model family in USD per million tokens, and its minimum cacheable prefix."""

    label: str
    input: float
    cache_write_5m: float
    cache_write_1h: float
    cache_read: float
    output: float
    min_cacheable: int = 1024

    def cost(
        self,
        *,
        uncached: int,
        cache_read: int,
        cache_write_5m: int,
        cache_write_1h: int,
        output: int,
    ) -> float:
        """USD for the given token counts."""
        micro_dollars = (
            uncached * self.input
            + cache_write_5m * self.cache_write_5m
            + cache_write_1h * self.cache_write_1h
            + cache_read * self.cache_read
            + output * self.output
        )
        return micro_dollars / 1_000_000


@dataclass(frozen=True, slots=True)
class PricingTable:
    """Model prices keyed by family, matched to model ids by substring.

    ``patterns`` is ordered longest first, which is what makes "most specific first" hold
    regardless of the order of entries in the file ("opus-4-6" is tried before "opus-4-0").
    """

    prices: dict[str, Price]
    patterns: tuple[tuple[str, str], ...]
    default: Price
    version: str = ""
    _memo: dict[str, tuple[Price, str, bool]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def price_for(self, model: str | None) -> tuple[Price, str, bool]:
        """(price, matched key, is_fallback) for a model id such as "claude-opus-4-6".

        Unknown or missing ids get the ``default`` entry with ``is_fallback`` True, so callers
        can flag the cost as an estimate on assumed prices.
        """
        if not model:
            return self.default, DEFAULT_KEY, True
        found = self._memo.get(model)
        if found is None:
            found = (self.default, DEFAULT_KEY, True)
            lowered = model.lower()
            for pattern, key in self.patterns:
                if pattern in lowered:
                    found = (self.prices[key], key, False)
                    break
            self._memo[model] = found
        return found


def load_pricing(path: str | None = None) -> PricingTable:
    """Load a price table: the bundled ``data/pricing.toml`` by default (parsed once), or a
    TOML file with the same layout. Raises ``ValueError`` naming the file and the bad entry."""
    if path is None:
        return _bundled_pricing()
    return _parse(Path(path).read_text(encoding="utf-8"), source=path)


@lru_cache(maxsize=1)
def _bundled_pricing() -> PricingTable:
    return _parse(
        _package_text("data/pricing.toml"), source="contextlab/engine/measures/data/pricing.toml"
    )


def _package_text(name: str) -> str:
    """A data file shipped in this package, read through its loader (so also from a zip) like
    ``importlib.resources`` does, without importing importlib.resources (and tempfile and
    zipfile with it) on every start-up; newlines translated as text mode does."""
    data = pkgutil.get_data(__package__ or "contextlab.engine", name)
    if data is None:
        raise FileNotFoundError(name)
    return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


def request_cost(
    model: str | None,
    *,
    uncached: int,
    cache_read: int,
    cache_write_5m: int,
    cache_write_1h: int,
    output: int,
    pricing: PricingTable | None = None,
) -> float:
    """USD cost of one API request; 0.0 for ``<synthetic>`` or missing models (no API call)."""
    if model is None or model == "" or model == SYNTHETIC_MODEL:
        return 0.0
    price, _, _ = (pricing or load_pricing()).price_for(model)
    return price.cost(
        uncached=uncached,
        cache_read=cache_read,
        cache_write_5m=cache_write_5m,
        cache_write_1h=cache_write_1h,
        output=output,
    )


def iterations_cost(
    request_model: str | None, usage: Usage, pricing: PricingTable | None = None
) -> float:
    """USD cost of the model calls a request made after its first (``Usage.iterations``): an
    advisor's at its own model, the request model's continuations at the request model."""
    return sum(
        request_cost(
            it.model or request_model,
            uncached=it.input,
            cache_read=it.cache_read,
            cache_write_5m=it.cache_write_5m,
            cache_write_1h=it.cache_write_1h,
            output=it.output,
            pricing=pricing,
        )
        for it in usage.iterations
    )


def _parse(text: str, *, source: str) -> PricingTable:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{source}: not valid TOML: {exc}") from exc
    default_raw = data.get(DEFAULT_KEY)
    if not isinstance(default_raw, dict):
        raise ValueError(f"{source}: missing the [{DEFAULT_KEY}] table")
    models = data.get("models", {})
    if not isinstance(models, dict):
        raise ValueError(f"{source}: 'models' must be a table of [models.<key>] entries")

    prices: dict[str, Price] = {}
    owner: dict[str, str] = {}
    for key, raw in models.items():
        where = f"{source}: [models.{key}]"
        if not isinstance(raw, dict):
            raise ValueError(f"{where} must be a table")
        prices[key] = _price(raw, where, default_label=key)
        match = raw.get("match")
        if (
            not isinstance(match, list)
            or not match
            or not all(isinstance(m, str) and m.strip() for m in match)
        ):
            raise ValueError(f"{where}: 'match' must be a non-empty list of strings")
        for m in match:
            pattern = m.strip().lower()
            if pattern in owner and owner[pattern] != key:
                raise ValueError(
                    f"{where}: pattern {m!r} is also used by [models.{owner[pattern]}]"
                )
            owner[pattern] = key

    # Longest pattern first; ties keep file order (dicts preserve insertion order, sort is stable).
    patterns = tuple(sorted(owner.items(), key=lambda item: -len(item[0])))
    default = _price(default_raw, f"{source}: [{DEFAULT_KEY}]", default_label="Unknown model")
    return PricingTable(prices, patterns, default, version=str(data.get("version", "")))


def _price(raw: dict[str, Any], where: str, *, default_label: str) -> Price:
    rates: dict[str, float] = {}
    for name in _RATE_FIELDS:
        value = raw.get(name)
        # bool is an int subclass; "input = true" is a typo, not a price
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise ValueError(
                f"{where}: '{name}' must be a number >= 0 (USD per MTok), got {value!r}"
            )
        rates[name] = float(value)
    min_cacheable = raw.get("min_cacheable", 1024)
    if isinstance(min_cacheable, bool) or not isinstance(min_cacheable, int) or min_cacheable < 0:
        raise ValueError(f"{where}: 'min_cacheable' must be an integer >= 0, got {min_cacheable!r}")
    return Price(
        label=str(raw.get("label", default_label)),
        input=rates["input"],
        cache_write_5m=rates["cache_write_5m"],
        cache_write_1h=rates["cache_write_1h"],
        cache_read=rates["cache_read"],
        output=rates["output"],
        min_cacheable=min_cacheable,
    )
