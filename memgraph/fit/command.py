"""A setting written back as the command line that runs it: what ``memgraph fit`` prints for each suggestion,
so the line can be pasted as it is (every value shell-quoted, every flag spelt as the parser reads it)."""

from __future__ import annotations

import shlex
from dataclasses import Field, fields

from memgraph.model_spec.options import TrainingOptions, flag_of

_BINARY = ((1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"))


def flag_words(base: TrainingOptions, changed: TrainingOptions) -> list[str]:
    """The command-line words that turn ``base`` into ``changed``, in ``--help`` order, each a separate word
    (``['--precision', 'bf16', '--gradient-checkpointing']``). A field no flag can set back (a switch turned
    off) is a ValueError: the line would not run what it says."""
    words: list[str] = []
    for f in fields(TrainingOptions):
        old, new = getattr(base, f.name), getattr(changed, f.name)
        if old != new:
            words += _words(f, new)
    return words


def _words(f: Field, value) -> list[str]:
    flag = flag_of(f)
    if isinstance(f.default, bool):
        if value is not True:
            raise ValueError(f"{flag.name} cannot be turned off on the command line")
        return [flag.name]
    if flag.repeatable:
        return [w for item in value for w in (flag.name, _text(f, item))]
    if value is None:
        raise ValueError(f"{flag.name} has no spelling for 'none'")
    return [flag.name, _text(f, value)]


def _text(f: Field, value) -> str:
    """A value as its flag's parser reads it back (options.py ``parse_bytes``, ``parse_image_size``)."""
    if f.name in ("gpu_memory", "context_bytes"):  # parse_bytes: a unit, the largest binary one that divides
        unit = next(((size, name) for size, name in _BINARY if value % size == 0), (1, "B"))
        return f"{value // unit[0]}{unit[1]}"
    if f.name == "gpu":  # with --gpu-memory the options hold the catalog key "board@bytes" (facts/gpus.py with_capacity)
        return str(value).partition("@")[0]
    if isinstance(value, tuple):  # --image-size HxW
        return "x".join(map(str, value))
    return str(value)


def changed_flags(base: TrainingOptions, changed: TrainingOptions) -> str:
    """:func:`flag_words` as one shell-quoted string, e.g. ``--precision bf16 --gradient-checkpointing``."""
    return " ".join(shlex.quote(w) for w in flag_words(base, changed))


def command_line(verb: str, model: str, opts: TrainingOptions) -> str:
    """``memgraph <verb> MODEL --flag value ...``: the flags of every field ``opts`` sets away from the
    defaults, shell-quoted."""
    words = ["memgraph", verb, model, *flag_words(TrainingOptions(), opts)]
    return " ".join(shlex.quote(w) for w in words)


__all__ = ["changed_flags", "command_line", "flag_words"]
