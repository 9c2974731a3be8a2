"""PipelineConfig: defaults, validation, serialisation, files, presets and version mapping."""

from __future__ import annotations

import dataclasses
import json
import math
import pickle
from pathlib import Path

import pytest

from contextlab.engine.config import presets as presets_module
from contextlab.engine.config.errors import ConfigError
from contextlab.engine.config.fields import FrozenMap, PipelineConfig, get_preset
from contextlab.engine.config.files import read_settings
from contextlab.engine.config.forms import FIELD_DOCS, FIELD_RANGES, field_specs
from contextlab.engine.config.presets import LATEST_PRESET, parse_version, preset_for_version
from contextlab.engine.config.resolve import (
    PRESET_DESCRIPTIONS,
    PRESET_NAMES,
    PRESETS,
    resolve_config,
)

# Every default named in pipeline-spec §1 / facts "(a) Constants table", by field.
SPEC_DEFAULTS: dict[str, object] = {
    "context_window": 200_000,
    "max_output_tokens": None,
    "max_output_tokens_for_summary": 20_000,
    "reserve_full_max_output": False,
    "auto_compact_window": None,
    "otk_slot_cap_enabled": False,
    "capped_default_max_tokens": 8_000,
    "autocompact_enabled": True,
    "autocompact_buffer_tokens": 13_000,
    "autocompact_pct_override": None,
    "warning_threshold_buffer_tokens": 20_000,
    "error_threshold_buffer_tokens": 20_000,
    "manual_compact_buffer_tokens": 3_000,
    "blocking_limit_base": "effective",
    "blocking_limit_override": None,
    "max_consecutive_autocompact_failures": 3,
    "max_output_tokens_for_compact": 20_000,
    "compact_cache_prefix": True,
    "max_ptl_retries": 3,
    "ptl_fallback_drop_pct": 0.2,
    "sm_compact_enabled": False,
    "sm_compact_min_tokens": 10_000,
    "sm_compact_min_text_block_messages": 5,
    "sm_compact_max_tokens": 40_000,
    "sm_compact_section_max_chars": 8_000,
    "post_compact_max_files_to_restore": 5,
    "post_compact_max_tokens_per_file": 5_000,
    "post_compact_token_budget": 50_000,
    "post_compact_max_tokens_per_skill": 5_000,
    "post_compact_skills_token_budget": 25_000,
    "default_max_result_size_chars": 50_000,
    "default_declared_max_result_size_chars": 100_000,
    "per_tool_threshold_overrides": {},
    "preview_size_bytes": 2_000,
    "per_message_budget_enabled": False,
    "per_message_budget_chars": 200_000,
    "time_based_mc_enabled": False,
    "time_based_mc_gap_threshold_minutes": 60,
    "time_based_mc_keep_recent": 5,
    "cached_mc_enabled": False,
    "api_clear_tool_uses_enabled": False,
    "api_max_input_tokens": 180_000,
    "api_target_input_tokens": 40_000,
    "api_clear_tool_uses_keep": 3,
    "thinking_clear_idle_minutes": 60,
    "snip_enabled": False,
    "collapse_enabled": False,
    "collapse_commit_pct": 0.90,
    "collapse_blocking_pct": 0.95,
    "cache_lookback_blocks": 20,
    "cache_lookback_enabled": True,
    "cache_ttl": "auto",
    "system_cache_breakpoints": 1,
    "cache_break_min_miss_tokens": 2_000,
    "cache_break_min_drop_pct": 0.05,
    "bytes_per_token": 4,
    "image_max_token_size": 2_000,
    "api_max_media_per_request": 100,
}

MODELED = {
    "window_from_records",
    "anchors_enabled",
    "anchor_selection",
    "whatif_recorded_counts",
    "cache_global_prefix_warm",
    "cache_system_prefix_share",
    "cache_system_survival_seconds",
    "cached_mc_enabled",
    "cached_mc_trigger_threshold",
    "cached_mc_keep_recent",
    "api_clear_tool_uses_enabled",
    "api_max_input_tokens",
    "api_target_input_tokens",
    "api_clear_tool_uses_keep",
    "snip_enabled",
    "snip_trigger_pct",
    "snip_target_pct",
    "snip_keep_head_messages",
    "snip_keep_recent_messages",
    "collapse_enabled",
    "collapse_commit_pct",
    "collapse_blocking_pct",
    "collapse_min_span_messages",
    "collapse_max_span_messages",
    "collapse_keep_recent_messages",
    "collapse_summary_max_tokens",
}


