"""The report's content as titled sections, shared by the table, markdown and HTML renderers.

Each section is written here once; the renderers only lay it out. Besides its text a section says
what a layout needs to know about it (which columns are numbers, whether the last row is a total,
whether its lines are aligned with spaces), so no renderer has to work it out again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memgraph.analysis.device import DevicePeaks
from memgraph.analysis.group_by import at_depth, fold_repeated, tensor_groups
from memgraph.analysis.result import Peak, Result
from memgraph.model_spec.options import BNB_8BIT_OPTIMIZERS
from memgraph.units import human_bytes, share

PHASE_NOTE = "steady state (iteration >= 2) is what a long run needs; iteration 1 also creates the optimizer state"


@dataclass
class Section:
    title: str
    lines: list[str] = field(default_factory=list)  # prose lines before the table
    headers: list[str] = field(default_factory=list)
    rows: list[list] = field(default_factory=list)
    numeric: set[int] = field(default_factory=set)  # indices of the columns that hold numbers (right-aligned)
    total: bool = False  # the last row is the total of the rows above it
    preformatted: bool = False  # the lines are aligned with spaces: keep their whitespace, use a fixed-width font
    key: str = ""  # stable name of the section ("breakdown", "modules", ...), whatever its title says


def where(p: Peak) -> str:
    module = p.module or "(top level)"
    return f"iteration {p.iteration}, {p.phase}, module {module}, op {p.op or '-'}"


def _optimizer_impl(r: Result) -> str:
    """The optimizer's implementation as the header says it: bitsandbytes' 8-bit optimizers have one step of their
    own (bitsandbytes 0.50 ``Optimizer8bit.step``), whatever foreach/fused value the run carried."""
    return "bitsandbytes" if r.options["optimizer"] in BNB_8BIT_OPTIMIZERS else r.optimizer_impl


def summary(r: Result) -> Section:
    o = r.options
    lines = [
        f"model: {r.model}",
        f"target: {r.target} (predicts {r.metric})",
        f"batch: {', '.join(r.batch)}",
        f"precision {o['precision']}, optimizer {o['optimizer']} ({_optimizer_impl(r)}), "
        f"attention {o['attn_implementation']}, gradient checkpointing {_checkpointing(r)}, "
        f"{o['loop']} loop" + (f", stage {o['stage']}" if o["stage"] else ""),
        f"parameters: {r.parameters:,} ({r.trainable_parameters:,} trainable)" + _stored(r),
        *([f"assumed: {', '.join(r.assumptions)}"] if r.assumptions else []),
        *(f"config: {line}" for line in getattr(r, "job_config", [])),
        *(f"warning: {w}" for w in r.warnings),
        "",
        f"steady-state peak:   {human_bytes(r.steady_state_peak.bytes)} ({r.steady_state_peak.bytes:,} B) at "
        f"{where(r.steady_state_peak)}",
        f"first-iteration peak: {human_bytes(r.first_iteration_peak.bytes)} ({r.first_iteration_peak.bytes:,} B) at "
        f"{where(r.first_iteration_peak)}",
    ]
    if r.device:
        lines += device_lines(r)
    command = "memgraph run" if o["loop"] == "script" else "memgraph analyze"  # options' loop "script": memgraph run
    return Section(command, lines, preformatted=True, key="summary")


def _stored(r: Result) -> str:
    """With ``--quantize``: the bytes the parameters are stored in, beside their count (4-bit packs two per byte)."""
    quantize = r.options.get("quantize")
    if not quantize:
        return ""
    packed = " (bitsandbytes packs two 4-bit values per byte)" if quantize in ("4bit", "nf4") else ""
    return f", stored in {human_bytes(r.static['parameters'])}{packed}"


def _checkpointing(r: Result) -> str:
    """on / off as given, or on where a framework default turns it on (model_spec/framework_defaults.py)."""
    if r.options["gradient_checkpointing"]:
        return "on"
    assumed = any("gradient checkpointing on" in a for a in r.assumptions)
    return "on (assumed)" if assumed else "off"


def device_lines(r: Result) -> list[str]:
    """The three peaks of the cuda target, each with its counter and upper end; the context's assumption; the fit."""
    d = r.device
    conf = f", PYTORCH_CUDA_ALLOC_CONF={d.allocator_options}" if d.allocator_options else ""
    context = "estimated" if d.context_estimated else "given"
    lines = [
        "",
        f"On {d.gpu_name} ({human_bytes(d.capacity_bytes)}{conf}), steady state:",
        f"  allocated     {human_bytes(r.steady_state_peak.bytes):>12}  up to {human_bytes(d.allocated_upper):>12}  "
        "torch.cuda.max_memory_allocated",
        f"  reserved      {human_bytes(d.steady_state_reserved):>12}  up to {human_bytes(d.reserved_upper):>12}  "
        f"torch.cuda.max_memory_reserved ({d.segments} segments)",
        f"  device total  {human_bytes(d.steady_state_device_total):>12}  up to "
        f"{human_bytes(d.steady_state_device_total_upper):>12}  nvidia-smi (reserved + "
        f"{human_bytes(d.context_bytes)} CUDA context, {context})",
        interval_line(d, r.unknowns),
        *validated_lines(d),
        f"CUDA context: {d.context_assumption}"
        + ("; --context-bytes replaces it with a measured figure" if d.context_estimated else ""),
        *fit_lines(d),
    ]
    return lines


