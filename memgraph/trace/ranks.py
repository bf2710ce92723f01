"""Which ranks of a ``--strategy`` run differ: every rank's layout, and the ranks grouped by it.

Every rank runs the same program; with even data (every rank a batch of the same shape) what differs is what a
rank stores (:meth:`~memgraph.trace.distributed.DistributedRun.layout`): FSDP2's and DTensor's shards where a
dimension does not divide by the ranks (``torch.chunk`` semantics: the last ranks hold fewer rows, possibly
none), ZeRO-1's partitions. Each rank's layout comes from building the model on meta and wrapping it as that
rank of the fake process group, without running a step (a fraction of a trace's time); ranks of equal layout
form one group, and one trace per group gives its figures.
"""

from __future__ import annotations

from memgraph.model_spec.build import build_model
from memgraph.model_spec.defaults import resolve_defaults
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import ModelSpec
from memgraph.trace.distributed import DistributedRun
from memgraph.trace.fused_optimizers import fused_on_meta
from memgraph.trace.optimizer_in_backward import make_step_optimizer
from memgraph.trace.shadow_values import ShadowValues


def rank_layout(spec: ModelSpec, opts: TrainingOptions, rank: int) -> tuple:
    """``rank``'s layout: its model built on meta, wrapped, and its optimizer partitioned as the trace does."""
    with DistributedRun(opts, rank=rank) as run:
        resolved = resolve_defaults(spec, opts)
        model = build_model(spec, resolved.options, "meta", constructor_values=ShadowValues)
        run.wrap(model)
        trainable = [p for p in model.parameters() if p.requires_grad]
        with fused_on_meta():
            optimizer = run.shard_optimizer(make_step_optimizer(resolved.options, trainable,
                                                                resolved.optimizer_impl))
        return run.layout(model, optimizer)


def rank_groups(spec: ModelSpec, opts: TrainingOptions) -> list[list[int]]:
    """The ranks 0 .. N-1 grouped by equal layout, each group in rank order, the groups by their first rank."""
    if opts.deepspeed is not None:  # every rank's partitions have the same sizes (DeepSpeedRun.layout)
        return [list(range(opts.nproc))]
    groups: dict[tuple, list[int]] = {}
    for rank in range(opts.nproc):
        groups.setdefault(rank_layout(spec, opts, rank), []).append(rank)
    return sorted(groups.values())


__all__ = ["rank_groups", "rank_layout"]
