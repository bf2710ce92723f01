"""What to change so the step fits: the smallest sets of changes that fit, cheapest first, each re-analysed.

A plan is a set of the single changes ``fit`` tried (fit/candidates.py), applied together and analysed for
real. Plans are ranked as a user weighs them: **fewest changes first**, then the least price, where a change's
price is its tier (nothing < compute < precision < fine-tuning method < more GPUs) and, within a tier, its
place in :data:`~memgraph.fit.candidates.CANDIDATES` (cheapest first). The search goes by number of changes;
at each size it analyses the sets whose *estimate* fits, cheapest first, then those whose estimate is within
:data:`ESTIMATE_SLACK` of the card, the estimate being your device total less what each change saved alone.
A set whose expected total fits but whose upper end does not (segments cached near the capacity) is also
analysed with expandable segments added, which lowers the upper end only: a replay of the set's trace, and a
plan of one more change (Qwen2-VL at 1344 px on 40 GB: QLoRA + activation offloading + expandable segments).
Estimates only choose what to analyse: every plan shown is a real analysis, and fits with the margin. A set
that contains a plan already found is not a plan (one of its changes would do nothing), and neither is a set
with a change that made your step larger on its own. A change a bound ruled out alone (fit/candidates.py: not
analysed) stands in the estimates by its bound; where a set chosen for analysis holds one, that change is analysed
alone first and the sets are chosen again with its figure.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

from memgraph.errors import MemgraphError
from memgraph.fit.analyses import REPLAY_ONLY, Analyses, trace_key
from memgraph.fit.bound import SHARDING, cannot_fit, params_and_grads, params_grads_state, sharded_bound, sharded_parts
from memgraph.fit.candidates import CANDIDATES, HARDWARE
from memgraph.fit.outcome import BOUND_HOW, Outcome
from memgraph.fit.progress import FitProgress

WANT = 3  # the best plan and two alternatives
MAX_CHANGES = 4  # no plan stacks more changes than this
ANALYSES_PER_SIZE = 6  # sets analysed per size at most (traced in parallel): bounds fit's time
# A set is analysed when its estimate is at most this many times the capacity: changes can save more together
# than alone (gradient checkpointing saves little while the optimizer state makes the peak, much once LoRA has
# removed that state), so the estimate may be pessimistic; beyond 1.5x no pair seen in the fit tests fitted.
ESTIMATE_SLACK = 1.5


@dataclass(frozen=True)
class Plan:
    """A set of changes analysed together: its outcome and the single-change outcomes it combines."""

    outcome: Outcome
    parts: tuple[Outcome, ...]

    @property
    def labels(self) -> list[str]:
        return [p.label for p in self.parts]


def _price(o: Outcome) -> tuple[int, int]:
    for i, c in enumerate(CANDIDATES):
        if c.name == o.label:
            return c.tier, i
    return HARDWARE, len(CANDIDATES)  # FSDP over N GPUs (fit/candidates.py fsdp)


def _rank(parts: tuple[Outcome, ...]) -> tuple:
    prices = sorted((_price(p) for p in parts), reverse=True)
    return len(parts), [tier for tier, _ in prices], prices


def _conflict(parts: tuple[Outcome, ...]) -> bool:
    """Two changes that set one option (LoRA and QLoRA; pure bf16 and bf16 autocast)."""
    keys = [k for p in parts for k, _ in p.changes]
    return len(keys) != len(set(keys))


def find_plans(analyses: Analyses, yours: Outcome, singles: list[Outcome], progress: FitProgress) -> list[Plan]:
    """Up to :data:`WANT` plans that fit with the margin, best first (see the module docstring)."""
    usable = [o for o in singles if o.how != "failed" and o.device_total < yours.device_total]
    replay_only = [o for o in usable if all(k in REPLAY_ONLY for k, _ in o.changes)]
    traces = getattr(analyses, "traces", {})
    mine = traces.get(trace_key(yours.options))
    parts = sharded_parts(mine) if mine is not None else None  # a sharded change with an allocator change
    # the bounds of fit/bound.py off your trace and off each single change's, for the other changes of a set
    bases = [(o.options, traces[trace_key(o.options)]) for o in [yours] + usable if trace_key(o.options) in traces]
    bounds = [(opts, params_and_grads(t), params_grads_state(t)) for opts, t in bases]

    def ruled_out(s: tuple) -> bool:
        changed = _options(yours, s)
        return (any(cannot_fit(pg, base, changed, yours.capacity, pgs) for base, pg, pgs in bounds)
                or (sharded_bound(parts, yours.options, changed) or 0) > yours.capacity)

    plans: list[Plan] = []
    for size in range(1, MAX_CHANGES + 1):
        if len(plans) >= WANT:
            break
        todo = _sets_to_analyse(yours, usable, size, plans)
        # not analysed: sets that cannot fit by the bound (fit/bound.py), which could be no plan (the same plans)
        todo = [s for s in todo if size == 1 or not ruled_out(s)]
        while size > 1 and _analyse_alone(analyses, yours, usable, todo):  # the choice again, with their figures
            todo = [s for s in _sets_to_analyse(yours, usable, size, plans) if not ruled_out(s)]
        jobs = [(_options(yours, s), _label(s), _cost(s), _changes(s)) for s in todo if size > 1]
        if jobs:
            progress.stage(f"{len(jobs)} sets of {size} changes, analysed in parallel")
            analyses.prefetch(jobs)
        for s in todo:
            o = s[0] if size == 1 else _analyse(analyses, yours, s, progress)
            if o is None:
                continue
            if o.fits_with_margin:
                plans.append(Plan(o, s))
            elif o.device_total <= o.capacity and size < MAX_CHANGES:
                plans += _with_allocator_change(analyses, yours, s, replay_only, usable, plans, progress)
        plans.sort(key=lambda p: _rank(p.parts))
    return plans[:WANT]


def _with_allocator_change(analyses: Analyses, yours: Outcome, s: tuple, replay_only: list[Outcome],
                           usable: list[Outcome], plans: list[Plan], progress: FitProgress) -> list[Plan]:
    """``s`` fits by its expected total but not by its upper end (segments cached near the capacity): the
    same set with an allocator change (expandable segments, which lowers the upper end only), replayed on
    ``s``'s trace (fit/analyses.py REPLAY_ONLY: no trace of its own), as a set of one more change."""
    out = []
    for r in replay_only:
        s2 = tuple(sorted(s + (r,), key=usable.index))
        labels = {x.label for x in s2}
        if r.label in {x.label for x in s} or _conflict(s2) or any(set(p.labels) <= labels for p in plans + out):
            continue
        o = _analyse(analyses, yours, s2, progress)
        if o is not None and o.fits_with_margin:
            out.append(Plan(o, s2))
    return out


