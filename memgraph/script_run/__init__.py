"""``memgraph run``: the user's own, unmodified training script, run on meta under the recorder.

The script runs in this process (``runpy``) with the run's device (``cuda`` on the cuda target, ``cpu`` on the
cpu target) mapped to ``meta`` (:mod:`.device_mode`), ``torch.cuda`` answering for the chosen ``--gpu``
(:mod:`.cuda_stand_in`), the loop's phases and optimizer steps seen through global hooks (:mod:`.loop_watch`),
and every storage recorded by :class:`memgraph.trace.record.recorder.Recorder`; after ``--steps`` optimizer steps the
script is stopped and the trace goes through the same analysis and allocator replay as ``analyze``
(:mod:`.runner`). Values a meta tensor cannot have are answered with placeholders and listed with the script
line that read them (:mod:`.value_reads`).
"""

__all__ = ["ScriptCommand", "run_script"]


def __getattr__(name: str):
    """``ScriptCommand`` and ``run_script`` on first use: the command line imports ``script_run.cli`` to register the
    subcommand, which must not import torch (tests/test_options.py)."""
    if name in __all__:
        from memgraph.script_run import runner

        return getattr(runner, name)
    raise AttributeError(name)