def interval_line(d: DevicePeaks, unknowns: list[dict]) -> str:
    """``device total X, up to Y: <unknown> +a, <unknown> +b``; the terms add up to Y - X."""
    total, upper = d.steady_state_device_total, d.steady_state_device_total_upper
    terms = [(u["name"], u["upper_bytes"] - u["expected_bytes"]) for u in unknowns]
    allocated_slack = sum(u["upper_bytes"] - u["expected_bytes"] for u in unknowns if u["counter"] == "allocated")
    block = d.unknowns_block_bytes
    terms.append(("their own allocator segment, rounded up", block - allocated_slack if block else 0))
    # near capacity the expected (capped) replay may have released cached segments that the upper one keeps
    terms.append(("cached segments the expected replay released near capacity",
                  d.reserved_upper - d.steady_state_reserved - block))
    terms = [(name, b) for name, b in terms if b]
    if not terms:
        return f"device total {human_bytes(total)}, no bounded unknowns: the upper end is the expected value"
    return (f"device total {human_bytes(total)}, up to {human_bytes(upper)}: "
            + ", ".join(f"{name} +{human_bytes(b)}" for name, b in terms))


def validated_lines(d: DevicePeaks) -> list[str]:
    """The validated error band (validation/band.py): what published measurements of this kind showed."""
    band = d.validated_band
    if not band:
        return []
    bands = [(c, b) for c, b in band["bands"].items() if b]
    if not bands:
        return [f"validated band: none yet for a {band['kind']} model; the margin is the bounded unknowns'"]
    figures = {"allocated": d.allocated_validated_upper, "reserved": d.reserved_validated_upper,
               "device total": d.steady_state_device_total_validated_upper}
    return [f"validated band ({band['kind']}): " + "; ".join(f"{c}: {b['sentence']}" for c, b in bands),
            "  so up to " + ", ".join(f"{c} {human_bytes(v)}" for c, v in figures.items() if v is not None)
            + " (a reported uncertainty, not applied to the prediction)"]


def _margin_upper(d: DevicePeaks) -> int:
    """The device-total upper end fits_with_margin compares: the higher of the bounded unknowns' and the band's."""
    return max(d.steady_state_device_total_upper, d.steady_state_device_total_validated_upper or 0)


FIT_HINT = ("what to change: `memgraph fit` with the same model and options finds the fewest changes that fit, "
            "each as a command to paste")


def fit_lines(d: DevicePeaks) -> list[str]:
    cap, total, upper = d.capacity_bytes, d.steady_state_device_total, _margin_upper(d)
    if d.fits_with_margin:
        return [f"fits: yes, with margin: {human_bytes(cap - total)} headroom, "
                f"{human_bytes(cap - upper)} at the upper end"]
    if d.fits:
        return [f"fits only if the unknowns stay near their expected values (upper end {human_bytes(upper)} > "
                f"{human_bytes(cap)}); {human_bytes(cap - total)} headroom expected", FIT_HINT]
    if d.oom_event is None:
        return [f"fits: NO, needs {human_bytes(total)} (up to {human_bytes(upper)}) of {human_bytes(cap)}", FIT_HINT]
    return [*oom_lines(d), FIT_HINT]


