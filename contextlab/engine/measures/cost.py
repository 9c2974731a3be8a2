"""Cost of an API request in USD, from its token usage and an editable per-model price table.

cost = (uncached × input + 5m writes × cache_write_5m + 1h writes × cache_write_1h
        + cache reads × cache_read + output × output) / 1e6, prices in $/MTok (spec §6.4, §7).
The rates are explicit per family in ``data/pricing.toml`` rather than derived with the usual
1.25× / 2× / 0.1× multipliers, because the newer families do not follow them; each entry names
the page its rates came from.

Long context: where the provider charges more above a prompt size (``long_context.above``,
200,000 input tokens on Anthropic's page: uncached + cache reads + cache writes), every token
of a request over it is priced at the ``long_context`` rates, output included.

Unknown models (``NEAREST_RULE``): an id the table does not match is priced as the nearest
known member of its family (opus, sonnet, haiku, ...), by version number, the newer on a tie;
an id of no known family gets ``[default]``. Either way ``price_for`` flags it, and
``pricing_note`` says in a sentence what it was priced as, for every page that shows its cost.
"""

from __future__ import annotations

import pkgutil
import re
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from contextlab.engine.input.model import Usage

__all__ = [
    "DEFAULT_KEY",
    "NEAREST_RULE",
    "Price",
    "PricingTable",
    "load_pricing",
    "model_price",
    "request_cost",
]

#: The key ``price_for`` reports for a model no entry matches.
DEFAULT_KEY = "default"
#: Model id Claude Code writes on assistant records that made no API call (same as
#: ``parsing.SYNTHETIC_MODEL``; not imported, to keep this module free-standing).
SYNTHETIC_MODEL = "<synthetic>"
_RATE_FIELDS = ("input", "cache_write_5m", "cache_write_1h", "cache_read", "output")
#: how a model the table does not know is priced, in a sentence
NEAREST_RULE = (
    "a model the price table does not list is priced as the nearest known model of its family "
    "(opus, sonnet, haiku, fable, mythos) by version number, the newer on a tie (an alias with "
    "no version, such as 'sonnet', as the family's newest); a model of no known family at the "
    "[default] rates"
)
_FAMILIES = ("opus", "sonnet", "haiku", "fable", "mythos")
#: "opus-4-9", "sonnet-5", "opus-4-20250514" (a date is no minor version), "haiku-4.5"
_NEW_STYLE = re.compile(r"(opus|sonnet|haiku|fable|mythos)-(\d{1,2})(?:[-.](\d{1,2}))?(?!\d)")
#: "claude-3-5-haiku", "3-7-sonnet"
_OLD_STYLE = re.compile(r"(?<!\d)(\d)(?:-(\d))?-(opus|sonnet|haiku)")