def raises_config_error(field: str, **changes) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        PipelineConfig(**changes)
    assert info.value.field == field, str(info.value)
    return info.value


# -- defaults --------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "expected"), SPEC_DEFAULTS.items())
def test_default_matches_the_claude_code_constant(name, expected):
    value = PipelineConfig().to_dict()[name]
    assert value == expected
    assert type(value) is type(expected)


def test_declared_result_sizes_are_the_built_in_tools_values():
    declared = PipelineConfig().declared_max_result_size_chars
    assert dict(declared) == {
        "Bash": 30_000,
        "PowerShell": 30_000,
        "Grep": 20_000,
        "McpAuth": 10_000,
        "Read": None,
    }


def test_compactable_tools_are_the_nine_microcompact_tools():
    assert PipelineConfig().compactable_tools == (
        "Read",
        "Bash",
        "PowerShell",
        "Grep",
        "Glob",
        "WebSearch",
        "WebFetch",
        "Edit",
        "Write",
    )


def test_modeled_settings_are_flagged_and_their_steps_are_off_by_default():
    specs = {spec["name"]: spec for spec in field_specs()}
    assert {name for name, spec in specs.items() if spec["modeled"]} == MODELED
    config = PipelineConfig()
    for switch in ("cached_mc_enabled", "api_clear_tool_uses_enabled"):
        assert getattr(config, switch) is False
    assert config.snip_enabled is False
    assert config.collapse_enabled is False


def test_every_setting_is_documented_with_its_source():
    names = [f.name for f in dataclasses.fields(PipelineConfig)]
    assert list(FIELD_DOCS) == names
    for spec in field_specs():
        assert spec["doc"].strip(), spec["name"]
        assert spec["source"].strip(), spec["name"]


def test_every_numeric_setting_has_an_explicit_range():
    for spec in field_specs():
        if spec["type"].split(" ")[0] in ("int", "float") or spec["type"].startswith("map"):
            assert spec["name"] in FIELD_RANGES, spec["name"]
            lo, hi = FIELD_RANGES[spec["name"]]
            assert lo < hi
        else:
            assert spec["name"] not in FIELD_RANGES


def test_field_specs_give_forms_name_type_default_doc_range_and_modeled():
    specs = field_specs()
    assert [s["name"] for s in specs] == list(FIELD_DOCS)
    by_name = {s["name"]: s for s in specs}
    assert (
        by_name["autocompact_buffer_tokens"].items()
        >= {
            "type": "int",
            "default": 13_000,
            "min": 0,
            "max": 1_000_000,
            "modeled": False,
        }.items()
    )
    assert by_name["autocompact_pct_override"]["type"] == "float | None"
    assert by_name["autocompact_pct_override"]["min_exclusive"] is True
    assert by_name["cache_ttl"]["choices"] == ["auto", "5m", "1h"]
    assert by_name["declared_max_result_size_chars"]["type"] == "map[str, int | None]"
    assert by_name["compactable_tools"]["default"][0] == "Read"
    json.dumps(specs)


# -- value semantics -------------------------------------------------------------------------


def test_config_is_immutable_and_hashable():
    config = PipelineConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.context_window = 1  # type: ignore[misc]
    assert hash(config) == hash(PipelineConfig())
    assert {config, PipelineConfig()} == {config}


def test_mapping_settings_cannot_be_mutated():
    config = PipelineConfig(per_tool_threshold_overrides={"Bash": 10_000})
    assert isinstance(config.per_tool_threshold_overrides, FrozenMap)
    with pytest.raises(TypeError):
        config.per_tool_threshold_overrides["Bash"] = 1  # type: ignore[index]


def test_config_survives_pickling():
    config = PipelineConfig(per_tool_threshold_overrides={"Grep": 5_000}, cache_ttl="1h")
    assert pickle.loads(pickle.dumps(config)) == config


