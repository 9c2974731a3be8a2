"""Prices with sources (issue #20, item 8): every entry names its page; an unknown model is
priced by the stated nearest-family rule and said so; a request above 200K input tokens is
priced at long-context rates where the provider charges them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contextlab import engine
from contextlab.engine.measures.cost import (
    DEFAULT_KEY,
    NEAREST_RULE,
    family_version,
    load_pricing,
    request_cost,
)
from tests.engine.builders import TranscriptBuilder


def test_every_entry_names_the_page_its_rates_came_from():
    table = load_pricing()
    for key, price in table.prices.items():
        assert price.source.startswith("https://"), key
    assert table.default.source  # the default says what it assumes


@pytest.mark.parametrize(
    ("model", "family", "version"),
    [
        ("claude-opus-4-9", "opus", 4.9),
        ("claude-opus-4-20250514", "opus", 4.0),
        ("claude-3-5-haiku-20241022", "haiku", 3.5),
        ("claude-sonnet-5", "sonnet", 5.0),
        ("sonnet", "sonnet", None),
    ],
)
def test_family_and_version_are_read_off_the_id(model, family, version):
    assert family_version(model) == (family, version)


@pytest.mark.parametrize(
    ("model", "key"),
    [
        ("claude-opus-4-4", "opus-4-5"),  # no Opus 4.4: 4.5 is nearest
        ("claude-opus-4-9", "opus-5"),  # 4.8 and 5 are as near: the newer
        ("claude-haiku-5-5", "haiku-4-5"),
        ("claude-sonnet-4-7", "sonnet-4-6"),
        ("claude-fable-5-2", "fable-5-1"),
        ("sonnet", "sonnet-5-5"),  # an alias: the family's newest
    ],
)
def test_an_unknown_model_is_priced_as_its_nearest_family_member_and_flagged(model, key):
    table = load_pricing()
    price, matched, fallback = table.price_for(model)
    assert (matched, fallback) == (key, True)
    assert price == table.prices[key]
    note = table.pricing_note(model)
    assert note is not None
    assert model in note
    assert price.label in note
    assert "nearest known model of its family" in note


def test_a_model_of_no_family_gets_the_default_and_says_so():
    table = load_pricing()
    assert table.price_for("gpt-6")[1:] == (DEFAULT_KEY, True)
    assert "no known family" in (table.pricing_note("gpt-6") or "")
    assert table.pricing_note("claude-opus-4-6") is None
    assert table.pricing_note("<synthetic>") is None
    assert "nearest known model of its family" in NEAREST_RULE


def test_a_later_release_is_not_caught_by_an_older_entry():
    # "sonnet-4" and "fable-5" entries must not price Sonnet 4.7 or Fable 5.2 silently
    table = load_pricing()
    assert table.price_for("claude-sonnet-4-7")[2] is True
    assert table.price_for("claude-fable-5-2")[2] is True
    assert table.price_for("claude-sonnet-4-20250514")[1:] == ("sonnet-4", False)
    assert table.price_for("claude-fable-5")[1:] == ("fable-5", False)


@pytest.mark.parametrize("model", ["claude-sonnet-4-5-20250929", "claude-sonnet-4-20250514"])
def test_above_200k_input_every_token_is_at_long_context_rates(model):
    def cost(read: int, write: int, uncached: int, output: int) -> float:
        return request_cost(
            model,
            uncached=uncached,
            cache_read=read,
            cache_write_5m=write,
            cache_write_1h=0,
            output=output,
        )

    # 200,000 input tokens: the base rates ($0.30 read, $3.75 write, $3 input, $15 output)
    at = cost(190_000, 9_000, 1_000, 2_000)
    assert at == pytest.approx((190_000 * 0.30 + 9_000 * 3.75 + 1_000 * 3 + 2_000 * 15) / 1e6)
    # one token more: all of it at $0.60 / $7.50 / $6 / $22.50 (cache reads count too)
    above = cost(190_001, 9_000, 1_000, 2_000)
    assert above == pytest.approx((190_001 * 0.60 + 9_000 * 7.50 + 1_000 * 6 + 2_000 * 22.50) / 1e6)


@pytest.mark.parametrize("model", ["claude-opus-4-6", "claude-sonnet-4-6", "claude-opus-5"])
def test_models_serving_1m_at_their_base_price_have_no_surcharge(model):
    price, _, _ = load_pricing().price_for(model)
    assert price.long_context is None
    assert price.cost(
        uncached=0, cache_read=500_000, cache_write_5m=0, cache_write_1h=0, output=0
    ) == pytest.approx(500_000 * price.cache_read / 1e6)


def _long_session(tmp_path: Path, model: str) -> Path:
    """Three requests whose recorded prompt is 150k, 260k and 270k tokens."""
    b = TranscriptBuilder()
    for n, (read, write) in enumerate(((0, 150_000), (150_000, 110_000), (260_000, 10_000))):
        b.prompt(f"question {n}")
        b.assistant(
            [{"type": "text", "text": f"answer {n}"}],
            model=model,
            usage={
                "input_tokens": 5,
                "cache_creation_input_tokens": write,
                "cache_read_input_tokens": read,
                "output_tokens": 100,
            },
        )
    return b.write(tmp_path / "long.jsonl")


def test_a_1m_session_over_200k_is_priced_at_long_context_rates(tmp_path):
    path = _long_session(tmp_path, "claude-sonnet-4-5-20250929")
    result = engine.replay(
        engine.load_session(str(path)), engine.get_preset("claude-code-2.1.88")
    ).to_json()
    rows = result["requests"]
    assert [r["recorded_total"] for r in rows] == [150_005, 260_005, 270_005]
    first, second, third = rows
    assert first["cost_usd"] == pytest.approx((150_000 * 3.75 + 5 * 3 + 100 * 15) / 1e6)
    assert second["cost_usd"] == pytest.approx(
        (150_000 * 0.60 + 110_000 * 7.50 + 5 * 6 + 100 * 22.50) / 1e6
    )
    assert third["cost_usd"] == pytest.approx(
        (260_000 * 0.60 + 10_000 * 7.50 + 5 * 6 + 100 * 22.50) / 1e6
    )
    assert result["summary"]["long_context_requests"] == 2
    assert result["summary"]["pricing_notes"] == []


def test_an_unknown_model_s_session_carries_the_note(tmp_path):
    path = _long_session(tmp_path, "claude-opus-4-4")
    result = engine.replay(
        engine.load_session(str(path)), engine.get_preset("claude-code-2.1.88")
    ).to_json()
    (note,) = result["summary"]["pricing_notes"]
    assert note.startswith("claude-opus-4-4 is not in the price table: priced as Claude Opus 4.5")
    # priced as Opus 4.5 exactly ($5 input, no long-context table)
    row = result["requests"][0]
    assert row["cost_usd"] == pytest.approx((150_000 * 6.25 + 5 * 5 + 100 * 25) / 1e6)
    json.dumps(result)  # plain JSON


LONG_TABLE = """
[default]
input = 3
cache_write_5m = 3.75
cache_write_1h = 6
cache_read = 0.3
output = 15

