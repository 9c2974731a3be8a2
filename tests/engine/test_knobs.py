"""Real knobs: every what-if field says which Claude Code setting produces it (or that none does),
and a config's overrides become a settings.json fragment and environment lines."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from contextlab import engine
from contextlab.engine.config import knobs
from contextlab.engine.config.fields import PipelineConfig
from contextlab.engine.config.thresholds import compute_thresholds

VERSIONS_DOC = Path(__file__).resolve().parents[2] / "docs" / "claude-code-versions.md"
OPUS_45 = "claude-opus-4-5-20251101"


def test_every_field_has_a_kind_and_the_table_names_only_real_fields():
    names = {spec["name"] for spec in engine.field_specs()}
    assert set(knobs.KNOBS) <= names
    assert names >= knobs.MEASUREMENT_FIELDS
    assert not set(knobs.KNOBS) & knobs.MEASUREMENT_FIELDS
    for spec in engine.field_specs():
        counterpart = spec["counterpart"]
        assert counterpart["kind"] in ("knob", "experiment", "measurement")
        assert counterpart["experiment"] == (counterpart["kind"] == "experiment")
        assert bool(counterpart["knobs"]) == (counterpart["kind"] == "knob")


@pytest.mark.parametrize(
    "field",
    ["snip_enabled", "collapse_enabled", "autocompact_buffer_tokens", "time_based_mc_enabled"],
)
def test_constants_flags_and_modeled_steps_are_experiments(field):
    assert engine.field_kind(field) == "experiment"


def test_each_knob_name_and_version_is_in_the_versions_doc():
    """docs/claude-code-versions.md §9 records where each name was read, with its version."""
    text = VERSIONS_DOC.read_text(encoding="utf-8")
    section = text[text.index("## 9.") :]
    for field, table in knobs.KNOBS.items():
        for knob in table:
            rows = [line for line in section.splitlines() if f"`{knob.name}`" in line]
            assert rows, f"{knob.name} ({field}) is not in §9"
            assert any(knob.since in row for row in rows), f"{knob.name}: {knob.since} not in §9"


def test_overrides_become_settings_and_env_lines():
    out = engine.claude_code_settings(
        {
            "autocompact_pct_override": 70.0,
            "cache_ttl": "1h",
            "auto_compact_window": 400_000,
            "snip_enabled": True,
            "anchors_enabled": False,
        }
    )
    assert out.settings["promptCacheTtl"] == "1h"
    assert out.settings["autoCompactWindow"] == 400_000
    assert out.env == {"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "70"}
    assert out.settings["env"] == out.env
    assert out.env_lines() == ["export CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=70"]
    assert set(out.not_expressible) == {"snip_enabled", "anchors_enabled"}
    assert "experiment" in out.not_expressible["snip_enabled"]
    assert out.min_version == "2.1.242"
    json.loads(out.settings_json())


def test_an_older_target_version_falls_back_to_the_env_variable_or_says_it_cannot():
    old = engine.claude_code_settings(
        {"cache_ttl": "1h", "auto_compact_window": 400_000}, version="2.1.241"
    )
    assert old.env == {"ENABLE_PROMPT_CACHING_1H": "1"}
    assert old.settings["autoCompactWindow"] == 400_000
    older = engine.claude_code_settings(
        {"cache_ttl": "1h", "auto_compact_window": 400_000}, version="2.1.90"
    )
    assert older.env == {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "400000"}
    assert "cache_ttl" in older.not_expressible
    assert "2.1.108" in older.not_expressible["cache_ttl"]


def test_values_outside_a_knobs_limits_are_not_expressible():
    out = engine.claude_code_settings({"auto_compact_window": 50_000, "context_window": 500_000})
    assert out.settings == {}
    assert out.env == {}
    assert "100,000" in out.not_expressible["auto_compact_window"]
    assert "200,000" in out.not_expressible["context_window"]


@pytest.mark.parametrize(
    "overrides",
    [
        {"autocompact_pct_override": 80.0},
        {"autocompact_pct_override": 62.5, "cache_ttl": "5m"},
        {"auto_compact_window": 300_000, "autocompact_enabled": False},
        {"max_output_tokens": 16_000, "blocking_limit_override": 150_000},
        {"context_window": 200_000, "cache_ttl": "1h"},
    ],
)
def test_settings_read_back_as_the_same_overrides(overrides):
    out = engine.claude_code_settings(overrides)
    assert out.not_expressible == {}
    assert engine.overrides_from_settings(out.settings) == overrides
    # the settings fragment is a valid what-if config again
    PipelineConfig().replace(**engine.overrides_from_settings(out.settings))


def test_the_percentage_override_only_lowers_the_threshold():
    """The limit the knob declares is the arithmetic the engine replays."""
    base = compute_thresholds(PipelineConfig(), OPUS_45).autocompact_threshold
    full = compute_thresholds(PipelineConfig(autocompact_pct_override=100), OPUS_45)
    lower = compute_thresholds(PipelineConfig(autocompact_pct_override=50), OPUS_45)
    assert full.autocompact_threshold == base
    assert lower.autocompact_threshold == lower.effective_window // 2 < base
    assert re.search("only lower", knobs.KNOBS["autocompact_pct_override"][0].limits)


def test_version_key_orders_versions_numerically():
    assert knobs.version_key("2.1.243") > knobs.version_key("2.1.99")
    assert knobs.version_key("garbage") == ()
