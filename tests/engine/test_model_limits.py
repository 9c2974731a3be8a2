"""The model table: packaged data, family matching, 1M ids, cache minimums, edited copies."""

from __future__ import annotations

from importlib import resources

import pytest

from contextlab.engine.config.errors import ConfigError
from contextlab.engine.measures.model_limits import (
    CONTEXT_WINDOW_1M,
    ModelInfo,
    is_1m_model,
    load_model_table,
    model_info,
    parse_model_table,
)

MINIMAL = """
[default]
family = "other"
max_output_default = 32000
max_output_upper = 64000
context_window = 200000
min_cacheable_tokens = 1024
"""


def test_table_ships_as_package_data():
    data = resources.files("contextlab.engine.measures").joinpath("data/models.toml")
    assert data.is_file()
    assert "[[family]]" in data.read_text("utf-8")


def test_packaged_table_is_loaded_once():
    assert load_model_table() is load_model_table()


@pytest.mark.parametrize(
    ("model", "family", "default", "upper"),
    [
        ("claude-opus-4-6", "opus-4-6", 64_000, 128_000),
        ("claude-sonnet-4-6", "sonnet-4-6", 32_000, 128_000),
        ("claude-opus-4-5-20251101", "opus-4-5", 32_000, 64_000),
        ("claude-sonnet-4-5-20250929", "sonnet-4-5", 32_000, 64_000),
        ("claude-sonnet-4-20250514", "sonnet-4", 32_000, 64_000),
        ("claude-haiku-4-5-20251001", "haiku-4", 32_000, 64_000),
        ("claude-opus-4-1-20250805", "opus-4-1", 32_000, 32_000),
        ("claude-opus-4-20250514", "opus-4", 32_000, 32_000),
        ("claude-3-7-sonnet-20250219", "3-7-sonnet", 32_000, 64_000),
        ("claude-3-5-sonnet-20241022", "3-5-sonnet", 8_192, 8_192),
        ("claude-3-5-haiku-20241022", "3-5-haiku", 8_192, 8_192),
        ("claude-3-opus-20240229", "claude-3-opus", 4_096, 4_096),
        ("claude-3-haiku-20240307", "claude-3-haiku", 4_096, 4_096),
    ],
)
def test_claude_code_2_1_88_max_output_per_family(model, family, default, upper):
    info = model_info(model)
    assert (info.family, info.max_output_default, info.max_output_upper) == (family, default, upper)


@pytest.mark.parametrize(
    ("model", "minimum"),
    [
        ("claude-opus-4-6", 4_096),
        ("claude-opus-4-5-20251101", 4_096),
        ("claude-haiku-4-5-20251001", 4_096),
        ("claude-sonnet-4-6", 2_048),
        ("claude-3-5-haiku-20241022", 2_048),
        ("claude-3-haiku-20240307", 2_048),
        ("claude-sonnet-4-5-20250929", 1_024),
        ("claude-opus-4-1-20250805", 1_024),
        ("claude-opus-4-20250514", 1_024),
        ("claude-sonnet-4-20250514", 1_024),
        ("claude-3-7-sonnet-20250219", 1_024),
    ],
)
def test_min_cacheable_tokens_follow_the_march_2026_docs(model, minimum):
    assert model_info(model).min_cacheable_tokens == minimum


@pytest.mark.parametrize(
    ("model", "minimum"),
    [
        ("claude-opus-5", 512),
        ("claude-opus-5-5", 512),
        ("claude-fable-5-1", 512),
        ("claude-mythos-5", 512),
        ("claude-mythos-preview", 2_048),
        ("claude-opus-4-8", 1_024),
        ("claude-opus-4-7", 2_048),
        ("claude-sonnet-5", 1_024),
    ],
)
def test_newer_families_use_the_later_docs_snapshot(model, minimum):
    assert model_info(model).min_cacheable_tokens == minimum


def test_more_specific_family_wins_over_the_one_it_contains():
    assert model_info("claude-opus-4-6").family == "opus-4-6"
    assert model_info("claude-opus-4-20250514").family == "opus-4"
    assert model_info("claude-mythos-preview").family == "mythos-preview"