def family_version(name: str) -> tuple[str, float | None] | None:
    """(family, version) of a model id or a table key: ("opus", 4.9) for "claude-opus-4-9",
    ("sonnet", None) for the alias "sonnet", None for no known family."""
    lowered = name.lower()
    found = _NEW_STYLE.search(lowered)
    if found:
        major, minor = found.group(2), found.group(3)
        return found.group(1), float(f"{major}.{minor or 0}")
    old = _OLD_STYLE.search(lowered)
    if old:
        return old.group(3), float(f"{old.group(1)}.{old.group(2) or 0}")
    family = next((f for f in _FAMILIES if f in lowered), None)
    return (family, None) if family else None


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
    #: the rates above ``long_context_above`` input tokens, where the provider charges more
    long_context: Price | None = None
    long_context_above: int = 200_000
    #: the page the rates came from, and when it was read
    source: str = ""

    def rates_for(self, prompt_tokens: int) -> Price:
        """The rates a request of ``prompt_tokens`` input tokens is billed at."""
        if self.long_context is not None and prompt_tokens > self.long_context_above:
            return self.long_context
        return self

    def cost(
        self,
        *,
        uncached: int,
        cache_read: int,
        cache_write_5m: int,
        cache_write_1h: int,
        output: int,
    ) -> float:
        """USD for the given token counts (at the long-context rates past their threshold)."""
        rates = self.rates_for(uncached + cache_read + cache_write_5m + cache_write_1h)
        micro_dollars = (
            uncached * rates.input
            + cache_write_5m * rates.cache_write_5m
            + cache_write_1h * rates.cache_write_1h
            + cache_read * rates.cache_read
            + output * rates.output
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

        An id no entry matches is priced by ``NEAREST_RULE`` (the nearest known member of its
        family, else the ``default`` entry) with ``is_fallback`` True, so callers can say the
        cost rests on assumed prices (``pricing_note``).
        """
        if not model:
            return self.default, DEFAULT_KEY, True
        found = self._memo.get(model)
        if found is None:
            lowered = model.lower()
            matched = next(
                (key for pattern, key in self.patterns if _matches(pattern, lowered)), None
            )
            if matched is not None:
                found = (self.prices[matched], matched, False)
            else:
                near = self._nearest(model)
                found = (
                    (self.prices[near], near, True)
                    if near
                    else (
                        self.default,
                        DEFAULT_KEY,
                        True,
                    )
                )
            self._memo[model] = found
        return found

    def _nearest(self, model: str) -> str | None:
        """The key of the known model nearest ``model`` in its family, None without one."""
        wanted = family_version(model)
        if wanted is None:
            return None
        family, version = wanted
        known = [
            (key, v)
            for key in self.prices
            if (fv := family_version(key)) is not None and fv[0] == family and (v := fv[1])
        ]
        if not known:
            return None
        if version is None:  # an alias ("sonnet"): the family's newest
            return max(known, key=lambda kv: kv[1])[0]
        return min(known, key=lambda kv: (round(abs(kv[1] - version), 3), -kv[1]))[0]

    def pricing_note(self, model: str | None) -> str | None:
        """A sentence for the pages when ``model`` is priced on assumed rates, else None."""
        if not model or model == SYNTHETIC_MODEL:
            return None
        price, key, fallback = self.price_for(model)
        if not fallback:
            return None
        if key == DEFAULT_KEY:
            return (
                f"{model} is not in the price table and of no known family: priced at the "
                f"default rates ({price.label})"
            )
        return (
            f"{model} is not in the price table: priced as {price.label}, the nearest known "
            f"model of its family"
        )


def _matches(pattern: str, model: str) -> bool:
    """A ``match`` pattern against a lower-cased model id: a substring, or, ending in "$", the
    end of the id (a "[1m]" window suffix aside), so "fable-5$" is not "fable-5-2"."""
    if pattern.endswith("$"):
        return model.removesuffix("[1m]").endswith(pattern[:-1])
    return pattern in model


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


def model_price(model: str | None, pricing: PricingTable) -> Price | None:
    """The rates ``model``'s requests are billed at; None for ``<synthetic>`` or a missing
    model (no API call: ``request_cost`` is 0.0)."""
    if model is None or model == "" or model == SYNTHETIC_MODEL:
        return None
    return pricing.price_for(model)[0]


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
    price = model_price(model, pricing or load_pricing())
    if price is None:
        return 0.0
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
    long_raw = raw.get("long_context")
    long_context: Price | None = None
    above = 200_000
    if long_raw is not None:
        if not isinstance(long_raw, dict):
            raise ValueError(f"{where}: 'long_context' must be a table of rates")
        above = long_raw.get("above", above)
        if isinstance(above, bool) or not isinstance(above, int) or above <= 0:
            raise ValueError(f"{where}: 'long_context.above' must be an integer > 0, got {above!r}")
        long_context = _price(
            {k: v for k, v in long_raw.items() if k != "above"},
            f"{where}.long_context",
            default_label=f"{raw.get('label', default_label)} (long context)",
        )
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
        long_context=long_context,
        long_context_above=above,
        source=str(raw.get("source", "")),
    )
