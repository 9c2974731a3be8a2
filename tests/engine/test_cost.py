"""Pricing table lookup and the per-request cost formula, checked by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextlab.engine.measures.cost import DEFAULT_KEY, load_pricing, model_price, request_cost

MODEL_IDS = [
    ("claude-opus-4-6", "opus-4-6", 5.0),
    ("claude-opus-4-6[1m]", "opus-4-6", 5.0),
    ("claude-opus-4-5-20251101", "opus-4-5", 5.0),
    ("claude-opus-4-1-20250805", "opus-4-1", 15.0),
    ("claude-opus-4-1@20250805", "opus-4-1", 15.0),
    ("claude-opus-4-20250514", "opus-4", 15.0),
    ("claude-opus-4-0", "opus-4", 15.0),
    ("claude-sonnet-4-6", "sonnet-4-6", 3.0),
    ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "sonnet-4-5", 3.0),
    ("claude-sonnet-4-20250514", "sonnet-4", 3.0),
    ("claude-3-7-sonnet-20250219", "sonnet-3-7", 3.0),
    ("claude-haiku-4-5-20251001", "haiku-4-5", 1.0),
    ("claude-3-5-haiku-20241022", "haiku-3-5", 0.8),
    ("claude-3-haiku-20240307", "haiku-3", 0.25),
    ("claude-opus-5", "opus-5", 5.0),
    ("claude-opus-5-5", "opus-5-5", 4.0),
    ("claude-sonnet-5", "sonnet-5", 2.0),
    ("claude-sonnet-5-5", "sonnet-5-5", 2.0),
    ("claude-fable-5-1", "fable-5-1", 10.0),
    ("claude-opus-4-8", "opus-4-8", 5.0),
    ("claude-opus-4-7", "opus-4-7", 5.0),
    ("claude-fable-5", "fable-5", 10.0),
    ("claude-mythos-5", "mythos-5", 10.0),
    ("claude-mythos-5-1", "mythos-5-1", 10.0),
    ("Claude-Opus-4-6", "opus-4-6", 5.0),
    # OpenAI's, for Codex sessions
    ("gpt-5-codex", "gpt-5", 1.25),
    ("gpt-5.1-codex-max", "gpt-5", 1.25),
    ("gpt-5.1-codex-mini", "gpt-5-mini", 0.25),
    ("gpt-5-nano", "gpt-5-nano", 0.05),
    ("gpt-5.2-codex", "gpt-5-2", 1.75),
    ("gpt-5.3-codex", "gpt-5-2", 1.75),
    ("codex-mini-latest", "codex-mini-latest", 1.50),
    ("gpt-5-codex-mini", "gpt-5-mini", 0.25),
    ("gpt-5.4", "gpt-5-4", 2.50),
    ("gpt-5.4-mini", "gpt-5-4-mini", 0.75),
    ("gpt-5.4-nano", "gpt-5-4-nano", 0.20),
    ("gpt-5.5", "gpt-5-5", 5.00),
]


def cost(
    model: str | None,
    *,
    uncached: int = 0,
    cache_read: int = 0,
    cache_write_5m: int = 0,
    cache_write_1h: int = 0,
    output: int = 0,
) -> float:
    return request_cost(
        model,
        uncached=uncached,
        cache_read=cache_read,
        cache_write_5m=cache_write_5m,
        cache_write_1h=cache_write_1h,
        output=output,
    )


@pytest.mark.parametrize(("model", "key", "input_price"), MODEL_IDS)
def test_model_ids_match_their_family(model, key, input_price):
    price, matched, fallback = load_pricing().price_for(model)
    assert (matched, fallback) == (key, False)
    assert price.input == input_price


def test_every_family_in_the_table_is_reachable():
    assert {key for _, key, _ in MODEL_IDS} == set(load_pricing().prices)


@pytest.mark.parametrize("model", ["gpt-4o", "", None])
def test_models_of_no_known_family_get_sonnet_prices_flagged_as_fallback(model):
    price, key, fallback = load_pricing().price_for(model)
    assert (key, fallback) == (DEFAULT_KEY, True)
    assert (price.input, price.output) == (3.0, 15.0)


@pytest.mark.parametrize(
    "key",
    [
        "opus-4-6",
        "opus-4-5",
        "opus-4-1",
        "opus-4",
        "sonnet-4-6",
        "sonnet-4-5",
        "sonnet-4",
        "sonnet-3-7",
        "haiku-4-5",
        "haiku-3-5",
    ],
)
def test_mar_2026_families_follow_the_documented_multipliers(key):
    p = load_pricing().prices[key]
    assert p.cache_write_5m == pytest.approx(1.25 * p.input)
    assert p.cache_write_1h == pytest.approx(2 * p.input)
    assert p.cache_read == pytest.approx(0.1 * p.input)


def test_one_million_cache_read_tokens_on_opus_4_6_cost_50_cents():
    assert cost("claude-opus-4-6", cache_read=1_000_000) == pytest.approx(0.50)


def test_opus_5_5_reads_at_its_own_rate_not_a_tenth_of_input():
    assert cost("claude-opus-5-5", cache_read=1_000_000) == pytest.approx(0.20)


def test_cost_adds_every_usage_field_at_its_own_rate():
    # Sonnet 4.5: 1k x $3 + 2k x $3.75 + 3k x $6 + 100k x $0.30 + 500 x $15 = $66,000 per MTok
    got = cost(
        "claude-sonnet-4-5-20250929",
        uncached=1000,
        cache_write_5m=2000,
        cache_write_1h=3000,
        cache_read=100_000,
        output=500,
    )
    assert got == pytest.approx(0.066)


def test_haiku_3_uses_the_explicit_table_rates():
    # 1M 5m-write tokens at $0.30, not 1.25 x $0.25
    assert cost("claude-3-haiku-20240307", cache_write_5m=1_000_000) == pytest.approx(0.30)


@pytest.mark.parametrize("model", ["<synthetic>", None])
def test_synthetic_or_missing_model_costs_nothing(model):
    assert cost(model, uncached=5000, output=1000) == 0.0


@pytest.mark.parametrize("model", ["<synthetic>", None, ""])
def test_a_model_without_an_api_call_has_no_rates(model):
    assert model_price(model, load_pricing()) is None


@pytest.mark.parametrize("model", ["claude-opus-4-6", "claude-haiku-3", "gpt-5.3-codex", "mystery"])
def test_a_model_is_billed_at_the_rates_its_request_cost_uses(model):
    # the replay prices a request's estimate and its recording from one ``model_price``
    pricing = load_pricing()
    price = model_price(model, pricing)
    assert price is pricing.price_for(model)[0]
    figures = {
        "uncached": 1234,
        "cache_read": 56789,
        "cache_write_5m": 321,
        "cache_write_1h": 45,
        "output": 678,
    }
    assert price.cost(**figures) == request_cost(model, pricing=pricing, **figures)


def test_the_bundled_table_is_parsed_once():
    assert load_pricing() is load_pricing()


TABLE = """
[default]
input = 1
cache_write_5m = 2
cache_write_1h = 3
cache_read = 0.5
output = 4