def need_line(d: DevicePeaks) -> str:
    """What the step needs without the card's limit: the higher of the two reserved peaks, plus the context."""
    cap, total, upper = d.capacity_bytes, d.steady_state_device_total, d.steady_state_device_total_upper
    how = "reserved + CUDA context, the caching allocator replayed as if the card had no limit"
    first = d.first_iteration_reserved + d.context_bytes
    if total >= first:
        return (f"needs {human_bytes(total)} (up to {human_bytes(upper)}) at the steady-state peak, "
                f"{human_bytes(total - cap)} more than the card has: {how}")
    return (f"needs {human_bytes(first)} in iteration 1, which also creates the optimizer state, "
            f"{human_bytes(first - cap)} more than the card has, and {human_bytes(total)} (up to {human_bytes(upper)}) "
            f"in the steady state: {how}")


PHASE_WORDS = {"forward": "the forward pass", "backward": "the backward pass", "optimizer": "the optimizer step",
               "zero_grad": "zero_grad"}


def oom_lines(d: DevicePeaks) -> list[str]:
    """Where the caching allocator, capped at the card, raises out-of-memory, and what the step needs without the cap."""
    cap = d.capacity_bytes
    if d.oom_phase == "setup":
        when = "before iteration 1, while the parameters and inputs are put on the card"
    else:
        when = f"in {PHASE_WORDS.get(d.oom_phase, d.oom_phase)} of iteration {d.oom_iteration}"
    op = d.oom_op.removesuffix(".default")
    where = ""
    if d.oom_phase != "setup" and d.oom_module:
        where = f", in {d.oom_module}" + (f" ({op})" if op else "")
    elif d.oom_phase != "setup" and op:
        where = f", in {op} outside any module"
    if d.allocator_budget_bytes <= 0:
        budget = (f"and the card's {human_bytes(cap)} hold no more than the {human_bytes(d.context_bytes)} CUDA "
                  "context alone: nothing can be reserved")
    else:
        budget = (f"of the {human_bytes(d.allocator_budget_bytes)} it may reserve ({human_bytes(cap)} less the "
                  f"{human_bytes(d.context_bytes)} CUDA context)")
    return [
        f"fits: NO: the caching allocator runs out {when}{where}: it asks for "
        f"{human_bytes(d.oom_request_bytes)} with {human_bytes(d.oom_allocated_bytes)} allocated and "
        f"{human_bytes(d.oom_reserved_bytes)} reserved, {budget}",
        need_line(d),
    ]


def breakdown(p: Peak) -> Section:
    rows = [[cat, human_bytes(b), f"{b:,}", share(b, p.bytes)] for cat, b in p.by_category.items() if b]
    rows.append(["total", human_bytes(p.bytes), f"{p.bytes:,}", share(p.bytes, p.bytes)])
    lines = []
    if p.held_past_last_use_bytes:
        lines.append(f"{human_bytes(p.held_past_last_use_bytes)} of it is held past its last use "
                     "(alive at the peak although no later op reads it).")
    return Section("Alive at the steady-state peak", lines, ["category", "size", "bytes", "share"], rows,
                   numeric={1, 2, 3}, total=True, key="breakdown")


def static(r: Result) -> Section:
    """What the steady state holds whatever the batch: the floor no batch-size change lowers."""
    peak = r.steady_state_peak.bytes
    rows = [[kind, human_bytes(b), f"{b:,}", share(b, peak)] for kind, b in r.static.items()]
    n = sum(r.static.values())
    rows.append(["total", human_bytes(n), f"{n:,}", share(n, peak)])
    lines = ["held for the whole steady state, whatever the batch: parameters, buffers, one iteration's "
             "gradients and the optimizer state (share of the steady-state peak)."]
    return Section("Static memory", lines, ["kind", "size", "bytes", "share of peak"], rows,
                   numeric={1, 2, 3}, total=True, key="static")


