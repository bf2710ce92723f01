"""Published GPU memory measurements as a regression set (``memgraph validate --published``).

Each ``*.json`` file under the folder (default ``reports/published/``) is one published measurement:
where it comes from (URL and the verbatim quote the number is read from), which counter it reports
(``allocated`` = ``torch.cuda.max_memory_allocated``, ``reserved`` = ``torch.cuda.max_memory_reserved``,
``device_total`` = the process's or device's used memory as nvidia-smi / NVML show it), the number and
its unit exactly as published, the GPU and versions, and the configuration written as memgraph
command-line options. A row is

- **evaluable**: its options parse; it is predicted for the counter it reports and compared;
- **pending**: it needs an option this memgraph does not have yet ("needs --lora-rank"), or a value
  of an option it does not accept yet ("needs --precision fp16"); it is evaluated once that lands;
- **out of scope**: the measured run did something memgraph does not model (its ``out_of_scope``
  field says what), so no prediction is compared.

A row may also carry ``measured_code_differs``: the measured run executed code that today's stack no longer runs,
and a CPU measurement of the old and today's code shows the old code keeping more memory in the way the row's
miss grows (per token, per layer); the mechanism says how much of the miss that explains and what is left. The object names
``mechanism``, ``versions`` (the old code's) and ``record`` (the committed measurement, e.g.
``reports/published/old-code-probe.json``). The row is still predicted and shown with its error, but it is left out
of the validated band's rows (validation/band.py): the band is a margin for today's stack.

A row may also carry ``needs``: what it needs that its options parse but this memgraph does not do yet
(``--loss sum`` is taken for ``module:function`` models only, and a benchmark ran ``logits.sum()`` on a
transformers model); it is pending with that reason until the field is removed.

No factor is fitted to any row and no published number is edited: the bytes compared are the published
value times its unit (``MB`` = 10**6 bytes, ``MiB`` = 2**20, ``GB`` = 10**9, ``GiB`` = 2**30; a row whose
source prints ``x // 1024**2`` as "MB" records the unit ``MiB`` and says so in ``unit_reason``).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, fields
from pathlib import Path

from memgraph.errors import MemgraphError
from memgraph.validation import band_report
from memgraph.model_spec.options import TrainingOptions, flag_of

KIND = "memgraph.published"
COUNTERS = ("allocated", "reserved", "device_total")
COUNTER_NAMES = {"allocated": "torch.cuda.max_memory_allocated", "reserved": "torch.cuda.max_memory_reserved",
                 "device_total": "nvidia-smi / NVML used memory"}
UNITS = {"B": 1, "MB": 10**6, "MiB": 2**20, "GB": 10**9, "GiB": 2**30}
BASELINE = "published-baseline.json"  # beside the folder: an earlier run's rows, the "before" of the report
UNDER_THRESHOLD = -3.0  # percent: a row predicted more than 3% below its measurement counts as under-predicted
# Fields every row must have (dotted: nested objects).
REQUIRED = ("kind", "source.name", "source.url", "source.quote", "counter", "counter_reason", "measured.value",
            "measured.unit", "gpu", "model", "options")


@dataclass(frozen=True)
class PublishedRow:
    """One published measurement, as read from its file."""

    file: str  # path relative to the folder
    source: str  # short name of the source
    url: str
    quote: str
    counter: str
    measured_bytes: float  # published value times its unit, unrounded
    measured_text: str  # "14949 MiB", as published
    gpu: str
    model: str
    options: tuple[str, ...]  # memgraph command-line options
    out_of_scope: str | None  # why no prediction is compared
    needs: str | None = None  # what this memgraph lacks although the options parse
    code_differs: str | None = None  # measured_code_differs: why the row stays out of the validated band


@dataclass
class Evaluation:
    row: PublishedRow
    status: str  # "evaluable", "pending", "out of scope", "error"
    reason: str | None = None  # pending / out of scope / error: why
    predicted: int | None = None
    upper: int | None = None  # the upper end of the same counter (bounded unknowns: allocator/upper_bound.py)
    kind: str | None = None  # the model's kind (model_spec/kinds.py)
    figures: dict | None = None  # every counter's prediction and upper ends (predict_with_upper)

    @property
    def validated_upper(self) -> int | None:
        """The validated band's upper figure of the row's counter (validation/band.py), as analyze reported it."""
        return (self.figures or {}).get(VALIDATED_KEY[self.row.counter])

    @property
    def error_pct(self) -> float | None:
        if self.predicted is None:
            return None
        return 100.0 * (self.predicted - self.row.measured_bytes) / self.row.measured_bytes


@dataclass(frozen=True)
class CounterSummary:
    count: int
    mae: float  # mean absolute error, percent
    under_share: float  # share of rows predicted more than 3% below the measurement
    worst: float  # signed error of the row with the largest absolute error


# -- loading -----------------------------------------------------------------------------------------

def _field(data: dict, dotted: str):
    value = data
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return _MISSING
        value = value[part]
    return value


_MISSING = object()


def load_row(path: Path, root: Path) -> PublishedRow:
    """One row; a file that is not valid JSON or lacks a field raises a one-line MemgraphError naming both."""
    name = str(path.relative_to(root))
    try:
        data = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as e:  # json.JSONDecodeError is a ValueError
        raise MemgraphError(f"{name}: not valid JSON ({str(e)[:120]})") from None
    except RecursionError:
        raise MemgraphError(f"{name}: nested too deeply to be a published row") from None
    if not isinstance(data, dict):
        raise MemgraphError(f"{name}: not a JSON object")
    for key in REQUIRED:
        if _field(data, key) is _MISSING:
            raise MemgraphError(f"{name}: missing field '{key}'")
    for key in ("kind", "counter", "measured.unit", "gpu", "model", "source.name"):
        if not isinstance(_field(data, key), str):
            raise MemgraphError(f"{name}: field '{key}' is {_field(data, key)!r:.40}, not a string")
    if data["kind"] != KIND:
        raise MemgraphError(f"{name}: field 'kind' is {data['kind']!r}, not {KIND!r}")
    if data["counter"] not in COUNTERS:
        raise MemgraphError(f"{name}: field 'counter' is {data['counter']!r}; use one of {', '.join(COUNTERS)}")
    value, unit = data["measured"]["value"], data["measured"]["unit"]
    if unit not in UNITS:
        raise MemgraphError(f"{name}: field 'measured.unit' is {unit!r}; use one of {', '.join(UNITS)}")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise MemgraphError(f"{name}: field 'measured.value' is {value!r}, not a positive number")
    options = data["options"]
    if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
        raise MemgraphError(f"{name}: field 'options' must be a list of strings (command-line options)")
    return PublishedRow(name, data["source"]["name"], data["source"]["url"], data["source"]["quote"],
                        data["counter"], value * UNITS[unit], f"{value} {unit}", data["gpu"], data["model"],
                        tuple(options), data.get("out_of_scope"), data.get("needs"), _code_differs(name, data))


CODE_DIFFERS = "measured_code_differs"
CODE_DIFFERS_KEYS = ("mechanism", "versions", "record")


def _code_differs(name: str, data: dict) -> str | None:
    """The row's ``measured_code_differs`` as one line (mechanism; versions; record), None without the field."""
    value = data.get(CODE_DIFFERS)
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(value.get(k), str) and value[k] for k in CODE_DIFFERS_KEYS):
        raise MemgraphError(f"{name}: field '{CODE_DIFFERS}' must be an object with the strings "
                            f"{', '.join(CODE_DIFFERS_KEYS)}")
    return "; ".join(value[k] for k in CODE_DIFFERS_KEYS)