[models.general]
match = ["opus-4"]
input = 10
cache_write_5m = 20
cache_write_1h = 30
cache_read = 1
output = 40

[models.specific]
match = ["opus-4-6"]
input = 100
cache_write_5m = 200
cache_write_1h = 300
cache_read = 10
output = 400
min_cacheable = 4096
"""


def test_a_custom_table_prefers_the_longest_match_whatever_the_file_order(tmp_path: Path):
    path = tmp_path / "prices.toml"
    path.write_text(TABLE)
    table = load_pricing(str(path))
    price, key, fallback = table.price_for("claude-opus-4-6")
    assert (key, fallback, price.min_cacheable) == ("specific", False, 4096)
    assert table.price_for("claude-opus-4-1")[1] == "general"
    assert (
        request_cost(
            "claude-opus-4-6",
            uncached=1_000_000,
            cache_read=0,
            cache_write_5m=0,
            cache_write_1h=0,
            output=0,
            pricing=table,
        )
        == 100.0
    )


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("[default]", "[fallback]"), "missing the [default] table"),
        (("input = 10", "input = -10"), "'input' must be a number >= 0"),
        (('match = ["opus-4-6"]', 'match = ["opus-4"]'), "also used by"),
        (('match = ["opus-4"]', "match = []"), "'match' must be a non-empty list"),
        (("output = 4\n", "output = 4\n[broken"), "not valid TOML"),
    ],
)
def test_a_broken_table_names_the_problem(tmp_path: Path, edit, message):
    path = tmp_path / "prices.toml"
    old, new = edit
    path.write_text(TABLE.replace(old, new, 1))
    with pytest.raises(ValueError, match=message.replace("[", r"\[")):
        load_pricing(str(path))