def test_repr_shows_only_settings_that_differ_from_the_defaults():
    assert repr(PipelineConfig()) == "PipelineConfig()"
    assert (
        repr(PipelineConfig(context_window=1_000_000)) == "PipelineConfig(context_window=1000000)"
    )


# -- validation ------------------------------------------------------------------------------


def test_config_error_is_a_value_error_naming_the_field():
    error = raises_config_error("autocompact_buffer_tokens", autocompact_buffer_tokens=-5)
    assert isinstance(error, ValueError)
    assert error.message == "must be an integer between 0 and 1000000, got -5"
    assert (
        str(error) == "autocompact_buffer_tokens: must be an integer between 0 and 1000000, got -5"
    )


def test_config_error_survives_pickling():
    error = ConfigError("context_window", "too small")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.field, copy.message, str(copy)) == (error.field, error.message, str(error))


@pytest.mark.parametrize("name", sorted(FIELD_RANGES))
def test_value_above_the_range_is_rejected_naming_the_field(name):
    _, hi = FIELD_RANGES[name]
    spec = next(s for s in field_specs() if s["name"] == name)
    too_big = hi + 1 if isinstance(hi, int) and not spec["type"].startswith("float") else hi + 0.5
    value = {"Bash": too_big} if spec["type"].startswith("map") else too_big
    error = raises_config_error(name, **{name: value})
    assert "must be" in error.message


@pytest.mark.parametrize("name", sorted(FIELD_RANGES))
def test_value_below_the_range_is_rejected_naming_the_field(name):
    lo, _ = FIELD_RANGES[name]
    spec = next(s for s in field_specs() if s["name"] == name)
    too_small = lo if spec["min_exclusive"] else lo - 1
    value = {"Bash": too_small} if spec["type"].startswith("map") else too_small
    raises_config_error(name, **{name: value})


def test_bool_is_not_an_integer():
    error = raises_config_error("context_window", context_window=True)
    assert error.message == "must be an integer, got True (bool)"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("context_window", "200000"),
        ("context_window", 200_000.0),
        ("max_output_tokens", "lots"),
        ("autocompact_enabled", 1),
        ("autocompact_pct_override", "95"),
        ("cache_ttl", "10m"),
        ("blocking_limit_base", "raw"),
        ("compactable_tools", "Read"),
        ("declared_max_result_size_chars", [("Bash", 1)]),
        ("declared_max_result_size_chars", {"Bash": "30000"}),
        ("per_tool_threshold_overrides", {"Bash": None}),
        ("max_output_tokens_for_summary", None),
    ],
)
def test_wrong_type_is_rejected_naming_the_field(name, value):
    raises_config_error(name, **{name: value})


def test_nullable_settings_accept_null():
    config = PipelineConfig(max_output_tokens=None, blocking_limit_override=None)
    assert config.max_output_tokens is None


def test_integers_are_accepted_for_float_settings():
    config = PipelineConfig(autocompact_pct_override=95, collapse_blocking_pct=1)
    assert config.autocompact_pct_override == 95.0
    assert isinstance(config.autocompact_pct_override, float)


def test_non_finite_floats_are_rejected():
    error = raises_config_error("autocompact_pct_override", autocompact_pct_override=math.nan)
    assert "finite" in error.message


@pytest.mark.parametrize("pct", [0, -1, 100.5])
def test_pct_override_must_be_above_0_and_at_most_100(pct):
    error = raises_config_error("autocompact_pct_override", autocompact_pct_override=pct)
    assert "greater than 0 and at most 100" in error.message


def test_pct_override_of_exactly_100_is_accepted():
    assert PipelineConfig(autocompact_pct_override=100).autocompact_pct_override == 100.0


def test_fraction_settings_explain_they_are_fractions():
    error = raises_config_error("collapse_commit_pct", collapse_commit_pct=90)
    assert "0.9 means 90 %" in error.message


def test_per_message_budget_must_be_positive():
    raises_config_error("per_message_budget_chars", per_message_budget_chars=0)