def load_rows(root: Path) -> list[PublishedRow]:
    if not root.is_dir():
        raise MemgraphError(f"published folder {str(root)!r} does not exist: pass --published DIR")
    return [load_row(p, root) for p in sorted(root.rglob("*.json"))]


# -- options: the row's command-line options -> TrainingOptions, or what this memgraph still lacks -----

class Pending(Exception):
    """The options need something this memgraph does not have yet; the message says what."""


def parse_options(argv: tuple[str, ...]) -> TrainingOptions:
    """``analyze``'s options from the TrainingOptions fields (as memgraph/cli.py builds them).

    An unknown flag raises :class:`Pending` ("needs --lora-rank"), and so does a value outside a flag's
    choices ("needs --precision fp16"). A default taken from the environment on the command line
    (``--allocator-conf``: $PYTORCH_CUDA_ALLOC_CONF) is the field default here, so a row means the same
    on every machine."""
    by_flag = {}
    for f in fields(TrainingOptions):
        flag = flag_of(f)
        for name in (flag.name, flag.short):
            if name:
                by_flag[name] = f
    given: dict[str, object] = {}
    i = 0
    while i < len(argv):
        token = argv[i]
        f = by_flag.get(token)
        if f is None:
            raise Pending(f"needs {token}")
        if isinstance(f.default, bool):
            given[f.name] = True
            i += 1
            continue
        if i + 1 >= len(argv):
            raise MemgraphError(f"option {token} has no value")
        text, flag = argv[i + 1], flag_of(f)
        if flag.choices is not None and text not in flag.choices:
            raise Pending(f"needs {token} {text}")
        try:
            value = flag.parse(text) if flag.parse else text
        except argparse.ArgumentTypeError as e:
            raise MemgraphError(f"option {token}: {e}") from None
        if flag.repeatable:
            given[f.name] = (*given.get(f.name, ()), value)
        else:
            given[f.name] = value
        i += 2
    return TrainingOptions(**given)


