"""memgraph: predict the GPU memory of a PyTorch training step without a GPU.

Data flow, one package per stage (tests/test_layers.py keeps imports pointing down it):

    facts/       what PyTorch, CUDA and the GPUs do, as data (ops, GPUs, SDPA rules, autocast, allocator rules)
    model_spec/  what to build and how to train it (options, sources, zoo, inputs, tasks, modality groups)
    step/        the training step, built once for the trace, the real run and each rank (build_step)
    trace/       the step run on meta, recorded as one storage event log (record/, emulate/, parallel/, shortcuts/)
    analysis/    passes over the log: categorize, liveness, peaks, group-by, timeline -> Result
    allocator/   the CUDA caching allocator replayed over the log: reserved and device total
    render/      table, markdown, JSON and HTML from one set of sections
    api, cli, measure/, validation: the entry points
"""

from memgraph.version import __version__


def __getattr__(name):  # the API imports torch and transformers: only on use, so `memgraph --help` starts fast
    if name in ("analyze", "measure"):
        from memgraph import api

        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


import sys as _sys  # noqa: E402


class _Package(type(_sys)):
    """``memgraph.measure`` is the API function (README: Python API) although ``memgraph/measure/`` is also a
    package: importing the package would bind the name to it on this module, hiding the function, so that one
    binding is skipped (the package stays importable as ``memgraph.measure.*`` through ``sys.modules``)."""

    def __setattr__(self, name, value):
        if name == "measure" and isinstance(value, type(_sys)):
            return
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package

__all__ = ["analyze", "measure", "__version__"]
