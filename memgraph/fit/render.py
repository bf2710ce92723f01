"""``memgraph fit``'s answer as a table a user can act on, or as JSON for a scheduler."""

from __future__ import annotations

import json

from memgraph.fit.outcome import BOUND_HOW, FitReport, Outcome
from memgraph.units import human_bytes


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
        "suggestions": [{**p.outcome.as_dict(), "command": c} for p, c in zip(r.plans, r.commands)],
        "why": r.why, "seconds": round(r.seconds, 1),
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
    saving = [o for o in r.changes if o.how != "failed" and o.device_total < y.device_total]
    if saving:
        each = "a real prediction each" + ("; >=: a lower bound, not analysed (fit/bound.py)"
                                           if any(o.how == BOUND_HOW for o in saving) else "")
        lines += ["", f"== each change applied to your settings alone ({each}), smallest first ==",
                  _changes_table(y, saving + [o for o in r.changes if o.how == "failed"])]
    idle = [o for o in r.changes if o.how != "failed" and o.device_total >= y.device_total]
    if idle:
        lines.append("not offered, they save nothing on your settings: " + ", ".join(
            f"{o.label} ({'+' + human_bytes(o.device_total - y.device_total) if o.device_total > y.device_total else '0 B'})"
            for o in idle))
    if not y.fits_with_margin:
        lines += ["", "== what to change: the fewest changes that fit, cheapest first (each analysed together) =="]
        if not r.plans:
            lines.append("no set of up to four of the changes above fits with the margin: a larger GPU, more GPUs "
                         "(--nproc with --strategy) or a shorter sequence (--solve seq-len)")
        for i, (p, command) in enumerate(zip(r.plans, r.commands)):
            o = p.outcome
            lines += [f"{'best' if i == 0 else 'or'}: {o.label}: needs {human_bytes(o.device_total)} (up to "
                      f"{human_bytes(o.device_total_upper)}), {_verdict(o)}",
                      f"  costs: {'; '.join(q.cost for q in p.parts)}",
                      f"  {command}"]
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
        if o.how == BOUND_HOW:  # not analysed: the sharded bound (fit/bound.py) is above the card
            rows.append([o.label, f">= {human_bytes(o.device_total)}", "-", "no (bound)", "-", o.cost])
            continue
        rows.append([o.label, human_bytes(o.device_total), human_bytes(o.device_total_upper),
                     "yes" if o.fits_with_margin else ("expected only" if o.fits else "no"),
                     human_bytes(saves) if saves > 0 else ("+" + human_bytes(-saves) if saves < 0 else "0 B"),
                     o.cost])
    return tabulate(rows, ["change", "device total", "upper end", "fits", "saves", "costs"], disable_numparse=True)