# -- predicting ----------------------------------------------------------------------------------------

def predict(model: str, options: TrainingOptions, counter: str) -> int:
    """memgraph's steady-state prediction of ``counter``: what ``memgraph analyze`` reports for it."""
    return predict_with_upper(model, options, counter)[0]


UPPER_KEY = {"allocated": "allocated_upper", "reserved": "reserved_upper",
             "device_total": "steady_state_device_total_upper"}
VALIDATED_KEY = {"allocated": "allocated_validated_upper", "reserved": "reserved_validated_upper",
                 "device_total": "steady_state_device_total_validated_upper"}


FIGURES = ("steady_state_reserved", "steady_state_device_total", "allocated_upper", "reserved_upper",
           "steady_state_device_total_upper", "allocated_validated_upper", "reserved_validated_upper",
           "steady_state_device_total_validated_upper")


def predict_with_upper(model: str, options: TrainingOptions, counter: str) -> tuple[int, int, str, dict]:
    """The prediction of ``counter``, its upper end (the bounded unknowns'), the model's kind (model_spec/kinds.py)
    and the analysis' figures of every counter (``allocated`` and FIGURES; the validated band's need them all)."""
    from memgraph.api import analyze

    result = analyze(model, options)
    device = result.device
    if counter == "allocated":
        value = result.steady_state_peak.bytes
    else:
        key = {"reserved": "steady_state_reserved", "device_total": "steady_state_device_total"}[counter]
        if device is None:
            raise MemgraphError(f"no {counter} prediction for {model}: the cuda target is needed")
        value = getattr(device, key)
    kind = ((device.validated_band if device else None) or {}).get("kind", "other")
    figures = {"allocated": result.steady_state_peak.bytes, **{k: getattr(device, k, None) for k in FIGURES}}
    upper = getattr(device, UPPER_KEY[counter], None) if device else None
    return value, value if upper is None else upper, kind, figures


def evaluate(row: PublishedRow) -> Evaluation:
    if row.out_of_scope:
        return Evaluation(row, "out of scope", row.out_of_scope)
    if row.needs:
        return Evaluation(row, "pending", f"needs {row.needs}")
    try:
        options = parse_options(row.options)
    except Pending as e:
        return Evaluation(row, "pending", str(e))
    except MemgraphError as e:
        return Evaluation(row, "error", f"{row.file}: {e}")
    try:
        predicted, upper, kind, figures = predict_with_upper(row.model, options, row.counter)
        return Evaluation(row, "evaluable", predicted=predicted, upper=upper, kind=kind, figures=figures)
    except MemgraphError as e:
        return Evaluation(row, "error", str(e))


def validate_published(root: Path) -> list[Evaluation]:
    return [evaluate(row) for row in load_rows(root)]


# -- statistics -------------------------------------------------------------------------------------------