def phase_peaks(r: Result) -> Section | None:
    """Each phase's own peak: what the step peak becomes if another phase gets cheaper."""
    if not r.phase_peaks:
        return None
    cats = [c for c in r.phase_peaks[0].by_category if any(p.by_category.get(c) for p in r.phase_peaks)]
    rows = [[p.phase, human_bytes(p.bytes), *(human_bytes(p.by_category.get(c, 0)) for c in cats),
             p.module or "(top level)"] for p in r.phase_peaks]
    lines = [f"iteration {r.phase_peaks[0].iteration}: the highest point of each phase, what is alive there, "
             "and the module running."]
    return Section("Peak of each phase", lines, ["phase", "peak", *(SHORT.get(c, c) for c in cats), "module"], rows,
                   numeric=set(range(1, 2 + len(cats))), key="phase_peaks")


SHORT = {"parameters": "params", "gradients": "grads", "optimizer_state": "opt state",
         "autocast_cache": "cast cache", "activations": "saved act.", "temporaries": "temps", "workspaces": "workspace"}


def top_tensors(p: Peak) -> Section:
    """The largest groups of identical tensors alive at the peak (one tensor is a group of one); a Peak made
    without groups (by hand, or read from an older report) groups its ``top_tensors``."""
    groups = p.top_tensor_groups or tensor_groups(p.top_tensors, len(p.top_tensors))
    held = any(g.held_past_last_use_bytes for g in groups)
    rows = [[g.category, g.name + (f" x{g.count}" if g.count > 1 else ""), g.module or "-", f"{g.phase}/{g.iteration}",
             "x".join(map(str, g.shape)) or "scalar", g.dtype, human_bytes(g.bytes), human_bytes(g.total_bytes),
             *([human_bytes(g.held_past_last_use_bytes) if g.held_past_last_use_bytes else ""] if held else [])]
            for g in groups]
    lines = []
    if any(g.count > 1 for g in groups):
        lines.append("identical tensors are one row (x count, size each and total; * stands for a layer index), "
                     "largest total first.")
    if held:
        lines.append("past last use: the bytes of the row alive although no later op reads them.")
    headers = ["category", "name / op", "module", "made in", "shape", "dtype", "size", "total",
               *(["past last use"] if held else [])]
    return Section("Largest tensors at the steady-state peak", lines, headers, rows,
                   numeric={6, 7, 8} if held else {6, 7}, key="top_tensors")


def modules(r: Result, depth: int) -> Section:
    """Per-module rows summed to ``depth`` path parts, identical layers folded into one row, and their total."""
    runs = [run for run in fold_repeated(at_depth(r.modules, depth))
            if run.row.parameters or run.row.saved_activation_bytes or run.row.peak_bytes]
    rows = [[(m.module or "(top level)") + (f" x{run.count}" if run.count > 1 else ""), f"{m.parameters:,}",
             f"{m.trainable_parameters:,}", human_bytes(m.parameter_bytes), human_bytes(m.saved_activation_bytes),
             human_bytes(m.peak_bytes)] for run in runs for m in (run.row,)]
    total = [sum(getattr(m, k) for m in r.modules) for k in
             ("parameters", "trainable_parameters", "parameter_bytes", "saved_activation_bytes", "peak_bytes")]
    rows.append(["total", f"{total[0]:,}", f"{total[1]:,}", *map(human_bytes, total[2:])])
    lines = []
    if any(run.count > 1 for run in runs):
        lines.append("a row of N identical layers (x N) shows the figures of one of them; the total counts every layer.")
    return Section(f"Per module (depth {depth})", lines,
                   ["module", "params", "trainable", "param bytes", "saved activations", "at peak"], rows,
                   numeric={1, 2, 3, 4, 5}, total=True, key="modules")