def test_declared_sizes_accept_infinity_as_no_limit():
    # TOML has no null, so inf is how a settings file writes "no limit".
    sizes = {"Read": math.inf, "Bash": 40_000}
    config = PipelineConfig(declared_max_result_size_chars=sizes)  # type: ignore[arg-type]
    assert dict(config.declared_max_result_size_chars) == {"Read": None, "Bash": 40_000}


def test_map_value_error_names_the_field_and_the_tool():
    error = raises_config_error(
        "declared_max_result_size_chars", declared_max_result_size_chars={"Bash": 0}
    )
    assert "'Bash'" in error.message


def test_map_rejects_empty_tool_names():
    raises_config_error("per_tool_threshold_overrides", per_tool_threshold_overrides={"": 5})


def test_compactable_tools_accept_a_list_and_reject_duplicates():
    # JSON and TOML give lists; they become tuples.
    assert PipelineConfig(compactable_tools=["Read"]).compactable_tools == ("Read",)  # type: ignore[arg-type]
    error = raises_config_error("compactable_tools", compactable_tools=["Read", "Read"])
    assert "twice" in error.message


def test_autocompact_buffer_must_be_smaller_than_the_effective_window():
    error = raises_config_error("autocompact_buffer_tokens", autocompact_buffer_tokens=180_000)
    assert "effective window (180000" in error.message
    PipelineConfig(autocompact_buffer_tokens=179_999)


def test_blocking_buffer_must_be_smaller_than_the_effective_window():
    raises_config_error(
        "manual_compact_buffer_tokens", context_window=50_000, manual_compact_buffer_tokens=30_000
    )


def test_window_must_leave_room_for_the_output_reserve():
    error = raises_config_error("context_window", context_window=15_000)
    assert "no effective window" in error.message


def test_auto_compact_window_is_named_when_it_is_the_binding_cap():
    raises_config_error("auto_compact_window", auto_compact_window=20_000)


def test_full_output_reserve_is_checked_against_the_window():
    raises_config_error(
        "context_window",
        context_window=40_000,
        reserve_full_max_output=True,
        max_output_tokens=40_000,
    )


@pytest.mark.parametrize(
    ("field", "changes"),
    [
        ("sm_compact_min_tokens", {"sm_compact_min_tokens": 50_000}),
        ("cached_mc_keep_recent", {"cached_mc_keep_recent": 12}),
        ("api_target_input_tokens", {"api_target_input_tokens": 180_000}),
        ("snip_target_pct", {"snip_target_pct": 0.8}),
        ("collapse_commit_pct", {"collapse_commit_pct": 0.95}),
        ("collapse_min_span_messages", {"collapse_min_span_messages": 51}),
    ],
)
def test_inconsistent_pairs_are_rejected_naming_the_first_setting(field, changes):
    raises_config_error(field, **changes)


def test_unknown_setting_suggests_the_closest_name():
    with pytest.raises(ConfigError) as info:
        PipelineConfig.from_dict({"autocompact_bufer_tokens": 1})
    assert info.value.field == "autocompact_bufer_tokens"
    assert info.value.message == "unknown setting; did you mean 'autocompact_buffer_tokens'?"


def test_claude_code_constant_spelling_suggests_the_setting():
    with pytest.raises(ConfigError, match="did you mean 'manual_compact_buffer_tokens'"):
        PipelineConfig.from_dict({"MANUAL_COMPACT_BUFFER_TOKENS": 1})


def test_unknown_setting_without_a_close_name_says_so():
    with pytest.raises(ConfigError) as info:
        PipelineConfig().replace(frobnicate=1)
    assert info.value.message == "unknown setting"


def test_non_string_setting_names_are_rejected():
    with pytest.raises(ConfigError, match="setting names must be strings"):
        PipelineConfig.from_dict({1: 2})  # type: ignore[dict-item]


# -- to_dict, from_dict, replace, diff -------------------------------------------------------


def test_to_dict_is_json_serialisable_in_declaration_order():
    data = PipelineConfig(per_tool_threshold_overrides={"Grep": 1_000, "Bash": 2_000}).to_dict()
    assert list(data) == [f.name for f in dataclasses.fields(PipelineConfig)]
    assert list(data["per_tool_threshold_overrides"]) == ["Bash", "Grep"]
    assert json.loads(json.dumps(data)) == data


