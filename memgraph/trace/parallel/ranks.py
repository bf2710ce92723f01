"""Which ranks of a ``--strategy`` run differ: every rank's layout, and the ranks grouped by it.

Every rank runs the same program; with even data (every rank a batch of the same shape) what differs is what a
rank stores (:meth:`~memgraph.trace.parallel.distributed.DistributedRun.layout`): FSDP2's and DTensor's shards where a
dimension does not divide by the ranks (``torch.chunk`` semantics: the last ranks hold fewer rows, possibly
none), ZeRO-1's partitions. Each rank's layout comes from building the model on meta and wrapping it as that
rank of the fake process group, without running a step (a fraction of a trace's time); ranks of equal layout
form one group, and one trace per group gives its figures.
"""

from __future__ import annotations

from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import ModelSpec
from memgraph.step import build_step
from memgraph.trace.emulate.autocast_emulation import checkpoint_context_fn
from memgraph.trace.parallel.distributed import DistributedRun
from memgraph.trace.shadow_values import ShadowValues


def rank_layout(spec: ModelSpec, opts: TrainingOptions, rank: int) -> tuple:
    """``rank``'s layout: the training step the trace records (step/build.py) built on meta as that rank, its
    model wrapped and its optimizer partitioned, not run."""
    with DistributedRun(opts, rank=rank) as run:
        step = build_step(spec, opts, "meta", run, constructor_values=ShadowValues,
                          checkpoint_context_fn=checkpoint_context_fn)
        return run.layout(step.model, step.optimizer)


def rank_groups(spec: ModelSpec, opts: TrainingOptions, traced: list[tuple] | None = None) -> list[list[int]]:
    """The ranks 0 .. N-1 grouped by equal layout, each group in rank order, the groups by their first rank.

    ``traced``: every rank's layout as rank 0's trace found it (Trace.rank_layouts: DeepSpeed ZeRO-1/2, whose ranks
    differ in the parameters their partitions straddle, ds_engine/run.py ``rank_layouts``); with --deepspeed and
    none, the ranks are alike."""
    if opts.deepspeed is not None:
        layouts = traced or [()] * opts.nproc
    else:
        layouts = [rank_layout(spec, opts, rank) for rank in range(opts.nproc)]
    groups: dict[tuple, list[int]] = {}
    for rank, layout in enumerate(layouts):
        groups.setdefault(layout, []).append(rank)
    return sorted(groups.values())


__all__ = ["rank_groups", "rank_layout"]
