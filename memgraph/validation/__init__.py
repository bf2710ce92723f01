"""Validate predictions against stored ground-truth measurements.

Every ``*.json`` record that ``memgraph measure`` wrote under the ground-truth folder is
predicted again with the options it records, and the steady-state peaks are compared: per
configuration predicted, measured and error for allocated, reserved and device total (where
both sides have the number), then the mean absolute percentage error (MAPE), the worst error
and the share of under-predictions per metric.

``validate`` never runs code the user did not name (issue 16): a record whose model is a
``module:function`` callable would import that module, so it is skipped ("skipped: callable model;
rerun with --allow-callables MODULE") unless its module is among ``allow_callables``, the modules named
on the command line. Published GPU measurements are validated by :mod:`memgraph.validation.published`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path

from memgraph.errors import MemgraphError
from memgraph.model_spec.options import TrainingOptions
from memgraph.validation.records import MEASURED_KEY, read_record

METRICS = ("allocated", "reserved", "device_total")
# A record stores the options it was measured with; a field it lacks did not exist then, and ran the
# default of that time, not today's (--attn and --loop became 'auto' with issue 8 part 3).
LEGACY_OPTIONS = {"attn_implementation": "eager", "loop": "plain", "zero_grad": "set-to-none", "loss": "auto"}


@dataclass
class Row:
    config: str  # record path relative to the ground-truth folder
    model: str
    device: str
    summary: str  # batch, precision, optimizer ...
    predicted: dict[str, int | None] = field(default_factory=dict)
    measured: dict[str, int | None] = field(default_factory=dict)
    error: str | None = None  # prediction failed
    skipped: str | None = None  # not predicted, and why (a callable model not allowed)

    def error_pct(self, metric: str) -> float | None:
        p, m = self.predicted.get(metric), self.measured.get(metric)
        return None if p is None or not m else 100.0 * (p - m) / m


@dataclass
class MetricSummary:
    count: int
    mape: float
    worst: float  # signed error of the configuration with the largest absolute error
    under_share: float  # share of configurations predicted below the measurement


def load_records(root: Path) -> list[tuple[Path, dict]]:
    if not root.is_dir():
        raise MemgraphError(f"ground-truth folder {str(root)!r} does not exist: pass --groundtruth DIR")
    out = []
    for path in sorted(root.rglob("*.json")):
        data = read_record(path, root)  # checked: one line naming a file that is not a usable record
        if data is not None:
            out.append((path, data))
    return out


def measured_peaks(record: dict) -> dict[str, int | None]:
    """Steady-state (iteration >= 2) maxima of each metric in a measurement record."""
    steady = record["iterations"][1:] or record["iterations"]
    out = {}
    for metric in METRICS:
        values = [it.get(MEASURED_KEY[metric]) for it in steady]
        out[metric] = max(values) if values and None not in values else None
    return out


def predict_record(record: dict) -> dict[str, int | None]:
    from memgraph.api import analyze

    opts = {**LEGACY_OPTIONS, **record["options"]}
    for key in ("freeze", "train", "inputs"):
        value = opts.get(key)
        opts[key] = () if value is None else tuple(value) if isinstance(value, list) else value
    options = TrainingOptions(**{**opts, "target": record["device"]})
    r = analyze(record["model"], options)
    d = r.device
    return {"allocated": r.steady_state_peak.bytes, "reserved": d.steady_state_reserved if d else None,
            "device_total": d.steady_state_device_total if d else None}


def _summary(record_options: dict) -> str:
    o = {**{f.name: f.default for f in fields(TrainingOptions)}, **LEGACY_OPTIONS, **record_options}
    sizes = {"seq_len": "s{}", "images": "{} img", "image_size": "{}px", "audio_seconds": "{} s audio"}
    size = " ".join(fmt.format("x".join(map(str, v)) if isinstance(v, (list, tuple)) else v)
                    for k, fmt in sizes.items() if (v := o.get(k)))
    parts = [f"b{o['batch_size']}" + (f" {size}" if size else ""), o["precision"], o["optimizer"], o["attn_implementation"]]
    if o.get("stage"):
        parts.append(f"stage {o['stage']}")
    if o.get("gradient_checkpointing"):
        parts.append("ckpt")
    if o.get("train") or o.get("freeze"):
        parts.append("partial")
    return ", ".join(parts)


def validate(root: Path, allow_callables: tuple[str, ...] = ()) -> list[Row]:
    """Predict every record under ``root``; a callable model runs only if ``allow_callables`` names its module."""
    rows = []
    for path, record in load_records(root):
        row = Row(str(path.relative_to(root)), record["model"], record["device"], _summary(record["options"]),
                  measured=measured_peaks(record))
        row.skipped = skip_reason(record["model"], tuple(allow_callables))
        if row.skipped:
            rows.append(row)
            continue
        try:
            row.predicted = predict_record(record)
        except MemgraphError as e:
            row.error = str(e)
        rows.append(row)
    return rows


def callable_module(model: str) -> str | None:
    """The module a ``module:function`` (or ``path/file.py:function``) model would import; None otherwise.

    The same test as memgraph.model_spec.sources.resolve: an existing path is a config, never a callable."""
    if ":" not in model or model.endswith(".json") or Path(model).exists():
        return None
    return model.partition(":")[0]


def skip_reason(model: str, allow_callables: tuple[str, ...] = ()) -> str | None:
    """Why a record naming ``model`` is not predicted: a callable whose module the user did not name."""
    module = callable_module(model)
    if module is None or module in allow_callables:
        return None
    return f"skipped: callable model; rerun with --allow-callables {module}"


def summarize(rows: list[Row], metric: str) -> MetricSummary | None:
    errors = [e for e in (r.error_pct(metric) for r in rows if r.error is None and r.skipped is None)
              if e is not None]
    if not errors:
        return None
    worst = max(errors, key=abs)
    return MetricSummary(len(errors), sum(map(abs, errors)) / len(errors), worst,
                         sum(e < 0 for e in errors) / len(errors))


def render_markdown(rows: list[Row], root: Path) -> str:
    from tabulate import tabulate

    from memgraph.units import human_bytes

    lines = ["# Validation against measured ground truth", "",
             f"Records: {len(rows)} under `{root}`. Steady-state peaks (iteration 2 on); error = (predicted - measured) / measured.",
             ""]
    table = []
    for metric in METRICS:
        s = summarize(rows, metric)
        if s:
            table.append([metric, s.count, f"{s.mape:.2f}%", f"{s.worst:+.2f}%", f"{100 * s.under_share:.0f}%"])
    lines += [tabulate(table, ["metric", "configs", "MAPE", "worst", "under-predicted"], tablefmt="github"), ""]
    detail = []
    for r in rows:
        cells = [r.config, r.device, r.summary]
        for metric in METRICS:
            p, m, e = r.predicted.get(metric), r.measured.get(metric), r.error_pct(metric)
            cells.append("-" if m is None else f"{human_bytes(p) if p is not None else '?'} / {human_bytes(m)}"
                         + (f" ({e:+.2f}%)" if e is not None else ""))
        if r.error or r.skipped:
            cells.append(r.error or r.skipped)
        detail.append(cells)
    headers = ["config", "device", "setup", "allocated pred / meas", "reserved pred / meas", "device total pred / meas"]
    if any(r.error or r.skipped for r in rows):
        headers.append("error")
    lines += [tabulate(detail, headers, tablefmt="github"), ""]
    return "\n".join(lines)
