"""memgraph's trace against the same training step run plainly on meta and under make_fx, side by side.

    python benchmarks/trace_speed.py                 # gpt2 (s1024) and llama-2-7b (s2048), fp32 AdamW
    python benchmarks/trace_speed.py llama-2-7b:2048

For each model, in one process and with the same built model and batch: two iterations of the
training step (forward, loss, backward, foreach AdamW step, zero_grad) on the meta device
1. plainly (no recorder, no emulation): the floor any meta-device tracer pays;
2. under memgraph's trace (``trace_training``: recorder, module tracking, emulations);
3. under ``torch.fx.experimental.proxy_tensor.make_fx`` (one iteration traced, as a graph).
Each is timed as CPU seconds of this process (``time.process_time``) after a warm-up run, best of
``REPEATS``; the ratios are to the plain step. Prints figures; asserts nothing. Wall-clock figures on
the shared 2-core development machine are noisy: compare ratios measured in the same run.
"""

from __future__ import annotations

import sys
import time

import torch

REPEATS = 2
CASES = ["gpt2:1024", "llama-2-7b:2048"]


def _setup(model_name: str, seq_len: int):
    from memgraph.model_spec.build import build_model
    from memgraph.model_spec.optimizers import make_optimizer
    from memgraph.model_spec.options import PRECISION_DTYPE, TrainingOptions
    from memgraph.model_spec.sources import resolve

    opts = TrainingOptions(seq_len=seq_len, optimizer_impl="foreach")
    spec = resolve(model_name)
    model = build_model(spec, opts, "meta")
    batch = spec.batch(opts, PRECISION_DTYPE[opts.precision]).make("meta")
    return spec, opts, model, batch, make_optimizer


def _plain(model, batch, make_optimizer) -> None:
    from memgraph.model_spec.tasks import loss_from_outputs
    from memgraph.step.fused_optimizers import fused_on_meta
    from memgraph.step.training_step import train_iteration

    optimizer = make_optimizer("adamw", [p for p in model.parameters() if p.requires_grad], "foreach")
    with fused_on_meta():
        for _ in range(2):
            train_iteration(model, batch, loss_from_outputs, optimizer)


def _make_fx(model, batch, make_optimizer) -> int:
    from torch.fx.experimental.proxy_tensor import make_fx

    from memgraph.model_spec.tasks import loss_from_outputs

    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = make_optimizer("adamw", params, "foreach")
    args, kwargs = batch

    def step(*tensors):
        loss = loss_from_outputs(model(*args, **kwargs))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    graph = make_fx(step)(*[t for t in kwargs.values() if isinstance(t, torch.Tensor)])
    return len(graph.graph.nodes)


def _cpu_seconds(fn) -> float:
    best = float("inf")
    fn()  # warm-up: first-use caches (kernels, op names) are not the step's
    for _ in range(REPEATS):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def main(cases: list[str]) -> None:
    from memgraph.trace.tracer import trace_training

    print(f"{'case':20s} {'plain meta s':>12s} {'memgraph s':>11s} {'ratio':>6s} {'make_fx s':>10s} {'ratio':>6s} "
          f"{'ops':>7s}   (memgraph: the trace less building the model and batch, which it also does)")
    for case in cases:
        name, seq = case.split(":")
        spec, opts, model, batch, make_optimizer = _setup(name, int(seq))
        plain = _cpu_seconds(lambda: _plain(model, batch, make_optimizer))
        ops = []
        build = _cpu_seconds(lambda: _setup(name, int(seq)))
        ours = _cpu_seconds(lambda: ops.append(len(trace_training(spec, opts).log.ops))) - build
        try:
            fx = _cpu_seconds(lambda: _make_fx(model, batch, make_optimizer)) * 2  # one iteration traced: x2
            fx_text = f"{fx:10.2f} {fx / plain:6.2f}"
        except Exception as e:  # make_fx may refuse a model; say so and go on
            fx_text = f"{'failed':>10s} {type(e).__name__:>6s}"
        print(f"{case:20s} {plain:12.2f} {ours:11.2f} {ours / plain:6.2f} {fx_text} {ops[-1]:7d}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or CASES)