def test_from_dict_round_trips_to_dict():
    config = PRESETS["aggressive"].replace(declared_max_result_size_chars={"Read": None, "X": 7})
    assert PipelineConfig.from_dict(config.to_dict()) == config
    assert PipelineConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config


def test_from_dict_starts_from_a_named_preset():
    config = PipelineConfig.from_dict({"preset": "budget-on", "per_message_budget_chars": 100_000})
    assert config.per_message_budget_enabled is True
    assert config.per_message_budget_chars == 100_000


def test_from_dict_rejects_auto_because_it_needs_a_version():
    with pytest.raises(ConfigError) as info:
        PipelineConfig.from_dict({"preset": "auto"})
    assert info.value.field == "preset"
    assert "resolve_config" in info.value.message


def test_from_dict_rejects_a_non_mapping():
    with pytest.raises(ConfigError, match="must be a table of settings"):
        PipelineConfig.from_dict([("context_window", 1)])  # type: ignore[arg-type]


def test_replace_validates_the_result():
    config = PipelineConfig().replace(context_window=300_000)
    assert config.context_window == 300_000
    with pytest.raises(ConfigError):
        config.replace(bytes_per_token=0)


def test_diff_lists_changed_settings_as_mine_and_theirs():
    base = PipelineConfig()
    other = base.replace(context_window=1_000_000, per_tool_threshold_overrides={"Bash": 1})
    assert base.diff(other) == {
        "context_window": (200_000, 1_000_000),
        "per_tool_threshold_overrides": ({}, {"Bash": 1}),
    }
    assert base.diff(base) == {}


# -- TOML and JSON -----------------------------------------------------------------------------


def test_toml_text_with_top_level_settings():
    config = PipelineConfig.from_toml("autocompact_pct_override = 80\ncache_ttl = '1h'\n")
    assert (config.autocompact_pct_override, config.cache_ttl) == (80.0, "1h")


def test_toml_pipeline_table_and_preset_key():
    text = """
preset = "time-microcompact-on"

[pipeline]
time_based_mc_keep_recent = 2
declared_max_result_size_chars = { Read = inf, Bash = 12000 }
"""
    config = PipelineConfig.from_toml(text)
    assert config.time_based_mc_enabled is True
    assert config.time_based_mc_keep_recent == 2
    assert dict(config.declared_max_result_size_chars) == {"Read": None, "Bash": 12_000}


def test_toml_file_is_read_from_a_path(tmp_path):
    path = tmp_path / "pipeline.toml"
    path.write_text("[pipeline]\ncontext_window = 1000000\n", encoding="utf-8")
    assert PipelineConfig.from_toml(path).context_window == 1_000_000
    assert PipelineConfig.from_toml(str(path)).context_window == 1_000_000


def test_toml_errors_name_the_setting():
    with pytest.raises(ConfigError) as info:
        PipelineConfig.from_toml("[pipeline]\nsnip_trigger_pct = 80\n")
    assert info.value.field == "snip_trigger_pct"


def test_invalid_toml_is_reported_with_its_position():
    with pytest.raises(ConfigError, match=r"invalid TOML.*line 1"):
        PipelineConfig.from_toml("context_window = = 3")


def test_setting_in_both_places_is_rejected():
    with pytest.raises(ConfigError) as info:
        PipelineConfig.from_toml("context_window = 1\n[pipeline]\ncontext_window = 2\n")
    assert info.value.field == "context_window"


def test_json_text_with_null_meaning_no_limit():
    text = json.dumps(
        {"pipeline": {"declared_max_result_size_chars": {"Read": None}, "max_output_tokens": None}}
    )
    config = PipelineConfig.from_json(text)
    assert dict(config.declared_max_result_size_chars) == {"Read": None}


def test_json_file_with_preset(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"preset": "1m-window", "snip_enabled": True}), encoding="utf-8")
    config = PipelineConfig.from_json(path)
    assert (config.context_window, config.snip_enabled) == (1_000_000, True)


def test_invalid_json_is_reported_with_line_and_column():
    with pytest.raises(ConfigError, match=r"invalid JSON: .*\(line 1, column \d+\)"):
        PipelineConfig.from_json('{"context_window": }')