def summarize(evaluations: list[Evaluation], counter: str | None = None) -> CounterSummary | None:
    """MAE and share under-predicted by more than 3% over the predicted rows (of one counter, or all)."""
    errors = [e.error_pct for e in evaluations
              if e.error_pct is not None and (counter is None or e.row.counter == counter)]
    if not errors:
        return None
    return CounterSummary(len(errors), sum(map(abs, errors)) / len(errors),
                          sum(err < UNDER_THRESHOLD for err in errors) / len(errors), max(errors, key=abs))


# -- report -------------------------------------------------------------------------------------------------

def render_markdown(evaluations: list[Evaluation], root: Path) -> str:
    from tabulate import tabulate

    from memgraph.units import human_bytes

    by_status = {s: [e for e in evaluations if e.status == s]
                 for s in ("evaluable", "pending", "out of scope", "error")}
    sources = {e.row.source for e in evaluations}
    lines = ["# Validation against published GPU measurements", "",
             f"Rows: {len(evaluations)} from {len(sources)} sources under `{root}`: "
             f"{len(by_status['evaluable'])} predicted, {len(by_status['pending'])} pending (need an option "
             f"this memgraph lacks), {len(by_status['out of scope'])} out of scope, {len(by_status['error'])} "
             "failed. Each row is predicted for the counter it reports (steady state, iteration 2 on); "
             "error = (predicted - measured) / measured. Nothing is fitted to these rows.", ""]
    table = []
    for counter in (*COUNTERS, None):
        s = summarize(evaluations, counter)
        if s:
            table.append([COUNTER_NAMES.get(counter, "all counters"), s.count, f"{s.mae:.1f}%",
                          f"{100 * s.under_share:.0f}%", f"{s.worst:+.1f}%"])
    lines += [tabulate(table, ["counter", "rows", "mean absolute error", "under-predicted by > 3%", "worst"],
                       tablefmt="github"), ""]
    if by_status["evaluable"]:
        lines += band_report.render(evaluations, band_report.load_baseline(root.parent / BASELINE))
    if by_status["evaluable"]:
        rows = [[f"[{e.row.source}]({e.row.url})", e.row.model, " ".join(e.row.options), e.row.gpu, e.row.counter,
                 f"{e.row.measured_text} ({human_bytes(int(e.row.measured_bytes))})", human_bytes(e.predicted),
                 f"{e.error_pct:+.1f}%" + (" (measured code differs: not in the band)" if e.row.code_differs else "")]
                for e in by_status["evaluable"]]
        lines += ["## Predicted rows", "", tabulate(rows, ["source", "model", "options", "GPU", "counter", "measured",
                                                          "predicted", "error"], tablefmt="github"), ""]
    for status, title in (("pending", "Pending rows"), ("out of scope", "Out of scope"), ("error", "Failed")):
        if by_status[status]:
            rows = [[e.row.file, f"[{e.row.source}]({e.row.url})", e.row.model, " ".join(e.row.options),
                     e.row.measured_text, _cell(e.reason)] for e in by_status[status]]
            lines += [f"## {title}", "", tabulate(rows, ["file", "source", "model", "options", "measured", "reason"],
                                                  tablefmt="github"), ""]
    return "\n".join(lines)


def _cell(text: str | None) -> str:
    return (text or "").replace("|", "\\|").replace("\n", " ")


# -- the recorded errors tests/test_published.py holds the predictions to -----------------------------------

def error_record(evaluations: list[Evaluation]) -> dict[str, float]:
    """Each predicted row's signed error in percent (one decimal), by file: what the regression test compares
    a new prediction with. Regenerate after an intended change (and say why in the commit):
    ``python -c "from memgraph.validation.published import *; write_error_record()"``."""
    return {e.row.file: round(e.error_pct, 1) for e in evaluations if e.error_pct is not None}


def write_error_record(root: Path = Path("reports/published"),
                       path: Path = Path("tests/published_errors.json")) -> list[Evaluation]:
    """The error record and the validated band's rows (validation/band_data.py), from one run over ``root``."""
    from memgraph.validation.band import write_band_data

    evaluations = validate_published(root)
    path.write_text(json.dumps(error_record(evaluations), indent=1, sort_keys=True) + "\n")
    write_band_data(evaluations)
    return evaluations
