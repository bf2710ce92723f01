"""The batch solver of memgraph fit (memgraph/fit/solve.py) on hand-made peak curves.

Each curve is a step whose storages are given as functions of the batch, recorded as real
:class:`~memgraph.trace.tracer.Trace` objects, so :class:`memgraph.trace.shortcuts.batch.AffineFit` judges them as it
judges traced ones. A batch fits when the bytes of all storages (all alive at once) are at most CAPACITY.
The expected answers are computed by hand beside each test.
"""

import pytest

from memgraph.fit.solve import solve_largest_batch
from memgraph.trace.shortcuts.batch import AffineFit
from memgraph.trace.record.event_log import EventLog, Origin, StorageRecord
from memgraph.trace.tracer import Trace

CAPACITY = 5000


def _storage(sid: int, nbytes: int, shape: tuple[int, ...]) -> StorageRecord:
    return StorageRecord(sid, nbytes, "float32", shape, Origin.OP, f"s{sid}", "m", "forward", 1, -1, sid)


class HandCurve:
    """A step of storages (bytes and shape as functions of the batch); ``real`` counts the traces made."""

    def __init__(self, storages):
        self.storages = storages  # [(shape(b) or None when absent at b)], float32
        self.traced: list[int] = []

    def _trace(self, b: int) -> Trace:
        shapes = [s for s in (f(b) for f in self.storages) if s is not None]
        records = [_storage(i, 4 * _numel(shape), shape) for i, shape in enumerate(shapes)]
        log = EventLog(storages=records, events=[(0, i) for i in range(len(records))])
        return Trace(log, [(0, len(records))], 0, 0, [], "for-loop", 0.0, set())

    def real(self, b: int) -> Trace:
        self.traced.append(b)
        return self._trace(b)

    def fits_real(self, b: int) -> bool:
        return sum(s.nbytes for s in self.real(b).log.storages) <= CAPACITY

    def fits_interpolated(self, fit: AffineFit, b: int) -> bool:
        return sum(n for n, _ in fit.sizes_at(b)) <= CAPACITY


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


WEIGHTS = lambda b: (250,)  # noqa: E731  1,000 B whatever the batch
ACTIVATIONS = lambda b: (b, 25)  # noqa: E731  100 B per sample
LOGITS = lambda b: (b, b)  # noqa: E731  CLIP-like [b, b] similarity logits: 4 b^2 B


@pytest.mark.parametrize("start", [1, 3, 8])
def test_affine_curve_is_solved_from_two_traces(start):
    # 1000 + 100 b <= 5000  <=>  b <= 40
    curve = HandCurve([WEIGHTS, ACTIVATIONS])
    answer = solve_largest_batch(curve, start, fits_start=True)
    assert answer.largest == 40 and answer.confirmed
    assert "AffineFit" in answer.source
    # real traces: the two anchors (start and 2 start) and the confirmations at 40 and 41, nothing else
    assert set(curve.traced) == {start, 2 * start, 40, 41}
    assert answer.interpolated  # the doubling and bisection probes were interpolations


def test_affine_curve_below_a_batch_that_does_not_fit():
    # from batch 64 (1000 + 6400 > 5000): anchors at 2 and 64, answer 40 as above
    curve = HandCurve([WEIGHTS, ACTIVATIONS])
    answer = solve_largest_batch(curve, 64, fits_start=False)
    assert answer.largest == 40 and answer.confirmed
    assert set(curve.traced) == {2, 64, 40, 41}


def test_quadratic_curve_is_refused_by_affinefit_and_bisected_with_real_traces():
    # 1000 + 100 b + 4 b^2 <= 5000: b = 21 gives 1000 + 2100 + 1764 = 4864, b = 22 gives 1000 + 2200 + 1936 = 5136
    curve = HandCurve([WEIGHTS, ACTIVATIONS, LOGITS])
    assert AffineFit.of(curve._trace(1), 1, curve._trace(2), 2, [1, 2]) is None  # two dims grow with the batch
    answer = solve_largest_batch(curve, 1, fits_start=True)
    assert answer.largest == 21 and answer.confirmed
    assert answer.interpolated == [] and "real traces at every probe" in answer.source
    # anchors 1, 2 (refused), then 2, 4 (refused); doubling 2, 4, 8, 16, 32 (fails), bisecting 24, 20, 22, 21:
    # every probe a real trace (HandCurve has no memo, so a size may be traced twice: compare the sets)
    assert set(curve.traced) == {1, 2, 4, 8, 16, 32, 24, 20, 22, 21}


def test_step_curve_disagrees_with_the_interpolation_and_is_searched_with_real_traces():
    # another 2,000 B buffer from batch 17 on (a kernel chosen above some size): below 17 the step is
    # 1000 + 100 b (fits up to 16), from 17 on 3000 + 100 b <= 5000 <=> b <= 20. The anchors (2 and 4) see
    # one affine stream that extrapolates to 40; the real trace at 40 does not fit, so the search goes on
    # with real traces only and finds 20, confirmed by real traces at 20 (fits) and 21 (does not).
    extra = lambda b: (500,) if b >= 17 else None  # noqa: E731
    curve = HandCurve([WEIGHTS, ACTIVATIONS, extra])
    answer = solve_largest_batch(curve, 2, fits_start=True)
    assert answer.largest == 20 and answer.confirmed
    assert "disagreed" in answer.source and 40 in curve.traced


def test_batch_one_does_not_fit_costs_no_trace():
    curve = HandCurve([WEIGHTS, ACTIVATIONS])
    answer = solve_largest_batch(curve, 1, fits_start=False)
    assert answer.largest == 0 and curve.traced == []


def test_interpolated_trace_carries_the_bounded_unknowns_at_its_batch():
    # The memory-efficient attention backward's workspace is a bounded unknown whose upper end grows with the
    # batch (facts/ops/cuda_workspace.py): an interpolated log must carry it at its own batch, or its upper
    # end (and fits_with_margin) is that of the anchor's batch. gpt2 at sequence 1024 on an RTX 4090 has
    # batch 12 fitting only at the expected value for this reason.
    from dataclasses import replace
    from pathlib import Path

    from memgraph.api import result_of_trace
    from memgraph.model_spec.defaults import resolve_defaults
    from memgraph.model_spec.options import TrainingOptions
    from memgraph.model_spec.sources import resolve
    from memgraph.trace.tracer import trace_training

    spec = resolve(str(Path(__file__).parent / "configs" / "tiny-gpt2.json"))
    opts = resolve_defaults(spec, TrainingOptions(seq_len=64, gpu="rtx-4090")).options
    t2, t4, t6 = (trace_training(spec, replace(opts, batch_size=b)) for b in (2, 4, 6))
    assert t2.unknowns and t6.unknowns[0].upper_bytes > t2.unknowns[0].upper_bytes  # it grows with the batch
    fit = AffineFit.of(t2, 2, t4, 4, [2, 4, 6])
    interpolated = fit.trace_at(6, spec, replace(opts, batch_size=6))
    assert interpolated.unknowns == t6.unknowns
    a = result_of_trace(spec.name, replace(opts, batch_size=6), interpolated)
    b = result_of_trace(spec.name, replace(opts, batch_size=6), t6)
    assert (a.required_bytes, a.required_bytes_upper) == (b.required_bytes, b.required_bytes_upper)