def modalities(r: Result) -> Section | None:
    """Per-modality rows (they add up to the totals); None for single-modality models."""
    if len([m for m in r.modalities if m.modality != "shared" and m.parameters]) < 2:
        return None
    keys = ("parameter_bytes", "gradient_bytes", "optimizer_state_bytes", "saved_activation_bytes", "peak_bytes")
    rows = [[m.modality, f"{m.parameters:,}", f"{m.trainable_parameters:,}",
             *(human_bytes(getattr(m, k)) for k in keys)] for m in r.modalities]
    rows.append(["total", f"{sum(m.parameters for m in r.modalities):,}",
                 f"{sum(m.trainable_parameters for m in r.modalities):,}",
                 *(human_bytes(sum(getattr(m, k) for m in r.modalities)) for k in keys)])
    module = r.steady_state_peak.module or "(top level)"
    holder = max(r.modalities, key=lambda m: m.peak_bytes)
    share = holder.peak_bytes / max(r.steady_state_peak.bytes, 1)
    lines = [f"the steady-state peak happens while {module} runs ({r.peak_modality}); the {holder.modality} "
             f"holds most of it: {human_bytes(holder.peak_bytes)} ({share:.1%})."]
    return Section("Per modality", lines, ["modality", "params", "trainable", "param bytes", "gradients",
                                           "optimizer state", "saved activations", "at peak"], rows,
                   numeric=set(range(1, 8)), total=True, key="modalities")


def ranks(r: Result) -> Section | None:
    """A ``--strategy`` run's ranks: one line when all store the same shapes, else one row per group of equal
    ranks with the counters the target predicts, and what the group's static memory holds beyond rank 0's."""
    if not r.ranks:
        return None
    n = sum(len(g["ranks"]) for g in r.ranks)
    if len(r.ranks) == 1:
        return Section("Per rank", [f"ranks 0-{n - 1} identical: every rank stores the same shapes, so the figures "
                                    "above are each rank's."], key="ranks")
    cuda = r.ranks[0]["steady_state_reserved"] is not None
    base = r.ranks[0]
    rows = []
    for g in r.ranks:
        counters = [g["steady_state_peak"], *([g["steady_state_reserved"], g["steady_state_device_total"]] if cuda else [])]
        differs = ", ".join(f"{kind} {'+' if b - base['static'][kind] > 0 else '-'}"
                            f"{human_bytes(abs(b - base['static'][kind]))}"
                            for kind, b in g["static"].items() if b != base["static"][kind])
        rows.append([rank_ranges(g["ranks"]), *(human_bytes(b) for b in counters), f"{g['steady_state_peak']:,}",
                     human_bytes(g["first_iteration_peak"]),
                     differs or ("(rank 0's group)" if g is base else "-")])
    headers = ["ranks", "steady-state peak", *(["reserved", "device total"] if cuda else []), "steady-state bytes",
               "first-iteration peak",
               "static memory against rank 0"]
    lines = [f"the ranks store different shapes (shards of a dimension that does not divide by the ranks, or ZeRO "
             f"partitions): {len(r.ranks)} groups of identical ranks, each traced; the figures above are rank 0's."]
    return Section("Per rank", lines, headers, rows, numeric=set(range(1, len(headers) - 1)), key="ranks")


def rank_ranges(ranks: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2, 5"``."""
    parts, start = [], None
    for i, r in enumerate(ranks):
        if start is None:
            start = r
        if i + 1 == len(ranks) or ranks[i + 1] != r + 1:
            parts.append(str(start) if start == r else f"{start}-{r}")
            start = None
    return ", ".join(parts)


def ops(r: Result) -> Section:
    unknown = r.ops.get("unknown", {})
    lines = [f"{r.ops['count']:,} ATen ops recorded; trace {r.trace_seconds:.1f} s, analysis {r.analysis_seconds:.1f} s."]
    if unknown:
        lines.append(f"{len(unknown)} op kind{'s have' if len(unknown) > 1 else ' has'} no registry entry (their outputs are counted; no kernel workspace "
                     f"is assumed): " + ", ".join(f"{k} x{v}" for k, v in sorted(unknown.items(), key=lambda kv: -kv[1])))
    lines += r.notes
    return Section("Ops", lines, key="ops")


def build(r: Result, depth: int) -> list[Section]:
    p = r.steady_state_peak
    sections = [summary(r), ranks(r), breakdown(p), static(r), phase_peaks(r), top_tensors(p), modalities(r),
                modules(r, depth), ops(r)]
    return [s for s in sections if s is not None]