def _analyse_alone(analyses: Analyses, yours: Outcome, usable: list[Outcome], todo: list[tuple]) -> bool:
    """Analyse each change of the sets ``todo`` that a bound ruled out alone (fit/candidates.py: not analysed, its
    bound standing for its device total in the estimates), and put its analysis in its place in ``usable``, or take
    it out where it does not save alone (as an analysed change that saves nothing is); whether there was one."""
    alone = {p.options: p for s in todo for p in s  # the sharded bound's changes stand by their bound, as before
             if p.how == BOUND_HOW and not any(k in SHARDING for k, _ in p.changes)}
    if not alone:
        return False
    analyses.prefetch([(p.options, p.label, p.cost, p.changes) for p in alone.values()])
    for opts, p in alone.items():
        try:
            o = analyses.outcome(opts, p.label, p.cost, p.changes)
        except MemgraphError:  # this model cannot take the change
            o = None
        if o is not None and o.device_total < yours.device_total:
            usable[usable.index(p)] = o
        else:
            usable.remove(p)
    return True


def _sets_to_analyse(yours: Outcome, usable: list[Outcome], size: int, plans: list[Plan]) -> list[tuple]:
    found = [set(p.labels) for p in plans]
    sets = []
    for s in itertools.combinations(usable, size):
        if _conflict(s) or any(f <= {p.label for p in s} for f in found) or not _valid(yours, s):
            continue
        estimate = yours.device_total - sum(yours.device_total - p.device_total for p in s)
        if estimate <= yours.capacity * ESTIMATE_SLACK:
            sets.append((_rank(s), estimate, s))
    # the sets whose estimate fits first, cheapest first; then those that need the changes to save more together
    sets.sort(key=lambda t: (t[1] > yours.capacity, t[0], t[1]))
    limit = len(sets) if size == 1 else ANALYSES_PER_SIZE  # single changes are analysed already
    return [s for _, _, s in sets[:limit]]


def _valid(yours: Outcome, parts: tuple[Outcome, ...]) -> bool:
    """Whether the changes go together at all (FSDP mixed precision and pure bf16 do not: options.py says why)."""
    try:
        _options(yours, parts)
    except MemgraphError:
        return False
    return True


def _options(yours: Outcome, parts: tuple[Outcome, ...]):
    return replace(yours.options, **dict(_changes(parts)))


def _changes(parts: tuple[Outcome, ...]) -> tuple:
    return tuple(kv for p in parts for kv in p.changes)


def _cost(parts: tuple[Outcome, ...]) -> str:
    return "; ".join(p.cost for p in parts)


def _label(parts: tuple[Outcome, ...]) -> str:
    return " + ".join(p.label for p in parts)


def _analyse(analyses: Analyses, yours: Outcome, parts: tuple[Outcome, ...], progress: FitProgress) -> Outcome | None:
    label = _label(parts)
    try:
        o = analyses.outcome(_options(yours, parts), label, _cost(parts), _changes(parts))
    except MemgraphError:  # the changes do not go together on this model
        return None
    progress.done(f"{label}: {'fits' if o.fits_with_margin else 'does not fit'}")
    return o


__all__ = ["Plan", "find_plans"]
