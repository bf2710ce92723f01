"""``--config FILE`` on the command line: the file's options under the flags given, and the model it names."""

from __future__ import annotations

import argparse
from dataclasses import fields

from memgraph.errors import MemgraphError
from memgraph.job_config import read_job_config
from memgraph.model_spec.options import TrainingOptions, compile_refusal, flag_of

COMPILE_OPTIONS = ("compile", "compile_mode", "compile_blocks", "compile_loss")


def given_fields(argv: list[str]) -> set[str]:
    """The TrainingOptions fields whose flag is on the command line (``--flag``, ``--flag=V``, ``-bV``)."""
    out = set()
    for f in fields(TrainingOptions):
        flag = flag_of(f)
        for token in argv:
            if token == "--":
                break
            if token == flag.name or token.startswith(flag.name + "="):
                out.add(f.name)
            elif flag.short and token.startswith(flag.short) and not token.startswith("--"):
                out.add(f.name)
    return out


def apply_to_args(a: argparse.Namespace, argv: list[str]) -> None:
    """Set the fields of ``a`` the command line left to their defaults from ``a.config``; ``a.model`` from the
    file when not given; ``a.job_lines``: the report's ``config:`` lines."""
    if a.config is None:
        if a.model is None:
            raise MemgraphError("no model: pass a MODEL (zoo name, Hub id, config.json) or --config FILE naming one")
        return
    job = read_job_config(a.config)
    given = given_fields(argv)
    for name, value in job.options.items():
        if not hasattr(a, name):  # an option this command does not take
            continue
        if name in given:
            job.taken.append(f"(command line) {flag_name(name)} replaces the file's {value!r}")
            continue
        setattr(a, name, value)
    if a.model is None:
        if job.model is None:
            raise MemgraphError(f"--config {a.config!r} names no model ({job.format}): pass the MODEL beside it")
        a.model = job.model
    else:
        job.taken.insert(0, f"model {a.model} given beside the file" + (f" (the file names {job.model})"
                                                                        if job.model else ""))
        job.model = None
    _compile_still_modelled(a, job, given)
    strategy = getattr(a, "strategy", None)
    if strategy is not None and getattr(a, "nproc", 1) == 1:
        raise MemgraphError(f"--config {a.config!r} asks for --strategy {strategy} but not how many GPUs: pass --nproc N")
    a.job_lines = job.lines()


def _compile_still_modelled(a: argparse.Namespace, job, given: set[str]) -> None:
    """A torch.compile the file asked for (and the command line did not) is dropped, and listed as ignored, when the
    command line's options make it one memgraph does not model (``--strategy fsdp`` beside the file's activation
    checkpointing, say): the file cannot be told to drop it, so the prediction is the eager step's, saying so."""
    if not job.options.get("compile") or "compile" in given:
        return
    values = {f.name: getattr(a, f.name) for f in fields(TrainingOptions) if hasattr(a, f.name)}
    refused = compile_refusal(values)
    if refused is None:
        return
    defaults = {f.name: f.default for f in fields(TrainingOptions)}
    for name in COMPILE_OPTIONS:
        if name not in given and hasattr(a, name):
            setattr(a, name, defaults[name])
    job.untake(COMPILE_OPTIONS, "compile (with the command line's options)", True,
               f"{refused.split(':')[0]}; the prediction is without torch.compile")


def flag_name(name: str) -> str:
    for f in fields(TrainingOptions):
        if f.name == name:
            return flag_of(f).name
    return name