def test_matching_ignores_case_and_provider_prefixes():
    assert model_info("us.anthropic.claude-sonnet-4-5-20250929-v1:0").family == "sonnet-4-5"
    assert model_info("Claude-Opus-4-6").family == "opus-4-6"
    assert model_info("claude-sonnet-4-5@20250929").family == "sonnet-4-5"


def test_unknown_and_missing_models_get_the_default_entry():
    for model in (None, "", "gpt-4o", "<synthetic>"):
        info = model_info(model)
        assert (info.family, info.max_output_default, info.max_output_upper) == (
            "other",
            32_000,
            64_000,
        )
        assert info.context_window == 200_000


def test_plain_ids_get_200k_and_1m_ids_get_a_million():
    assert model_info("claude-opus-4-6").context_window == 200_000
    info = model_info("claude-opus-4-6[1m]")
    assert info.context_window == CONTEXT_WINDOW_1M == 1_000_000
    assert info.family == "opus-4-6"
    assert is_1m_model("claude-sonnet-4-6[1M]")
    assert not is_1m_model(None)


def test_display_names_are_filled():
    assert model_info("claude-opus-4-6").display_name == "Claude Opus 4.6"
    assert model_info("claude-3-5-haiku-20241022").display_name == "Claude Haiku 3.5"


def test_every_family_keeps_default_output_within_its_upper_limit():
    table = load_model_table()
    for info in (*table.families, table.default):
        assert isinstance(info, ModelInfo)
        assert 0 < info.max_output_default <= info.max_output_upper
        assert info.min_cacheable_tokens in (512, 1_024, 2_048, 4_096)


def test_an_edited_copy_can_be_loaded_from_a_path(tmp_path):
    path = tmp_path / "models.toml"
    path.write_text(
        MINIMAL
        + """
[[family]]
family = "my-model"
display_name = "Mine"
max_output_default = 1000
max_output_upper = 2000
min_cacheable_tokens = 256
""",
        encoding="utf-8",
    )
    table = load_model_table(path)
    info = model_info("vendor/my-model-1", table)
    assert (info.family, info.max_output_default, info.min_cacheable_tokens) == (
        "my-model",
        1_000,
        256,
    )
    assert info.context_window == 200_000  # inherited from [default]
    assert model_info("claude-opus-4-6", table).family == "other"


def test_missing_table_file_is_reported(tmp_path):
    with pytest.raises(ConfigError, match="file not found"):
        load_model_table(tmp_path / "absent.toml")


def test_table_without_default_is_rejected():
    with pytest.raises(ConfigError, match=r"\[default\]"):
        parse_model_table("[[family]]\nfamily = 'x'\n")


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ("max_output_default = 0", "max_output_default"),
        ("max_output_default = 'many'", "max_output_default"),
        ("max_output_default = true", "max_output_default"),
        ("max_output_default = 9000\nmax_output_upper = 8000", "max_output_default"),
    ],
)
def test_bad_family_values_name_the_entry_and_key(entry, field):
    base = {
        "max_output_default": "max_output_default = 100",
        "max_output_upper": "max_output_upper = 200",
        "min_cacheable_tokens": "min_cacheable_tokens = 1024",
    }
    lines = [entry] + [line for key, line in base.items() if key not in entry]
    text = MINIMAL + "\n[[family]]\nfamily = 'x'\n" + "\n".join(lines) + "\n"
    with pytest.raises(ConfigError) as info:
        parse_model_table(text)
    assert info.value.field == f"models.toml family[0].{field}"


def test_duplicate_family_is_rejected():
    entry = "\n[[family]]\nfamily = 'x'\nmax_output_default = 1\nmax_output_upper = 1\nmin_cacheable_tokens = 1\n"
    with pytest.raises(ConfigError, match="listed twice"):
        parse_model_table(MINIMAL + entry + entry)


def test_unknown_keys_are_rejected():
    with pytest.raises(ConfigError, match="unknown keys: price"):
        parse_model_table(MINIMAL.replace("[default]", "[default]\nprice = 3"))