def test_json_list_is_not_a_settings_table():
    with pytest.raises(ConfigError, match="must hold a table of settings"):
        PipelineConfig.from_json("[1, 2]")


def test_missing_settings_file_is_reported(tmp_path):
    missing = tmp_path / "nope.toml"
    with pytest.raises(ConfigError) as info:
        PipelineConfig.from_toml(str(missing))
    assert info.value.field == str(missing)
    assert info.value.message == "file not found"


def test_read_settings_keeps_the_preset_key_and_picks_the_format_by_suffix(tmp_path):
    path = tmp_path / "s.json"
    path.write_text('{"preset": "auto", "bytes_per_token": 3}', encoding="utf-8")
    assert read_settings(path) == {"preset": "auto", "bytes_per_token": 3}
    assert read_settings('{"a": 1}') == {"a": 1}
    assert read_settings("a = 1") == {"a": 1}


# -- presets ----------------------------------------------------------------------------------


def test_every_preset_is_valid_and_described():
    assert set(PRESET_DESCRIPTIONS) == set(PRESETS)
    for name, config in PRESETS.items():
        config.validate()
        assert PRESET_DESCRIPTIONS[name].strip()


def test_preset_names_list_auto_first_then_every_preset():
    assert PRESET_NAMES[0] == "auto"
    assert set(PRESET_NAMES[1:]) == set(PRESETS)


def test_required_presets_exist():
    for name in (
        "claude-code-2.1.88",
        "claude-code-2.1.20",
        "1m-window",
        "budget-on",
        "time-microcompact-on",
        "snip-on",
        "collapse-on",
        "aggressive",
    ):
        assert name in PRESETS


def test_2_1_88_preset_is_the_public_build_defaults():
    assert PRESETS["claude-code-2.1.88"] == PipelineConfig()
    assert LATEST_PRESET == "claude-code-2.1.88"


@pytest.mark.parametrize(
    ("name", "changes"),
    [
        ("claude-code-2.1.20", {"reserve_full_max_output": True, "blocking_limit_base": "window"}),
        ("claude-code-2.1.74", {"blocking_limit_base": "window"}),
        ("1m-window", {"context_window": 1_000_000}),
        ("otk-cap-on", {"otk_slot_cap_enabled": True}),
        ("budget-on", {"per_message_budget_enabled": True}),
        ("time-microcompact-on", {"time_based_mc_enabled": True}),
        ("sm-compact-on", {"sm_compact_enabled": True}),
        ("snip-on", {"snip_enabled": True}),
        ("collapse-on", {"collapse_enabled": True}),
        (
            "aggressive",
            {
                "autocompact_pct_override": 75.0,
                "per_message_budget_enabled": True,
                "time_based_mc_enabled": True,
                "time_based_mc_gap_threshold_minutes": 5,
                "time_based_mc_keep_recent": 3,
            },
        ),
    ],
)
def test_preset_changes_exactly_what_it_describes(name, changes):
    diff = PipelineConfig().diff(PRESETS[name])
    assert {field: theirs for field, (_, theirs) in diff.items()} == changes


def test_collapse_preset_keeps_the_autocompact_switch_on():
    # Claude Code suppresses autocompact inside shouldAutoCompact, not through the user switch.
    assert PRESETS["collapse-on"].autocompact_enabled is True


def test_unknown_preset_lists_the_known_ones():
    with pytest.raises(ConfigError) as info:
        get_preset("budget")
    assert info.value.field == "preset"
    assert info.value.message.startswith("unknown preset 'budget'; known: auto, claude-code-2.1.88")


def test_get_preset_explains_that_auto_needs_a_version():
    with pytest.raises(ConfigError, match="version"):
        get_preset("auto")


# -- version mapping -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "preset"),
    [
        ("1.0.61", "claude-code-2.0"),
        ("2.0.64", "claude-code-2.0"),
        ("2.0.76", "claude-code-2.0"),
        ("2.1.0", "claude-code-2.1.20"),
        ("2.1.7", "claude-code-2.1.20"),
        ("2.1.20", "claude-code-2.1.20"),
        ("2.1.21", "claude-code-2.1.74"),
        ("2.1.29", "claude-code-2.1.74"),
        ("2.1.39", "claude-code-2.1.74"),
        ("2.1.74", "claude-code-2.1.74"),
        ("2.1.75", "claude-code-2.1.88"),
        ("2.1.88", "claude-code-2.1.88"),
        ("2.1.229", "claude-code-2.1.88"),
        ("3.0.0", "claude-code-2.1.88"),
    ],
)
def test_version_maps_to_the_preset_with_its_thresholds(version, preset):
    assert preset_for_version(version) == preset


