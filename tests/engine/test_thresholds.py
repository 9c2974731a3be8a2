"""Threshold arithmetic against the worked numbers of pipeline-spec §1.8 / §4.6.2 / §12."""

from __future__ import annotations

import pytest

from contextlab.engine.config.errors import ConfigError
from contextlab.engine.config.fields import PipelineConfig
from contextlab.engine.config.resolve import PRESETS
from contextlab.engine.config.thresholds import compute_thresholds, token_warning_state

OPUS_45 = "claude-opus-4-5-20251101"
OPUS_46 = "claude-opus-4-6"
BASE = PipelineConfig()


def thresholds(model: str | None = OPUS_45, **changes):
    return compute_thresholds(BASE.replace(**changes), model)


# -- worked numbers ---------------------------------------------------------------------------


def test_200k_window_on_2_1_88_gives_180k_167k_147k_177k():
    t = thresholds()
    assert (t.context_window, t.max_output, t.reserved) == (200_000, 32_000, 20_000)
    assert t.effective_window == 180_000
    assert t.autocompact_threshold == 167_000
    assert t.warning_threshold == t.error_threshold == 147_000
    assert t.blocking_limit == 177_000


def test_8k_output_cap_gives_192k_179k_189k():
    t = thresholds(otk_slot_cap_enabled=True)
    assert (t.max_output, t.reserved) == (8_000, 8_000)
    assert (t.effective_window, t.autocompact_threshold) == (192_000, 179_000)
    assert (t.warning_threshold, t.blocking_limit) == (159_000, 189_000)


def test_1m_window_gives_980k_967k_977k():
    t = compute_thresholds(PRESETS["1m-window"], OPUS_45)
    assert (t.effective_window, t.autocompact_threshold, t.blocking_limit) == (
        980_000,
        967_000,
        977_000,
    )


def test_2_1_20_reserves_the_full_max_output_so_opus_4_5_compacts_at_155k():
    t = compute_thresholds(PRESETS["claude-code-2.1.20"], OPUS_45)
    assert (t.reserved, t.effective_window, t.autocompact_threshold) == (32_000, 168_000, 155_000)


def test_opus_4_6_default_64k_output_still_reserves_20k_on_2_1_88():
    t = thresholds(OPUS_46)
    assert (t.max_output, t.reserved, t.autocompact_threshold) == (64_000, 20_000, 167_000)


def test_autocompact_off_moves_warning_base_to_the_effective_window():
    t = thresholds(autocompact_enabled=False)
    assert t.warning_threshold == 160_000
    assert t.blocking_limit == 177_000
    assert t.autocompact_active is False


# -- window rules -----------------------------------------------------------------------------


def test_model_id_with_1m_suffix_gets_a_million_tokens_whatever_the_setting():
    t = thresholds("claude-sonnet-4-6[1m]", context_window=200_000)
    assert t.context_window == 1_000_000
    assert t.autocompact_threshold == 967_000


def test_1m_suffix_is_case_insensitive():
    assert thresholds("claude-opus-4-6[1M]").context_window == 1_000_000


def test_auto_compact_window_caps_the_window_before_the_reserve():
    t = thresholds(auto_compact_window=100_000)
    assert (t.context_window, t.effective_window, t.autocompact_threshold) == (
        100_000,
        80_000,
        67_000,
    )


def test_auto_compact_window_larger_than_the_window_changes_nothing():
    assert thresholds(auto_compact_window=500_000).context_window == 200_000


def test_auto_compact_window_also_caps_a_1m_model():
    assert thresholds("claude-opus-4-6[1m]", auto_compact_window=400_000).context_window == 400_000


# -- max output rules -------------------------------------------------------------------------


def test_max_output_setting_replaces_the_model_default():
    t = thresholds(max_output_tokens=10_000)
    assert (t.max_output, t.reserved, t.effective_window) == (10_000, 10_000, 190_000)


def test_max_output_setting_is_capped_at_the_model_upper_limit():
    assert thresholds(max_output_tokens=100_000).max_output == 64_000
    assert thresholds(OPUS_46, max_output_tokens=100_000).max_output == 100_000


def test_output_cap_only_lowers_the_default_not_an_explicit_setting():
    assert thresholds(otk_slot_cap_enabled=True, max_output_tokens=30_000).max_output == 30_000


def test_small_output_models_reserve_their_whole_output():
    t = thresholds("claude-3-5-haiku-20241022")
    assert (t.max_output, t.reserved, t.effective_window) == (8_192, 8_192, 191_808)


def test_unknown_model_uses_the_fallback_32k_output():
    assert thresholds(None).max_output == 32_000
    assert thresholds("some-other-model").reserved == 20_000


@pytest.mark.parametrize(
    ("window", "field"), [(60_000, "context_window"), (70_000, "autocompact_buffer_tokens")]
)
def test_model_whose_full_reserve_leaves_no_room_is_rejected(window, field):
    # Valid for the 32k fallback model, but opus-4-6 reserves 64k on the 2.1.20 rules.
    config = BASE.replace(
        context_window=window, reserve_full_max_output=True, autocompact_buffer_tokens=6_000
    )
    compute_thresholds(config, OPUS_45)
    with pytest.raises(ConfigError) as info:
        compute_thresholds(config, OPUS_46)
    assert info.value.field == field


