"""The largest batch (or sequence) that fits: doubling then bisection over probes, cheap where the growth is affine.

The batch solver talks to a :class:`BatchCurve`: ``real(b)`` is a real trace (seconds), ``fits_real(b)`` and
``fits_interpolated(fit, b)`` say whether batch ``b`` fits, from a real trace or from an
:class:`~memgraph.trace.shortcuts.batch.AffineFit` interpolation (a tenth of a second). Two real traces anchor the fit; if
:meth:`AffineFit.of` refuses them (the two traces record different streams, or a shape grows in two dims so
its bytes are quadratic in the batch, e.g. CLIP's ``[b, b]`` logits), every probe is a real trace. Either
way the answer is confirmed by real traces at it and one above; where a confirmation disagrees (the stream
changes between the anchors and the answer, e.g. another kernel above some batch), the search goes on
with real traces only, so the answer returned always has a real trace that fits and one above that does not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol

from memgraph.trace.shortcuts.batch import AffineFit
from memgraph.trace.tracer import Trace

MAX_BATCH = 1 << 16  # the doubling search stops here: a batch this large is a data-loader question, not memory
SMALLEST_ANCHOR = 2  # batch 1 can record a different stream (size-1 dims: memgraph/sweep.py docstring): then anchor at 2


class BatchCurve(Protocol):
    def real(self, batch: int) -> Trace: ...

    def fits_real(self, batch: int) -> bool: ...

    def fits_interpolated(self, fit: AffineFit, batch: int) -> bool: ...


@dataclass
class BatchAnswer:
    largest: int  # 0: not even batch 1 fits
    source: str  # how the probes were answered, in words
    interpolated: list[int] = field(default_factory=list)  # batch sizes answered from the affine fit
    confirmed: bool = False  # real traces at ``largest`` (fits) and ``largest + 1`` (does not) agree


def solve_largest_batch(curve: BatchCurve, start: int, fits_start: bool, limit: int = MAX_BATCH,
                        say: Callable[[str], None] | None = None) -> BatchAnswer:
    """The largest batch that fits, knowing whether ``start`` does (see the module docstring)."""
    if not fits_start and start == 1:
        return BatchAnswer(0, "batch 1 does not fit", confirmed=True)
    # anchors: your batch (its trace is already there) and twice it; below a batch that does not fit, 2 and it
    lo, hi = (start, 2 * start) if fits_start else (SMALLEST_ANCHOR, start)
    fit = AffineFit.of(curve.real(lo), lo, curve.real(hi), hi, [lo, hi]) if hi > lo else None
    if fit is None and lo < SMALLEST_ANCHOR:  # batch 1 recorded another stream: anchor at 2 and 4 instead
        lo, hi = SMALLEST_ANCHOR, 2 * SMALLEST_ANCHOR
        fit = AffineFit.of(curve.real(lo), lo, curve.real(hi), hi, [lo, hi])
    answer = BatchAnswer(0, f"interpolated from real traces at batch {lo} and {hi} (memgraph/trace/shortcuts/batch.py AffineFit)"
                         if fit is not None else
                         (f"real traces at every probe (the traces at batch {lo} and {hi} are not one stream "
                          "affine in the batch)" if hi > lo else "real traces at every probe"))

    def fits(b: int) -> bool:
        if fit is not None and b > lo and b != hi and fit.exact_at(b):  # the anchors are real traces already
            answer.interpolated.append(b)
            return curve.fits_interpolated(fit, b)
        return curve.fits_real(b)

    good = largest_fitting(fits, start, fits_start, limit, say, "batch")
    if good >= limit:
        answer.largest = good
        return answer
    at, above = good == 0 or curve.fits_real(good), curve.fits_real(good + 1)
    if not at or above:  # a confirmation disagrees with the interpolation: search on with real traces only
        answer.source += f"; the real trace at batch {good if not at else good + 1} disagreed, so real traces from there"
        good = largest_fitting(curve.fits_real, good + 1 if above else good, above, limit, say, "batch")
        at, above = good == 0 or curve.fits_real(good), good >= limit or curve.fits_real(good + 1)
    answer.largest, answer.confirmed = good, at and not above
    return answer


def largest_fitting(fits, start: int, fits_start: bool, limit: int, say=None, noun: str = "") -> int:
    """The largest n >= 1 with ``fits(n)`` (0 if none), for a ``fits`` that is true up to some n and false
    after: double from ``start`` until it fails (at most ``limit``), then bisect."""
    good, bad = (start, None) if fits_start else (0, start)
    n = start
    while bad is None:
        n *= 2
        if n > limit:
            return limit
        if say:
            say(f"probing {noun} {n}")
        if fits(n):
            good = n
        else:
            bad = n
    while bad - good > 1:
        mid = (good + bad) // 2
        if say:
            say(f"probing {noun} {mid}")
        if fits(mid):
            good = mid
        else:
            bad = mid
    return good
