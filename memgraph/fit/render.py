"""``memgraph fit``'s answer as a table a user can act on, or as JSON for a scheduler."""

from __future__ import annotations

import json
from dataclasses import fields

from memgraph.fit.outcome import FitReport, Outcome
from memgraph.model_spec.options import TrainingOptions, flag_of
from memgraph.units import human_bytes


def changed_flags(base: TrainingOptions, changed: TrainingOptions) -> str:
    """The command-line flags that turn ``base`` into ``changed``, e.g. ``--gradient-checkpointing --precision bf16``."""
    out = []
    for f in fields(TrainingOptions):
        old, new = getattr(base, f.name), getattr(changed, f.name)
        if old == new:
            continue
        flag = flag_of(f).name
        out.append(flag if new is True else f"{flag} {new}")
    return " ".join(out)


def _verdict(o: Outcome) -> str:
    if o.fits_with_margin:
        return "fits"
    if o.fits:
        return f"fits only at the expected value (upper end {human_bytes(o.device_total_upper)})"
    return "does NOT fit"


def render_fit(r: FitReport, fmt: str = "table") -> str:
    config = getattr(r, "job_config", [])  # --config FILE: the values taken from it (memgraph/job_config/)
    if fmt == "json":
        text = _json(r)
        return text if not config else json.dumps({**json.loads(text), "config": config}, indent=2) + "\n"
    return "".join(f"config: {line}\n" for line in config) + _table(r)


def _json(r: FitReport) -> str:
    return json.dumps({
        "model": r.model, "gpu": r.gpu, "capacity_bytes": r.capacity,
        "fits": r.yours.fits, "fits_with_margin": r.yours.fits_with_margin,
        "required_bytes": r.yours.device_total, "required_bytes_upper": r.yours.device_total_upper,
        "options": r.yours.options.to_dict(), "solve": r.solve, "largest": r.largest,
        "largest_source": r.largest_source, "confirmations": [o.as_dict() for o in r.confirmations],
        "changes": [o.as_dict() for o in r.changes],
        "best": None if r.best is None else {**r.best.as_dict(), "flags": changed_flags(r.yours.options, r.best.options)},
        "best_steps": r.best_steps, "why": r.why, "seconds": round(r.seconds, 1),
        "analyses": [{"setting": s, "how": how, "seconds": round(sec, 2)} for s, how, sec in r.timings],
    }, indent=2) + "\n"


def _table(r: FitReport) -> str:
    y = r.yours
    noun = "batch size" if r.solve == "batch-size" else "sequence length"
    lines = ["== memgraph fit ==", f"model: {r.model} on {r.gpu} ({human_bytes(r.capacity)})",
             f"your settings: needs {human_bytes(y.device_total)} (up to {human_bytes(y.device_total_upper)}): "
             f"{_verdict(y)}", "", "why the step needs what it needs:"]
    lines += [f"  {w}" for w in r.why]
    lines += ["", f"largest {noun} that fits with the margin: "
              + (str(r.largest) if r.largest else "none, not even 1") + f" ({r.largest_source})"]
    for o in r.confirmations:
        lines.append(f"  {o.label}: needs {human_bytes(o.device_total)} (up to {human_bytes(o.device_total_upper)}): "
                     f"{_verdict(o)}")
    if r.changes:
        lines += ["", "== each change applied to your settings (a real prediction each), smallest first ==",
                  _changes_table(y, r.changes)]
    if r.best is not None:
        lines += ["", "== best combination found (cheapest kind of change first, each step re-analysed) =="]
        lines += [f"  {s}" for s in r.best_steps]
        lines += [f"{r.best.label}: needs {human_bytes(r.best.device_total)} (up to "
                  f"{human_bytes(r.best.device_total_upper)}): {_verdict(r.best)}",
                  f"  memgraph analyze {r.model} ... {changed_flags(y.options, r.best.options)}"]
    traced = sum(1 for _, how, _ in r.timings if how == "traced")
    lines += ["", f"({r.seconds:.1f} s: {len(r.timings)} analyses, {traced} of them traced)"]
    return "\n".join(lines) + "\n"


def _changes_table(y: Outcome, changes: list[Outcome]) -> str:
    from tabulate import tabulate

    rows = []
    for o in changes:
        if o.how == "failed":
            rows.append([o.label, "-", "-", "-", "-", o.cost])
            continue
        saves = y.device_total - o.device_total
        rows.append([o.label, human_bytes(o.device_total), human_bytes(o.device_total_upper),
                     "yes" if o.fits_with_margin else ("expected only" if o.fits else "no"),
                     human_bytes(saves) if saves > 0 else ("+" + human_bytes(-saves) if saves < 0 else "0 B"),
                     o.cost])
    return tabulate(rows, ["change", "device total", "upper end", "fits", "saves", "costs"], disable_numparse=True)
