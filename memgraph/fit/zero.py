"""DeepSpeed ZeRO-2 and ZeRO-3 as changes ``memgraph fit`` tries where more GPUs are allowed (``--max-gpus``).

Each is ``--nproc N --deepspeed CONFIG``: your own DeepSpeed config when you pass one, else the ZeRO-2 / ZeRO-3
config of Hugging Face's DeepSpeed guide (transformers docs, "DeepSpeed": every size ``"auto"``, ``overlap_comm``
and ``contiguous_gradients`` on), shipped with memgraph as memgraph/ds_engine/zero2.json and zero3.json, so the
printed command can be pasted as it is. Offered only when DeepSpeed is installed (``memgraph[deepspeed]``; it is
not imported here) and you run no ``--strategy``; over the most GPUs allowed (one analysis each).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from memgraph.model_spec.options import TrainingOptions

CONFIGS = {stage: str(Path(__file__).resolve().parent.parent / "ds_engine" / f"zero{stage}.json") for stage in (2, 3)}
COSTS = {2: "needs {n} GPUs; DeepSpeed partitions gradients and optimizer state (a reduce-scatter of the gradients "
            "and an all-gather of the updated weights each step)",
         3: "needs {n} GPUs; DeepSpeed also partitions the weights: an all-gather per layer in forward and in "
            "backward, the most communication",
         0: "needs {n} GPUs; what is partitioned is your config's ZeRO stage"}


def zero(n: int, stage: int, config: str | None = None) -> tuple[str, tuple, str]:
    """(name, TrainingOptions changes, cost) of DeepSpeed ZeRO-``stage`` over ``n`` GPUs with ``config`` (memgraph's
    default config of that stage); fit/candidates.py makes it a Candidate of the more-GPUs tier."""
    name = f"DeepSpeed ZeRO-{stage} over {n} GPUs" if config is None else f"your DeepSpeed config over {n} GPUs"
    return name, (("nproc", n), ("deepspeed", config or CONFIGS[stage])), COSTS[stage].format(n=n)


def zero_changes(opts: TrainingOptions, sizes: list[int]) -> list[tuple[str, tuple, str]]:
    """The ZeRO changes to try for ``opts`` over the most of ``sizes`` GPUs (none without DeepSpeed)."""
    if not sizes or opts.strategy is not None or importlib.util.find_spec("deepspeed") is None:
        return []
    n = max(sizes)
    return [zero(n, 0, opts.deepspeed)] if opts.deepspeed else [zero(n, 2), zero(n, 3)]


__all__ = ["CONFIGS", "zero", "zero_changes"]
