"""The validated error band: how far real GPU memory was from memgraph's prediction on published measurements.

A reported uncertainty, never a factor applied to a prediction. The stored rows (validation/band_data.py, written
by :func:`write_band_data` from ``memgraph validate --published``'s evaluations of ``reports/published/``) hold
each predicted row's counter, model kind (model_spec/kinds.py), measured and predicted bytes. For a counter and a
kind the band is

    [min, max] over those rows of  real / predicted - 1

"on N published measurements like this one, the real value was within -a% .. +b% of the prediction". Its upper
figure is the prediction times (1 + b), b taken as 0 where every row was over-predicted. The maximum, not a
quantile: the band is there so that "fits, with margin" does not run out of memory, and with a few dozen rows per
counter a 95% quantile would leave the worst rows, the ones a user would hit, outside by construction.

A row whose published run executed code today's stack no longer runs, shown by a CPU measurement of both
(its ``measured_code_differs`` field, validation/published.py), is left out of the rows: the band is a margin for
today's code, and such a row measures the old code's bytes as well as memgraph's error (the row keeps its error in
reports/published.md, with how much of its miss the measured difference explains).

A kind with fewer than ``MIN_ROWS`` rows of a counter takes the band of that counter over every kind (and says
so). The counters are tied: reserved is at least the reserved prediction + the bytes the allocated band adds
(memory the allocator was not predicted to hand out must be reserved too), beside its own band if it has one;
the device total is at least that reserved figure + the CUDA context's upper end (today's upper end of
everything above reserved), beside its own band if it has one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from memgraph.analysis.device import DevicePeaks

MIN_ROWS = 5  # fewer rows of a kind than this: the band over every kind of the counter
DEFINITION = ("validated band: over the published measurements of this counter and kind of model (reports/published.md), "
              "the lowest and highest real / predicted - 1; its upper figure is the prediction times (1 + the highest, "
              "at least 0); a kind with fewer than 5 rows takes every kind's; rows whose measured code differs from "
              "today's (measured_code_differs, shown on the CPU) are left out")


@dataclass(frozen=True)
class BandRow:
    """One published measurement as validated: what band_data.py stores."""

    file: str
    source: str
    counter: str
    kind: str
    measured: float
    predicted: int

    @property
    def ratio(self) -> Fraction:
        """real / predicted, exactly (the stored measured value is the published number times its unit)."""
        return Fraction(self.measured) / self.predicted

    @property
    def real_vs_predicted_pct(self) -> float:
        return float(100 * (self.ratio - 1))


@dataclass(frozen=True)
class Band:
    counter: str
    kind: str  # the kind asked for
    scope: str  # the kind whose rows it spans, or "any kind"
    rows: int
    low_pct: float
    high_pct: float
    high_ratio: Fraction = Fraction(1)  # the highest real / predicted, exactly

    def upper(self, predicted: int) -> int:
        """The prediction times the highest real / predicted (at least 1), rounded up: exact integer arithmetic."""
        return math.ceil(predicted * max(self.high_ratio, Fraction(1)))

    def sentence(self) -> str:
        like = "like this one" if self.scope == self.kind else f"of any kind (under {MIN_ROWS} of {self.kind})"
        return (f"on {self.rows} published measurements {like}, the real value was within "
                f"{self.low_pct:+.1f}% .. {self.high_pct:+.1f}% of the prediction")


def stored_rows() -> list[BandRow]:
    from memgraph.validation.band_data import ROWS

    return [BandRow(*r) for r in ROWS]


def band(rows: list[BandRow], counter: str, kind: str) -> Band | None:
    """The band of ``counter`` for ``kind`` over ``rows`` (see the module's docstring), None with too few rows."""
    for scope in (kind, "any kind"):
        ratios = [r.ratio for r in rows if r.counter == counter and (scope == "any kind" or r.kind == scope)]
        if len(ratios) >= MIN_ROWS:
            low, high = min(ratios), max(ratios)
            return Band(counter, kind, scope, len(ratios), float(100 * (low - 1)), float(100 * (high - 1)), high)
    return None


def validated_figures(kind: str, device: DevicePeaks, allocated: int, rows: list[BandRow] | None = None) -> dict:
    """The validated upper figure of each counter for a cuda prediction (``device``: its DevicePeaks, or any object
    with the four figures read here as attributes), with the bands behind them; ``None`` figures where no band
    exists."""
    rows = stored_rows() if rows is None else rows
    bands = {c: band(rows, c, kind) for c in ("allocated", "reserved", "device_total")}
    alloc = bands["allocated"].upper(allocated) if bands["allocated"] else None
    reserved, total = device.steady_state_reserved, device.steady_state_device_total
    # reserved: its own band, and at least the bytes the allocated band adds (they go through the allocator too)
    res = max(([bands["reserved"].upper(reserved)] if bands["reserved"] else [])
              + ([reserved + (alloc - allocated)] if alloc is not None else []), default=None)
    # device total: its own band, and at least that reserved figure + what today's upper end has above reserved
    above_reserved = device.steady_state_device_total_upper - device.reserved_upper
    total_v = max(([bands["device_total"].upper(total)] if bands["device_total"] else [])
                  + ([res + above_reserved] if res is not None else []), default=None)
    return {"kind": kind, "definition": DEFINITION,
            "bands": {c: (None if b is None else {"scope": b.scope, "rows": b.rows, "low_pct": round(b.low_pct, 2),
                                                  "high_pct": round(b.high_pct, 2), "sentence": b.sentence()})
                      for c, b in bands.items()},
            "allocated_validated_upper": alloc, "reserved_validated_upper": res,
            "steady_state_device_total_validated_upper": total_v}


def write_band_data(evaluations, path="memgraph/validation/band_data.py") -> None:
    """Write band_data.py from ``memgraph validate --published``'s evaluations (validation/published.py):
    ``python -c "from memgraph.validation.published import write_error_record; write_error_record()"`` does both."""
    rows = sorted((e.row.file, e.row.source, e.row.counter, e.kind, e.row.measured_bytes, e.predicted)
                  for e in in_band(evaluations))
    lines = ['"""Written by memgraph.validation.band.write_band_data from the predicted rows of reports/published/:',
             "(file, source, counter, model kind, measured bytes, predicted bytes). Do not edit: regenerate.", '"""',
             "", "ROWS = ("]
    lines += [f"    {r!r}," for r in rows]
    lines += [")", ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def in_band(evaluations) -> list:
    """The predicted evaluations the band is made of: every predicted row but those whose measured code differs
    from today's (``measured_code_differs``)."""
    return [e for e in evaluations if e.predicted is not None and not e.row.code_differs]


FIGURES = ("allocated_validated_upper", "reserved_validated_upper", "steady_state_device_total_validated_upper")


def add_validated_band(result, kind: str, rows: list[BandRow] | None = None) -> None:
    """The validated figures beside a cuda result's upper ends (``result.device``), and ``fits_with_margin`` on
    the higher of the two device-total upper ends where a band exists (``margin_basis`` says which)."""
    d = result.device
    v = validated_figures(kind, d, result.steady_state_peak.bytes, rows)
    d.allocated_validated_upper, d.reserved_validated_upper = v["allocated_validated_upper"], v["reserved_validated_upper"]
    d.steady_state_device_total_validated_upper = total = v["steady_state_device_total_validated_upper"]
    d.validated_band = {k: v[k] for k in ("kind", "definition", "bands")}
    if total is None:
        d.margin_basis = "bounded unknowns (no validated band for this kind)"
    else:
        d.margin_basis = "validated band and bounded unknowns, the higher"
        d.fits_with_margin = bool(d.fits_with_margin) and total <= d.capacity_bytes
    result.fits_with_margin = d.fits_with_margin
    result.required_bytes_validated_upper = total
    result.margin_basis = d.margin_basis
