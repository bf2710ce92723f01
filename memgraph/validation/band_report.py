"""The validated band in ``reports/published.md``: how often the real value exceeded each upper end, the bands
by counter and kind, and the figures of a baseline run beside today's.

Upper ends compared, per predicted row of the counter it reports:

* **bounded unknowns**: ``allocated_upper`` / ``reserved_upper`` / ``steady_state_device_total_upper``
  (allocator/upper_bound.py), what ``fits_with_margin`` compared before the band existed;
* **with the band, in sample**: the higher of that and the validated band's figure (validation/band.py) from every
  stored row, this one included: never exceeded by construction (the band is the maximum), shown as a check;
* **with the band, one source left out**: the same with the band computed from the rows of the other publications
  (folders of ``reports/published/``) only, the honest estimate of how the band does on a publication it has not
  seen.

A row "exceeds" an upper end when its measured value is more than ``EXCEED_SLACK`` above it.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from memgraph.validation.band import MIN_ROWS, BandRow, band, in_band, validated_figures

EXCEED_SLACK = 0.01  # 1%: the published figures carry 2-4 significant digits
COUNTER_WORDS = {"allocated": "max_memory_allocated", "reserved": "max_memory_reserved", "device_total": "device total"}
VALIDATED_KEY = {"allocated": "allocated_validated_upper", "reserved": "reserved_validated_upper",
                 "device_total": "steady_state_device_total_validated_upper"}


def band_rows(evaluations) -> list[BandRow]:
    return [BandRow(e.row.file, e.row.source, e.row.counter, e.kind, e.row.measured_bytes, e.predicted)
            for e in in_band(evaluations)]


def _validated(e, rows: list[BandRow]) -> int | None:
    if not e.figures:
        return None
    figures = dict(e.figures)
    device = {k: figures[k] for k in ("steady_state_reserved", "steady_state_device_total",
                                      "steady_state_device_total_upper", "reserved_upper")}
    if None in device.values():
        return None
    return validated_figures(e.kind, SimpleNamespace(**device), figures["allocated"], rows)[VALIDATED_KEY[e.row.counter]]


def margins(evaluations) -> list[dict]:
    """Per predicted row of the band (band.in_band): measured, predicted, the bounded-unknowns upper end and the two
    band upper ends."""
    rows = band_rows(evaluations)
    out = []
    for e in in_band(evaluations):
        others = [r for r in rows if _publication(r.file) != _publication(e.row.file)]
        out.append({"file": e.row.file, "counter": e.row.counter, "kind": e.kind, "measured": e.row.measured_bytes,
                    "predicted": e.predicted, "upper": e.upper or e.predicted, "in_sample": _validated(e, rows),
                    "left_out": _validated(e, others)})
    return out


def _publication(file: str) -> str:
    """The folder a row lies in: one publication (two source names may share it: a table and a tutorial line
    from the same runs, reports/published/README.md)."""
    return file.split("/")[0]


def _exceeds(measured: float, upper: int | None) -> bool:
    return upper is not None and measured > upper * (1 + EXCEED_SLACK)


def _share(items: list[bool]) -> str:
    return f"{sum(items)} of {len(items)} ({100 * sum(items) / len(items):.1f}%)" if items else "-"


def _stats(rows: list[dict], counter: str | None) -> list:
    rows = [r for r in rows if counter is None or r["counter"] == counter]
    if not rows:
        return []
    errors = [100 * (r["predicted"] - r["measured"]) / r["measured"] for r in rows]
    return [len(rows), f"{sum(map(abs, errors)) / len(errors):.1f}%", _share([e < -3 for e in errors])]


def render(evaluations, baseline: dict | None) -> list[str]:
    """The markdown lines of the band's sections (published.render_markdown adds them)."""
    from tabulate import tabulate

    from memgraph.validation.band import DEFINITION

    now = margins(evaluations)
    lines = ["## The upper ends and the validated band", "",
             f"Definition ({DEFINITION}). A reported uncertainty: no prediction is changed by it; `fits_with_margin` "
             "compares the higher of the bounded unknowns' upper end and the band's. A row exceeds an upper end when "
             f"the measured value is more than {100 * EXCEED_SLACK:.0f}% above it. 'One source left out': the band of "
             "each row computed without the rows of its own source (a publication the band has not seen).", ""]
    differs = [e for e in evaluations if e.predicted is not None and e.row.code_differs]
    if differs:
        lines += [f"{len(differs)} predicted rows ran code today's stack no longer runs, measured on the CPU "
                  "(`measured_code_differs`): they are in the table of predicted rows with their error, not in the "
                  "band or in the counts below.", ""]
    table = []
    for counter in (*COUNTER_WORDS, None):
        rows = [r for r in now if counter is None or r["counter"] == counter]
        if rows:
            table.append([COUNTER_WORDS.get(counter, "all counters"), len(rows),
                          _share([_exceeds(r["measured"], r["upper"]) for r in rows]),
                          _share([_exceeds(r["measured"], max(r["upper"], r["in_sample"] or 0)) for r in rows]),
                          _share([_exceeds(r["measured"], max(r["upper"], r["left_out"] or 0)) for r in rows])])
    lines += [tabulate(table, ["counter", "rows", "exceed the bounded unknowns' upper end",
                               "exceed it or the band (in sample)", "exceed it or the band (one source left out)"],
                       tablefmt="github"), ""]
    rows = band_rows(evaluations)
    bands = []
    for counter in COUNTER_WORDS:
        for kind in sorted({r.kind for r in rows if r.counter == counter}):
            b = band(rows, counter, kind)
            if b:
                bands.append([COUNTER_WORDS[counter], kind, b.scope, b.rows, f"{b.low_pct:+.1f}%", f"{b.high_pct:+.1f}%"])
    lines += [f"Bands (real / predicted - 1; a kind with fewer than {MIN_ROWS} rows takes the band of every kind):", "",
              tabulate(bands, ["counter", "kind", "rows it spans", "rows", "lowest", "highest"], tablefmt="github"), ""]
    if baseline:
        lines += _before_after(baseline, now)
    return lines


def _before_after(baseline: dict, now: list[dict]) -> list[str]:
    from tabulate import tabulate

    before = [dict(v, file=f) for f, v in sorted(baseline["rows"].items())]
    table = []
    for counter in (*COUNTER_WORDS, None):
        b, a = _stats(before, counter), _stats(now, counter)
        if b or a:
            rows_b = [r for r in before if counter is None or r["counter"] == counter]
            rows_a = [r for r in now if counter is None or r["counter"] == counter]
            table.append([COUNTER_WORDS.get(counter, "all counters"), *(b or ["-"] * 3), *(a or ["-"] * 3),
                          _share([_exceeds(r["measured"], r["upper"]) for r in rows_b]),
                          _share([_exceeds(r["measured"], max(r["upper"], r["left_out"] or 0)) for r in rows_a])])
    return [f"Before and after ({baseline['what']}):", "",
            tabulate(table, ["counter", "rows before", "MAE before", "under > 3% before", "rows now", "MAE now",
                             "under > 3% now", "exceed the upper end before", "exceed the margin now (source left out)"],
                     tablefmt="github"), ""]


def load_baseline(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None