[models.m]
match = ["model-m"]
source = "https://example.test/prices"
input = 1
cache_write_5m = 1
cache_write_1h = 1
cache_read = 1
output = 1

[models.m.long_context]
above = 100
input = 2
cache_write_5m = 2
cache_write_1h = 2
cache_read = 2
output = 2
"""


def test_a_custom_table_s_long_context_applies_above_its_threshold(tmp_path: Path):
    path = tmp_path / "prices.toml"
    path.write_text(LONG_TABLE)
    price, _, _ = load_pricing(str(path)).price_for("model-m")
    assert price.source == "https://example.test/prices"
    assert price.cost(
        uncached=100, cache_read=0, cache_write_5m=0, cache_write_1h=0, output=10
    ) == (pytest.approx(110 / 1e6))
    assert price.cost(
        uncached=101, cache_read=0, cache_write_5m=0, cache_write_1h=0, output=10
    ) == (pytest.approx(222 / 1e6))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("above = 100", "above = -1"), "'long_context.above' must be an integer > 0"),
        (("above = 100", "above = true"), "'long_context.above' must be an integer > 0"),
        (("input = 2", 'input = "2"'), "long_context: 'input' must be a number >= 0"),
        (("[models.m.long_context]\n", "[models.m]\nlong_context = 5\n[x]\n"), "not valid TOML"),
    ],
)
def test_a_broken_long_context_table_names_the_problem(tmp_path: Path, edit, message):
    path = tmp_path / "prices.toml"
    old, new = edit
    path.write_text(LONG_TABLE.replace(old, new, 1))
    with pytest.raises(ValueError, match=message.replace("[", r"\[")):
        load_pricing(str(path))


def test_a_long_context_that_is_not_a_table_is_refused(tmp_path: Path):
    path = tmp_path / "prices.toml"
    without = LONG_TABLE.split("[models.m.long_context]")[0]
    path.write_text(without.replace("output = 1\n", "output = 1\nlong_context = 5\n"))
    with pytest.raises(ValueError, match="'long_context' must be a table of rates"):
        load_pricing(str(path))
