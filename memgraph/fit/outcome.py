"""What ``memgraph fit`` computes: one analysed setting (:class:`Outcome`) and the whole answer (:class:`FitReport`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from memgraph.model_spec.options import TrainingOptions


@dataclass
class Outcome:
    """One analysed setting: its device total, upper end, fit, and the analysis behind it."""

    label: str
    options: TrainingOptions
    allocated: int
    device_total: int
    device_total_upper: int
    capacity: int
    fits: bool
    fits_with_margin: bool
    seconds: float
    cost: str = ""
    result: object = None
    changes: tuple = ()
    how: str = "traced"  # "traced", "replayed on the trace of ..." (allocator-only change), "interpolated", "failed"

    def as_dict(self) -> dict:
        return {"setting": self.label, "changes": dict(self.changes), "allocated_bytes": self.allocated,
                "required_bytes": self.device_total, "required_bytes_upper": self.device_total_upper,
                "fits": self.fits, "fits_with_margin": self.fits_with_margin, "cost": self.cost,
                "seconds": round(self.seconds, 2), "how": self.how}


def outcome_of(label: str, opts: TrainingOptions, result, seconds: float, cost: str = "", changes=(),
               how: str = "traced") -> Outcome:
    """The :class:`Outcome` of an analysis ``result`` (cuda target) of ``opts``."""
    d = result.device
    total = d.steady_state_device_total
    upper = d.steady_state_device_total_upper or total
    fits = bool(d.fits)
    return Outcome(label, opts, result.steady_state_peak.bytes, total, max(upper, total), d.capacity_bytes,
                   fits, bool(d.fits_with_margin) and fits, seconds, cost, result, tuple(changes), how)


def failed(label: str, opts: TrainingOptions, capacity: int, reason: str, changes=()) -> Outcome:
    """A change this model cannot take (the analysis refused it): kept in the table with the reason."""
    return Outcome(label, opts, 0, 0, 0, capacity, False, False, 0.0, f"not possible here: {reason}", None,
                   tuple(changes), "failed")


BOUND_HOW = "not analysed: at least its lower bound (fit/bound.py), more than the card"


def ruled_out(label: str, opts: TrainingOptions, bound: int, capacity: int, cost: str = "", changes=()) -> Outcome:
    """A change not analysed because it needs at least ``bound`` bytes, more than ``capacity`` (fit/bound.py
    ``sharded_bound``): its totals are that lower bound."""
    return Outcome(label, opts, bound, bound, bound, capacity, False, False, 0.0, cost, None, tuple(changes),
                   BOUND_HOW)



@dataclass
class FitReport:
    model: str
    gpu: str
    capacity: int
    yours: Outcome
    solve: str
    largest: int | None  # largest batch size (or sequence length) that fits with the margin, None if none
    largest_source: str
    confirmations: list[Outcome] = field(default_factory=list)
    changes: list[Outcome] = field(default_factory=list)
    plans: list = field(default_factory=list)  # fit/plans.py Plan: the smallest sets of changes that fit, best first
    commands: list[str] = field(default_factory=list)  # each plan as the command line that analyses it
    why: list[str] = field(default_factory=list)
    seconds: float = 0.0
    timings: list[tuple[str, str, float]] = field(default_factory=list)  # (setting, how, seconds) of each analysis
