"""The type of every :class:`~memgraph.model_spec.options.TrainingOptions` field, checked before its value.

The command line parses text into the right types; the Python API takes whatever the caller passes, so
``gradient_checkpointing='no'`` (a true string), ``audio_seconds='1'``, ``allocator_conf=123`` or ``train=None``
would be taken as meant or fail deep inside. Each field's annotation says what it takes; a value of another type
is one :class:`~memgraph.errors.MemgraphError` naming the field, its flag and the value. A list where a tuple is
meant (as JSON gives it back) is taken as the tuple. Counts and choices keep the checks TrainingOptions makes of
them (a positive integer, one of the choices).
"""

from __future__ import annotations

import math
from dataclasses import Field, fields

from memgraph.errors import MemgraphError

# --audio-seconds: the clip is sampled at 16 kHz (the `sampling_rate` default of transformers' Whisper and
# Wav2Vec2 feature extractors, 5.23), and its samples are a count memgraph can use (options.MAX_COUNT).
AUDIO_SAMPLING_RATE = 16_000
MAX_COUNT = 2**31 - 1
MAX_AUDIO_SECONDS = MAX_COUNT // AUDIO_SAMPLING_RATE  # 134,217 s, 37 hours
# --gpu-memory and --context-bytes: at most 2**50 bytes (1 PiB), thousands of times what any GPU holds (the
# catalog's largest board, memgraph/facts/gpus.py, has under 300 GB); more is a typo, and would print as fitting.
MAX_DEVICE_BYTES = 2**50


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# annotation -> (test, what it takes)
_KINDS = {
    "bool": (lambda v: isinstance(v, bool), "True or False"),
    "int": (_is_int, "a whole number"),
    "float": (_is_number, "a number"),
    "str": (lambda v: isinstance(v, str), "a string"),
    "tuple[str, ...]": (lambda v: isinstance(v, (tuple, list)) and all(isinstance(x, str) for x in v),
                        "a tuple of strings, e.g. ('lm_head*',)"),
    "int | tuple[int, int]": (lambda v: _is_int(v) or (isinstance(v, (tuple, list)) and all(map(_is_int, v))),
                              "a whole number or (height, width)"),
}


def check_types(opts, flags: dict[str, str], checked_elsewhere: set[str]) -> None:
    """Refuse the first field of ``opts`` whose value is not of its annotated type (see the module docstring).

    ``flags``: each field's command-line flag, for the message; ``checked_elsewhere``: fields TrainingOptions
    checks itself (counts and choices)."""
    for f in fields(opts):
        if f.name in checked_elsewhere:
            continue
        value = getattr(opts, f.name)
        kind, optional = _kind(f)
        if value is None and optional:
            continue
        test, takes = _KINDS[kind]
        if not test(value):
            raise MemgraphError(f"{f.name} ({flags[f.name]}) is {_shown(value)} ({type(value).__name__}); it takes {takes}"
                                + (" or None" if optional else ""))
        if kind == "tuple[str, ...]" and isinstance(value, list):
            object.__setattr__(opts, f.name, tuple(value))
    for name in ("gpu_memory", "context_bytes"):
        value = getattr(opts, name)
        if _is_int(value) and value > MAX_DEVICE_BYTES:
            raise MemgraphError(f"{name} ({flags[name]}) is {value:.3g} bytes, more than any GPU holds: pass at most "
                                "2**50 bytes (1 PiB)")
    seconds = opts.audio_seconds
    if seconds is not None and not (math.isfinite(seconds) and 0 < seconds <= MAX_AUDIO_SECONDS):
        raise MemgraphError(f"audio length {seconds!r}: pass --audio-seconds greater than 0 and at most "
                            f"{MAX_AUDIO_SECONDS:,} ({MAX_COUNT:,} samples at {AUDIO_SAMPLING_RATE:,} Hz)")


def _kind(f: Field) -> tuple[str, bool]:
    annotation = str(f.type)
    optional = annotation.endswith(" | None")
    return annotation.removesuffix(" | None"), optional


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