def test_the_2_0_preset_has_2_1_20s_thresholds_and_no_per_tool_persistence():
    old, new = get_preset("claude-code-2.0"), get_preset("claude-code-2.1.20")
    for field in ("reserve_full_max_output", "blocking_limit_base", "context_window"):
        assert getattr(old, field) == getattr(new, field)
    assert old.default_max_result_size_chars == 400_000
    assert dict(old.declared_max_result_size_chars) == {}
    assert new.default_max_result_size_chars == 50_000


@pytest.mark.parametrize("version", [None, "", "latest", "2.1", "v", "unknown"])
def test_missing_or_unparseable_version_gets_the_latest_preset(version):
    assert preset_for_version(version) == "claude-code-2.1.88"


def test_versions_compare_numerically_not_as_text():
    assert parse_version("2.1.229") == (2, 1, 229)
    assert parse_version("v2.1.9-beta") == (2, 1, 9)
    assert preset_for_version("2.1.9") == "claude-code-2.1.20"


def test_resolve_auto_uses_the_transcript_version():
    config, name = resolve_config("auto", version="2.1.7")
    assert name == "claude-code-2.1.20"
    assert config == PRESETS["claude-code-2.1.20"]


def test_resolve_auto_reads_each_threads_window_once_a_prompt_passed_200k():
    above = {"version": "2.1.7", "max_recorded_prompt": 203_000}
    assert resolve_config("auto", **above)[0].window_from_records
    assert not resolve_config("auto", version="2.1.7", max_recorded_prompt=150_000)[
        0
    ].window_from_records
    # a named preset or a window the user set is taken as given
    assert not resolve_config("claude-code-2.1.20", **above)[0].window_from_records
    assert not resolve_config("auto", {"context_window": 500_000}, **above)[0].window_from_records


def test_resolve_auto_without_a_version_gets_the_latest_preset():
    assert resolve_config()[1] == "claude-code-2.1.88"


def test_resolve_applies_validated_overrides_to_the_preset():
    config, name = resolve_config("budget-on", {"per_message_budget_chars": 50_000})
    assert name == "budget-on"
    assert (config.per_message_budget_enabled, config.per_message_budget_chars) == (True, 50_000)
    with pytest.raises(ConfigError) as info:
        resolve_config("budget-on", {"per_message_budget_char": 1})
    assert info.value.field == "per_message_budget_char"


def test_preset_in_overrides_replaces_auto():
    config, name = resolve_config("auto", {"preset": "snip-on"}, version="2.1.7")
    assert name == "snip-on"
    assert config.snip_enabled is True


def test_two_different_presets_are_an_error():
    with pytest.raises(ConfigError, match="given twice"):
        resolve_config("budget-on", {"preset": "snip-on"})


def test_resolve_rejects_an_unknown_preset():
    with pytest.raises(ConfigError) as info:
        resolve_config("claude-code-9")
    assert info.value.field == "preset"


def test_auto_switches_to_the_1m_window_when_a_recorded_prompt_exceeds_200k():
    from contextlab.engine.config.resolve import resolve_config

    config, name = resolve_config("auto", version="2.1.88", max_recorded_prompt=450_000)
    assert config.context_window == 1_000_000
    assert name == "claude-code-2.1.88"
    small, _ = resolve_config("auto", version="2.1.88", max_recorded_prompt=180_000)
    assert small.context_window == 200_000
    explicit, _ = resolve_config(
        "auto", {"context_window": 300_000}, version="2.1.88", max_recorded_prompt=450_000
    )
    assert explicit.context_window == 300_000
    named, _ = resolve_config("claude-code-2.1.88", max_recorded_prompt=450_000)
    assert named.context_window == 200_000


# -- the schema, the one error type, the preset data, form helpers --------------------------


