"""The anchor selection's screen (``measures.anchor_screen``) takes the anchors the full refit of
every candidate takes, and its misfit estimate is the refit's figure."""

from __future__ import annotations

import io
import math
import random
import subprocess
import sys
from pathlib import Path

import pytest

from contextlab.engine import cli
from contextlab.engine.measures import anchors, tokens
from contextlab.engine.measures.anchor_screen import (
    ZERO,
    StretchExtremes,
    TrialScreen,
    add_point,
    add_shifted_points,
)
from contextlab.engine.measures.tokens import fit_calibration
from tests.conftest import corpus_files, needs_corpus

ROOT = Path(__file__).resolve().parents[2]


def replay_json(path: Path) -> str:
    args = cli.build_parser().parse_args(["replay", str(path), "--json"])
    out, err = io.StringIO(), io.StringIO()
    assert cli.cmd_replay(args, out, err) == 0, err.getvalue()
    return out.getvalue()


def misfit(xs: list[float], ys: list[float]) -> float:
    """``thread_anchors``' misfit, as it computes it."""
    line = fit_calibration([round(x) for x in xs], [round(y) for y in ys])
    assert line is not None
    return sum(
        ((line.prefix_tokens + line.ratio * x - y) / max(1.0, y)) ** 2
        for x, y in zip(xs, ys, strict=True)
    )


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An 8 MB synthetic session: compactions, turn starts and their candidate jumps."""
    path = tmp_path_factory.mktemp("synthetic") / "synth-8mb.jsonl"
    subprocess.run(
        [sys.executable, str(ROOT / "bench/gen_synthetic.py"), "--size-mb", "8", "-o", str(path)],
        check=True,
        capture_output=True,
    )
    return path


def screened_and_exact(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str, int, int]:
    """Replay JSON with the screen and with every candidate refitted (the selection as it was
    before the screen), and how many line fits each ran."""
    fits = [0]
    real_fit = tokens.fit_calibration

    def counted(xs: list[int], ys: list[int]) -> tokens.Calibration | None:
        fits[0] += 1
        return real_fit(xs, ys)

    monkeypatch.setattr(anchors, "fit_calibration", counted)
    screened = replay_json(path)
    screened_fits, fits[0] = fits[0], 0
    monkeypatch.setattr(anchors, "SCREEN_TOLERANCE", math.inf)
    exact = replay_json(path)
    return screened, exact, screened_fits, fits[0]


def test_the_screen_takes_the_anchors_of_the_full_refit_on_a_synthetic_session(
    synthetic: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    screened, exact, screened_fits, exact_fits = screened_and_exact(synthetic, monkeypatch)
    assert screened == exact
    # the screen decided most candidates without a refit
    assert screened_fits * 3 < exact_fits


@pytest.mark.slow
@needs_corpus
@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name[:40])
def test_the_screen_takes_the_anchors_of_the_full_refit_on_the_corpus(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    screened, exact, _, _ = screened_and_exact(path, monkeypatch)
    assert screened == exact


@pytest.mark.parametrize("seed", range(20))
def test_the_screens_misfit_is_the_refits(seed: int) -> None:
    rng = random.Random(seed)
    n = 400
    raw = sorted(rng.randrange(2_000, 120_000) for _ in range(n))
    totals = [round(15_000 + 1.31 * r + rng.gauss(0, 600)) for r in raw]
    recorded = [k for k in range(n) if rng.random() > 0.1]
    ratio, base = 1.3, 14_000.0
    screen = TrialScreen(recorded, n, raw, totals, base, ratio)
    flags = [k in set(recorded) for k in range(n)]
    # a walk's state: history, then segment deltas and unrecorded input in stretches
    state = [
        (
            rng.choice([0.0, 3_000.5]),
            rng.choice([0.0, -2_200.25, 4_100.0]),
            rng.choice([0.0, 900.0]),
        )
        for _ in range(n)
    ]
    cut, stop = rng.randrange(50, 200), rng.randrange(200, 350)
    shift_tokens = rng.uniform(-5_000, 5_000)
    for k in range(stop, n):
        state[k] = (0.0, shift_tokens, 0.0)
    prefix = screen.prefix_sums(flags, raw, totals, state, ratio)
    piece = list(ZERO)
    for k in range(cut, stop):
        if flags[k]:
            add_point(
                piece,
                raw[k] + (state[k][0] + state[k][1]) / ratio,
                totals[k] - state[k][2],
                base,
                ratio,
            )
    rest = screen.shifted_suffix(stop, (0.0 + shift_tokens) / ratio)
    assert rest is not None
    estimate = screen.misfit([prefix[cut], piece, rest])
    xs = [raw[k] + (state[k][0] + state[k][1]) / ratio for k in recorded]
    ys = [totals[k] - state[k][2] for k in recorded]
    expected = misfit(xs, ys)
    assert estimate is not None
    assert abs(estimate - expected) <= 1e-9 * expected


def test_a_stretch_at_constant_offsets_sums_as_its_points_do() -> None:
    """``add_shifted_points`` is ``add_point`` per request, to the same floats: offsets whose
    rounding is clear (integer sums shifted at once) and offsets near a half or a y that rounds
    to zero or below (point by point)."""
    rng = random.Random(3)
    raw = [rng.randint(0, 90_000) for _ in range(400)]
    totals = [max(1, round(r * 1.07 + rng.gauss(9_000, 400))) for r in raw]
    offsets = (
        (0.0, 0.0),
        (812.37, 2_345.5),
        (-40.5, 95_000.25),
        (0.5, 1.5),
        (812.37, 2_345.2),
        (-40.7, 4_000.6),
        (3.4999999, 0.5000001),
        (0.2, min(totals) - 0.6),
        (0.2, min(totals) - 1.4),
        (0.2, min(totals) - 0.4),
    )
    for shift, drop in offsets:
        one: list[float] = list(ZERO)
        for r, t in zip(raw, totals, strict=True):
            add_point(one, r + shift, t - drop, 9_000.0, 1.07)
        stretch: list[float] = list(ZERO)
        add_shifted_points(stretch, raw, totals, shift, drop, 9_000.0, 1.07)
        assert stretch == one


def test_the_screens_suffix_and_prefix_sums_are_add_points_sums() -> None:
    """``TrialScreen``'s suffix sums and ``prefix_sums`` add each point as ``add_point`` does
    (written inline): the same floats, request by request, with ys at, below and above 1 and
    requests left out."""
    rng = random.Random(5)
    n = 300
    raw = [rng.randint(0, 90_000) for _ in range(n)]
    totals = [rng.choice([0, 1, rng.randint(2, 120_000)]) for _ in range(n)]
    recorded = [k for k in range(n) if rng.random() > 0.2]
    base, ratio = 12_000.5, 1.21
    screen = TrialScreen(recorded, n, raw, totals, base, ratio)
    acc: list[float] = list(ZERO)
    for k in range(n - 1, -1, -1):
        if k in set(recorded):
            add_point(acc, float(raw[k]), float(totals[k]), base, ratio)
        assert list(screen.suffix[k]) == acc
    assert screen.suffix[n] == ZERO
    flags = [k in set(recorded) for k in range(n)]
    state = [
        (rng.choice([0.0, 3_000.5]), rng.choice([0.0, -2_200.25]), rng.choice([0.0, 0.75, 900.0]))
        for _ in range(n)
    ]
    prefix = screen.prefix_sums(flags, raw, totals, state, ratio)
    acc = list(ZERO)
    assert prefix[0] == ZERO
    for k, (hist, seg, unrec) in enumerate(state):
        if flags[k]:
            add_point(acc, raw[k] + (hist + seg) / ratio, totals[k] - unrec, base, ratio)
        assert list(prefix[k + 1]) == acc


@pytest.mark.parametrize("seed", range(12))
def test_the_stretch_bound_is_at_most_the_stretchs_misfit(seed: int) -> None:
    """``TrialScreen.stretch_bound``: the sums of a stretch at constant offsets from the suffix
    sums, whose misfit is never above the one the stretch summed point by point gives (it only
    rejects what the full sum rejects), equal to it with no drop, and close to it for a drop
    small against the prompts."""
    rng = random.Random(seed)
    n = 300
    raw = sorted(rng.randrange(2_000, 120_000) for _ in range(n))
    totals = [round(15_000 + 1.31 * r + rng.gauss(0, 600)) for r in raw]
    recorded = [k for k in range(n) if rng.random() > 0.1]
    ratio, base = 1.3, 14_000.0
    screen = TrialScreen(recorded, n, raw, totals, base, ratio)
    flags = [k in set(recorded) for k in range(n)]
    state = [(0.0, 0.0, 0.0)] * n
    before = screen.prefix_sums(flags, raw, totals, state, ratio)
    start, stop = rng.randrange(20, 150), rng.choice([rng.randrange(150, n), n])
    stretch = [k for k in recorded if start <= k < stop]
    low, high = min(totals[k] for k in stretch), max(totals[k] for k in stretch)
    rest = screen.shifted_suffix(stop, 0.0)
    assert rest is not None
    for shift, drop in ((0.0, 0.0), (812.37, 0.0), (-40.2, 2_345.2), (3.3, -1_800.4)):
        piece: list[float] = list(ZERO)
        add_shifted_points(
            piece, [raw[k] for k in stretch], [totals[k] for k in stretch], shift, drop, base, ratio
        )
        summed = screen.misfit([before[start], piece, rest])
        bound = screen.stretch_bound(start, stop, shift, drop, low, high)
        assert bound is not None
        assert bound[:5] == piece[:5]  # the fit's integer sums, exactly
        bounded = screen.misfit([before[start], bound, rest])
        assert summed is not None
        assert bounded is not None
        assert bounded <= summed * (1 + 1e-9)
        if drop == 0.0:
            assert abs(bounded - summed) <= 1e-9 * summed
        else:
            assert bounded >= 0.5 * summed
    # an offset whose rounding is in doubt, or a y that rounds to zero: sum the stretch
    assert screen.stretch_bound(start, stop, 0.5, 0.0, low, high) is None
    assert screen.stretch_bound(start, stop, 0.0, low - 0.4, low, high) is None


def test_stretch_extremes_are_the_slices_min_and_max() -> None:
    """Asked in any order (later starts, earlier ones, other ends), each answer is the
    stretch's own ``min`` and ``max``."""
    rng = random.Random(24)
    for size in (1, 2, 7, 300):
        values = [rng.randrange(-50, 10_000) for _ in range(size)]
        extremes = StretchExtremes(values)
        for _ in range(400):
            hi = rng.randint(1, size)
            lo = rng.randrange(hi)
            stretch = values[lo:hi]
            assert extremes.of(lo, hi) == (min(stretch), max(stretch)), (lo, hi)