# -- pct override -----------------------------------------------------------------------------


def test_pct_override_can_only_lower_the_threshold():
    assert thresholds(autocompact_pct_override=95).autocompact_threshold == 167_000
    assert thresholds(autocompact_pct_override=100).autocompact_threshold == 167_000


def test_pct_override_of_50_compacts_at_half_the_effective_window():
    t = thresholds(autocompact_pct_override=50)
    assert t.autocompact_threshold == 90_000
    assert t.warning_threshold == 70_000


def test_pct_override_floors_the_same_double_as_the_javascript():
    # Math.floor(180000 * (33.3 / 100)) is 59,939 in node: the product is 59,939.99999999999.
    assert thresholds(autocompact_pct_override=33.3).autocompact_threshold == 59_939
    assert thresholds(autocompact_pct_override=57.7).autocompact_threshold == 103_860


def test_aggressive_preset_compacts_at_75_percent():
    assert compute_thresholds(PRESETS["aggressive"], OPUS_45).autocompact_threshold == 135_000


# -- blocking limit ---------------------------------------------------------------------------


def test_blocking_limit_override_is_absolute():
    assert thresholds(blocking_limit_override=150_000).blocking_limit == 150_000


def test_blocking_limit_from_the_raw_window_before_2_1_75():
    assert compute_thresholds(PRESETS["claude-code-2.1.74"], OPUS_45).blocking_limit == 197_000
    assert compute_thresholds(PRESETS["claude-code-2.1.20"], OPUS_45).blocking_limit == 197_000


def test_buffers_are_configurable():
    t = thresholds(
        autocompact_buffer_tokens=10_000,
        warning_threshold_buffer_tokens=30_000,
        error_threshold_buffer_tokens=5_000,
        manual_compact_buffer_tokens=1_000,
    )
    assert (t.autocompact_threshold, t.warning_threshold, t.error_threshold, t.blocking_limit) == (
        170_000,
        140_000,
        165_000,
        179_000,
    )


# -- modeled steps ---------------------------------------------------------------------------


def test_collapse_suppresses_autocompact_and_the_blocking_preempt():
    t = compute_thresholds(PRESETS["collapse-on"], OPUS_45)
    assert t.autocompact_enabled is True
    assert t.autocompact_active is False
    assert t.blocking_preempt_active is False
    assert (t.collapse_commit_threshold, t.collapse_blocking_threshold) == (162_000, 171_000)


def test_collapse_with_autocompact_off_keeps_the_blocking_preempt():
    t = thresholds(collapse_enabled=True, autocompact_enabled=False)
    assert t.blocking_preempt_active is True


def test_modeled_thresholds_are_none_when_their_step_is_off():
    t = thresholds()
    assert t.collapse_commit_threshold is None
    assert t.snip_trigger_threshold is None
    assert t.blocking_preempt_active is True


def test_snip_thresholds_are_fractions_of_the_effective_window():
    t = compute_thresholds(PRESETS["snip-on"], OPUS_45)
    assert (t.snip_trigger_threshold, t.snip_target_tokens) == (144_000, 108_000)


def test_thresholds_serialise_to_a_dict():
    data = thresholds().to_dict()
    assert data["autocompact_threshold"] == 167_000
    assert data["snip_target_tokens"] is None


# -- token warning state ---------------------------------------------------------------------


def test_warning_state_below_every_threshold():
    state = token_warning_state(100_000, thresholds())
    assert state == {
        "percent_left": 40,
        "is_above_warning": False,
        "is_above_error": False,
        "is_above_autocompact": False,
        "is_at_blocking": False,
    }


def test_warning_and_error_start_at_threshold_minus_20k_inclusive():
    t = thresholds()
    assert token_warning_state(146_999, t)["is_above_warning"] is False
    assert token_warning_state(147_000, t)["is_above_warning"] is True
    assert token_warning_state(147_000, t)["is_above_error"] is True


def test_autocompact_and_blocking_flags_are_inclusive():
    t = thresholds()
    assert token_warning_state(166_999, t)["is_above_autocompact"] is False
    assert token_warning_state(167_000, t)["is_above_autocompact"] is True
    assert token_warning_state(176_999, t)["is_at_blocking"] is False
    assert token_warning_state(177_000, t)["is_at_blocking"] is True


def test_percent_left_rounds_half_up_like_math_round():
    t = thresholds(autocompact_buffer_tokens=80_000)  # base T = 100,000
    assert token_warning_state(99_500, t)["percent_left"] == 1  # 0.5 → 1
    assert token_warning_state(98_500, t)["percent_left"] == 2  # 1.5 → 2 (banker's gives 2)
    assert token_warning_state(97_500, t)["percent_left"] == 3  # 2.5 → 3 (banker's gives 2)


def test_percent_left_never_goes_negative():
    assert token_warning_state(400_000, thresholds())["percent_left"] == 0


def test_percent_left_uses_the_effective_window_when_autocompact_is_off():
    state = token_warning_state(90_000, thresholds(autocompact_enabled=False))
    assert state["percent_left"] == 50
    assert state["is_above_autocompact"] is False