def test_each_field_declares_type_range_description_and_source_in_its_annotation():
    import typing

    import msgspec

    for field in dataclasses.fields(PipelineConfig):
        hint = field.type
        if typing.get_origin(hint) is not typing.Annotated:  # ``Annotated[...] | None``
            hint = next(a for a in typing.get_args(hint) if a is not type(None))
        meta = [m for m in typing.get_args(hint)[1:] if isinstance(m, msgspec.Meta)]
        assert len(meta) == 1, field.name
        assert meta[0].description, field.name
        assert meta[0].extra, field.name
        assert meta[0].extra["source"], field.name


def test_the_preset_data_module_does_not_import_the_declaration():
    # the declaration (fields) builds its presets from the preset data; an import the other
    # way would make a cycle.
    import ast

    tree = ast.parse(Path(presets_module.__file__).read_text(encoding="utf-8"))
    imported = [
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    ]
    assert not [name for name in imported if name and ("fields" in name or "resolve" in name)]


def test_one_field_error_type_under_every_name():
    from contextlab import engine
    from contextlab.engine.config.errors import FieldError

    assert engine.FieldError is FieldError is ConfigError
    error = FieldError("context_window", "too small").within("a.config")
    assert (error.field, error.message) == ("a.config.context_window", "too small")
    assert FieldError("x", "m").within("").field == "x"


def test_presets_are_read_from_the_data_file():
    from contextlab.engine.config.fields import preset_configs, preset_descriptions
    from contextlab.engine.config.presets import PRESETS_FILE

    assert PRESETS_FILE.name == "presets.toml"
    assert list(preset_configs()) == list(PRESETS)
    assert preset_descriptions() == PRESET_DESCRIPTIONS


def test_resolve_request_config_names_request_fields():
    from contextlab.engine.config.resolve import resolve_request_config

    config, name = resolve_request_config(None, {"context_window": 300_000})
    assert (config.context_window, name) == (300_000, "claude-code-2.1.88")
    for preset, overrides, field in [
        ("nope", None, "preset"),
        ("auto", [1], "config"),
        ("auto", {"context_window": "big"}, "config.context_window"),
        ("auto", {"no_such_knob": 1}, "config.no_such_knob"),
    ]:
        with pytest.raises(ConfigError) as info:
            resolve_request_config(preset, overrides)
        assert info.value.field == field


def test_parse_overrides_reads_a_json_object_or_nothing():
    from contextlab.engine.config.forms import parse_overrides

    assert parse_overrides("") is None
    assert parse_overrides(' {"a": 1} ') == {"a": 1}
    with pytest.raises(ConfigError) as info:
        parse_overrides("{oops")
    assert info.value.field == "config"
    assert info.value.message.startswith("not valid JSON: ")
    assert "(line 1, column 2)" in info.value.message
    with pytest.raises(ConfigError, match="must be a JSON object of field overrides"):
        parse_overrides("[1]")


@pytest.mark.parametrize(
    ("name", "text", "value"),
    [
        ("context_window", " 300000 ", 300_000),
        ("autocompact_pct_override", "", None),
        ("autocompact_pct_override", "80", 80.0),
        ("snip_enabled", "on", True),
        ("snip_enabled", "", False),
        ("cache_ttl", "1h", "1h"),
        ("compactable_tools", '["Read"]', ["Read"]),
        ("per_tool_threshold_overrides", "", {}),
    ],
)
def test_setting_from_text_reads_form_input_as_the_field_type(name, text, value):
    from contextlab.engine.config.forms import setting_from_text

    assert setting_from_text(name, text) == value


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("context_window", "1.5", "must be a whole number, got '1.5'"),
        ("snip_trigger_pct", "abc", "must be a number, got 'abc'"),
        ("snip_trigger_pct", "inf", "must be a finite number"),
        ("compactable_tools", "[oops", "must be JSON (Expecting value, column 2)"),
    ],
)
def test_setting_from_text_names_the_field(name, text, message):
    from contextlab.engine.config.forms import setting_from_text

    with pytest.raises(ConfigError) as info:
        setting_from_text(name, text)
    assert (info.value.field, info.value.message) == (name, message)
