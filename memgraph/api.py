"""Python API: ``analyze`` predicts, ``measure`` runs the step for real."""

from __future__ import annotations

from dataclasses import replace

from .analysis.analyze import analyze_trace
from .analysis.result import Result
from .spec.options import TrainingOptions
from .spec.source import resolve
from .trace.run import trace_training


def analyze(model: str, options: TrainingOptions | None = None, depth: int = 3, **kwargs) -> Result:
    """Predict the memory of ``options.iterations`` training iterations of ``model``.

    ``model`` is a zoo name, a config.json path or model folder, or ``module:function``;
    keyword arguments build :class:`TrainingOptions` when ``options`` is not given.
    """
    opts = options or TrainingOptions(**kwargs)
    spec = resolve(model)
    trace = trace_training(spec, opts)
    return analyze_trace(trace, spec.name, opts.to_dict(), opts.target, depth=depth)


def measure(model: str, device: str = "cpu", options: TrainingOptions | None = None, snapshot: str | None = None,
            **kwargs) -> dict:
    """Run the same step for real on ``device`` and return the measured record.

    ``snapshot`` (cuda only): write the caching allocator's recorded history there
    (``torch.cuda.memory._dump_snapshot``)."""
    from .measure import run_measurement

    opts = options or TrainingOptions(**{"target": device, **kwargs})
    if opts.target != device:  # the measured step must be the one the same-named target predicts
        opts = replace(opts, target=device)
    return run_measurement(resolve(model), opts, device, snapshot=snapshot)
