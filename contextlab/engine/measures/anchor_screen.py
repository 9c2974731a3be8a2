"""Screening of anchor candidates without refitting the whole thread for each one.

``anchors.thread_anchors`` decides its candidate jumps in time order: a candidate is taken when
the line through the thread's anchored view fits better with it (``misfit``). Refitting every
candidate over every recorded request made the decision quadratic in the thread's length (at
200 MB of synthetic session, 819 full walks and refits took half of the replay).

A trial differs from the anchors taken so far only from its candidate on (a jump depends only on
the decisions before it), and after the candidate the walk takes nothing more: the view's
offsets stay constant until the next compaction, and after it are the candidate segment's delta
alone. So a trial's misfit is three sums: the requests before the candidate (prefix sums over
the current walk, rebuilt only when a candidate is taken), the candidate's own stretch up to the
next compaction (summed directly), and the rest (suffix sums over the recording, shifted by the
segment delta). The fit's sums are integers, so exact; the misfit is an expansion around a
reference line, a float estimate. ``TrialScreen.misfit`` returns None where the estimate
cannot stand for the exact figure (a rounding that a shift could move, too few points), and the
caller decides a candidate from the estimate only when it is clear of the threshold by
``SCREEN_TOLERANCE``: near-ties are decided by the exact walk and refit, so the anchors are the
ones the full refit takes.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence

#: How far (in log misfit) an estimate must be from the decision threshold to decide a
#: candidate without the exact refit. The estimate's relative error was at most 1.2e-13 over
#: the 489 trials of the corpus and of synthetic sessions of 8 and 100 MB (checked against the
#: exact misfit of each); tests/engine/test_anchor_screen.py holds it to 1e-9.
SCREEN_TOLERANCE = 1e-6

#: Sums of one set of view points: the fit's integer sums over points with a positive rounded
#: prompt (count, Σx, Σy, Σx², Σxy) and the misfit's weighted sums (Σw, Σwx, Σwx², Σwe, Σwxe,
#: Σwe²; w = 1/max(1, y)², e = y minus the reference line at x).
Sums = tuple[int, int, int, int, int, float, float, float, float, float, float]
ZERO: Sums = (0, 0, 0, 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


def add_point(acc: list[float], x: float, y: float, ref_prefix: float, ref_ratio: float) -> None:
    """Add one view point (as ``misfit`` builds it: x raw + offset, y recorded - unrecorded).
    ``TrialScreen`` and ``add_shifted_points`` write it inline, to the same floats."""
    xr = round(x)
    yr = round(y)
    if yr > 0:
        acc[0] += 1
        acc[1] += xr
        acc[2] += yr
        acc[3] += xr * xr
        acc[4] += xr * yr
    w = 1.0 / max(1.0, y) ** 2
    e = y - ref_prefix - ref_ratio * x
    acc[5] += w
    acc[6] += w * x
    acc[7] += w * x * x
    acc[8] += w * e
    acc[9] += w * x * e
    acc[10] += w * e * e


def add_shifted_points(
    acc: list[float],
    raw: Sequence[int],
    totals: Sequence[int],
    shift: float,
    drop: float,
    ref_prefix: float,
    ref_ratio: float,
) -> None:
    """``add_point`` for each request of a stretch whose offsets are constant (x raw + ``shift``,
    y recorded - ``drop``), to the same sums: one loop without a call per point (a candidate's
    stretch can run to the thread's end).

    The fit's integer sums are sums of the stretch shifted by the rounded offsets, at C speed,
    where no rounding is in doubt (neither offset within 1e-6 of a half, every rounded y
    positive); the weighted sums are added point by point in ``add_point``'s order and
    arithmetic (``w * x * e`` is ``(w * x) * e``), so they are the same floats."""
    n, sx, sy, sxx, sxy, sw, swx, swxx, swe, swxe, swee = acc
    whole = (
        bool(raw)
        and not _near_half(shift)
        and not _near_half(drop)
        and min(totals) - round(drop) >= 1
    )
    if whole:
        # round(r + shift) = r + round(shift) and round(t - drop) = t - round(drop) here
        s, d, count = round(shift), round(drop), len(raw)
        sum_r, sum_t = sum(raw), sum(totals)
        sum_rr, sum_rt = sum(map(operator.mul, raw, raw)), sum(map(operator.mul, raw, totals))
        n += count
        sx += sum_r + count * s
        sy += sum_t - count * d
        sxx += sum_rr + 2 * s * sum_r + count * s * s
        sxy += sum_rt - d * sum_r + s * sum_t - count * s * d
    for raw_k, total_k in zip(raw, totals, strict=True):
        x = raw_k + shift
        y = total_k - drop
        if not whole:
            xr = round(x)
            yr = round(y)
            if yr > 0:
                n += 1
                sx += xr
                sy += yr
                sxx += xr * xr
                sxy += xr * yr
        w = 1.0 / (y if y > 1.0 else 1.0) ** 2
        e = y - ref_prefix - ref_ratio * x
        sw += w
        wx = w * x
        swx += wx
        swxx += wx * x
        we = w * e
        swe += we
        swxe += wx * e
        swee += we * e
    acc[:] = [n, sx, sy, sxx, sxy, sw, swx, swxx, swe, swxe, swee]


def _near_half(value: float) -> bool:
    """Whether ``value``'s fraction is within 1e-6 of a half (its rounding is in doubt)."""
    return abs(abs(value - math.floor(value)) - 0.5) < 1e-6


def _plus(a: Sequence[float], b: Sequence[float]) -> list[float]:
    return [p + q for p, q in zip(a, b, strict=True)]


class TrialScreen:
    """Suffix sums of one thread's recording, and the estimate of a trial's misfit from them."""

    def __init__(
        self,
        recorded: Sequence[int],
        n: int,
        raw: Sequence[int],
        totals: Sequence[int],
        ref_prefix: float,
        ref_ratio: float,
    ) -> None:
        self.ref_prefix = ref_prefix
        self.ref_ratio = ref_ratio
        # suffix[k]: the recorded requests from k on, with no offset (x = raw, y = recorded)
        suffix: list[Sums] = [ZERO] * (n + 1)
        self.suffix = suffix
        # ``add_point`` inline (a call per request of the thread), the same sums in its order
        cnt, sx, sy, sxx, sxy, sw, swx, swxx, swe, swxe, swee = ZERO
        sums: Sums = ZERO
        is_recorded = set(recorded)
        for k in range(n - 1, -1, -1):
            if k in is_recorded:
                x, y = float(raw[k]), float(totals[k])
                xr = round(x)
                yr = round(y)
                if yr > 0:
                    cnt += 1
                    sx += xr
                    sy += yr
                    sxx += xr * xr
                    sxy += xr * yr
                w = 1.0 / (y if y > 1.0 else 1.0) ** 2
                e = y - ref_prefix - ref_ratio * x
                sw += w
                wx = w * x
                swx += wx
                swxx += wx * x
                we = w * e
                swe += we
                swxe += wx * e
                swee += we * e
                sums = (cnt, sx, sy, sxx, sxy, sw, swx, swxx, swe, swxe, swee)
            suffix[k] = sums

    def prefix_sums(
        self,
        recorded_flags: Sequence[bool],
        raw: Sequence[int],
        totals: Sequence[int],
        state: Sequence[tuple[float, float, float]],
        ratio: float,
    ) -> list[Sums]:
        """``out[k]``: the sums of the recorded requests before ``k`` under ``state``."""
        out: list[Sums] = [ZERO]
        append = out.append
        ref_prefix, ref_ratio = self.ref_prefix, self.ref_ratio
        # ``add_point`` inline (a call per request of the thread), the same sums in its order
        cnt, sx, sy, sxx, sxy, sw, swx, swxx, swe, swxe, swee = ZERO
        sums: Sums = ZERO
        for k, (hist, seg, unrec) in enumerate(state):
            if recorded_flags[k]:
                x = raw[k] + (hist + seg) / ratio
                y = totals[k] - unrec
                xr = round(x)
                yr = round(y)
                if yr > 0:
                    cnt += 1
                    sx += xr
                    sy += yr
                    sxx += xr * xr
                    sxy += xr * yr
                w = 1.0 / (y if y > 1.0 else 1.0) ** 2
                e = y - ref_prefix - ref_ratio * x
                sw += w
                wx = w * x
                swx += wx
                swxx += wx * x
                we = w * e
                swe += we
                swxe += wx * e
                swee += we * e
                sums = (cnt, sx, sy, sxx, sxy, sw, swx, swxx, swe, swxe, swee)
            append(sums)
        return out

    def shifted_suffix(self, start: int, shift: float) -> list[float] | None:
        """The suffix sums from ``start`` with ``shift`` raw tokens added to every x (a
        segment delta after the last compaction), None when the shift's rounding is ambiguous."""
        s = self.suffix[start]
        if _near_half(shift):
            return None
        d = round(shift)
        count, sx, sy, sxx, sxy = (int(v) for v in s[:5])
        sw, swx, swxx, swe, swxe, swee = s[5:]
        r0d = self.ref_ratio * shift
        return [
            count,
            sx + count * d,
            sy,
            sxx + 2 * d * sx + d * d * count,
            sxy + d * sy,
            sw,
            swx + shift * sw,
            swxx + 2 * shift * swx + shift * shift * sw,
            swe - r0d * sw,
            swxe - r0d * swx + shift * swe - r0d * shift * sw,
            swee - 2 * r0d * swe + r0d * r0d * sw,
        ]

    def stretch_bound(
        self, start: int, stop: int, shift: float, drop: float, low: int, high: int
    ) -> list[float] | None:
        """Sums of the recorded requests ``start:stop`` at constant offsets (x raw + ``shift``,
        y recorded - ``drop``) from the suffix sums, in O(1): the fit's integer sums exactly,
        the misfit's weighted sums with each weight 1/y² bounded from below (``low`` and
        ``high``: the stretch's smallest and largest recorded prompt). A misfit from these is
        at most the trial's (its terms are squares): when it already rejects the candidate,
        the stretch need not be summed point by point. None where the rounding of an offset
        is in doubt or a y would round to zero or below (sum the stretch instead)."""
        if _near_half(shift) or _near_half(drop) or low - round(drop) < 1:
            return None
        after, before = self.suffix[stop], self.suffix[start]
        count, sx, sy, sxx, sxy = (int(b - a) for b, a in zip(before[:5], after[:5], strict=True))
        sw, swx, swxx, swe, swxe, swee = (b - a for b, a in zip(before[5:], after[5:], strict=True))
        s, d = round(shift), round(drop)
        # each weight is 1/t² in the suffix sums and 1/max(1, t - drop)² in the trial: the
        # trial's is (t/(t - drop))² times the suffix's where t - drop >= 1, least at the
        # stretch's largest t for a positive drop, its smallest for a negative one; a positive
        # drop never makes a weight smaller (t >= 1), whatever the clamp
        if drop <= 0:
            scale = (low / (low - drop)) ** 2
        elif low - drop >= 1:
            scale = (high / (high - drop)) ** 2
        else:
            scale = 1.0
        # e = y - the reference line = the suffix's e minus (drop + ratio * shift)
        c = drop + self.ref_ratio * shift
        return [
            count,
            sx + count * s,
            sy - count * d,
            sxx + 2 * s * sx + s * s * count,
            sxy - d * sx + s * sy - count * s * d,
            scale * sw,
            scale * (swx + shift * sw),
            scale * (swxx + 2 * shift * swx + shift * shift * sw),
            scale * (swe - c * sw),
            scale * (swxe + shift * swe - c * swx - c * shift * sw),
            scale * (swee - 2 * c * swe + c * c * sw),
        ]

    def misfit(self, parts: Sequence[Sequence[float]]) -> float | None:
        """Estimate of ``misfit`` over the union of ``parts`` (None: decide it exactly)."""
        total: Sequence[float] = ZERO
        for part in parts:
            total = _plus(total, part)
        count, sx, sy, sxx, sxy = (int(v) for v in total[:5])
        if count < 3:
            return None
        # the fit's sums are exact integers: the line is the least-squares one through the
        # rounded points, as ``fit_calibration`` draws it
        sxx_n = count * sxx - sx * sx
        sxy_n = count * sxy - sx * sy
        if sxx_n <= 0 or sxy_n <= 0:
            return None
        line_ratio = sxy_n / sxx_n
        line_prefix = sy / count - line_ratio * (sx / count)
        sw, swx, swxx, swe, swxe, swee = total[5:]
        a = line_prefix - self.ref_prefix
        b = line_ratio - self.ref_ratio
        # Σ w (a + b x - e)², expanded
        value = a * a * sw + b * b * swxx + swee + 2 * a * b * swx - 2 * a * swe - 2 * b * swxe
        if not value > 0 or not math.isfinite(value):
            return None
        return value


class StretchExtremes:
    """The least and the greatest of ``values[lo:hi]``, for the stretches the screen bounds.

    Every candidate before one compaction (or the thread's end) ends its stretch there, so per
    end the minima and maxima of the stretches ending at it are kept and grown downwards as an
    earlier start is asked for: each value is looked at once per end, where ``min`` and ``max``
    over each candidate's stretch looked at a long thread's recorded prompts once a candidate.
    """

    def __init__(self, values: Sequence[int]) -> None:
        self.values = values
        #: end → (minima, maxima) of ``values[hi - 1 - j : hi]`` at position j
        self._by_end: dict[int, tuple[list[int], list[int]]] = {}

    def of(self, lo: int, hi: int) -> tuple[int, int]:
        """``(min(values[lo:hi]), max(values[lo:hi]))``; the stretch must not be empty."""
        found = self._by_end.get(hi)
        if found is None:
            first = self.values[hi - 1]
            found = self._by_end[hi] = ([first], [first])
        lows, highs = found
        values = self.values
        low, high = lows[-1], highs[-1]
        for i in range(hi - 1 - len(lows), lo - 1, -1):
            value = values[i]
            if value < low:
                low = value
            if value > high:
                high = value
            lows.append(low)
            highs.append(high)
        return lows[hi - 1 - lo], highs[hi - 1 - lo]
