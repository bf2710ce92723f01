"""Input tensors of a training batch: declared as specs, made on any device.

A spec is parsed from ``--input "name=dtype[d0,d1,...]"`` (integers may add ``<HIGH``,
e.g. ``ids=int64[8,512]<32000``, to draw values in [0, HIGH) when the step runs for real; any
input may end in ``=FILL`` to give every element that value, e.g. an all-ones attention mask
``attention_mask=int64[8,512]=1``) or produced by a task (``tasks.py``) from the model config.

Values on meta: an integer or boolean input whose values are known (a fill) is traced with those
values beside it (``trace/shadow_values.py``), so model code that reads a mask back (``.item()``,
``.all()``, ``nonzero``) sees what the real run sees; other integer inputs get values drawn as the
real run draws them (``[0, HIGH)``, or all true for bool), from their own generator.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import torch

from memgraph.errors import MemgraphError

DTYPES = {
    "float32": torch.float32, "float": torch.float32, "fp32": torch.float32,
    "float16": torch.float16, "half": torch.float16, "fp16": torch.float16,
    "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
    "float64": torch.float64, "double": torch.float64,
    "int64": torch.int64, "long": torch.int64, "int32": torch.int32, "int": torch.int32,
    "int16": torch.int16, "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool,
}
# labels at this value are left out of the loss: torch.nn.functional.cross_entropy's ignore_index default
# (torch 2.13), which transformers' loss_utils.ForCausalLMLoss passes on (transformers 5.23)
IGNORE_INDEX = -100
DEFAULT_INT_HIGH = 2  # values drawn from [0, 2): valid class labels and token ids for any model

_SPEC = re.compile(r"^\s*([A-Za-z_]\w*)\s*=\s*([A-Za-z0-9]+)\s*\[\s*([0-9,\s]*)\]\s*(?:<\s*(\d+))?"
                   r"\s*(?:=\s*([-+]?[0-9.eE+-]+|true|false|True|False))?\s*$")


@dataclass(frozen=True)
class InputSpec:
    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    high: int | None = None  # integer inputs: values in [0, high) when made for real
    # every element has this value (``=FILL``), e.g. an all-ones mask; keyword-only, so that subclasses'
    # positional fields (multimodal_inputs.KnownInput's values) keep their places
    fill: int | float | None = field(default=None, kw_only=True)

    def make(self, device: str | torch.device, generator: torch.Generator | None = None) -> torch.Tensor:
        """An input tensor: uninitialised on meta, its fill or random on a real device."""
        if torch.device(device).type == "meta":
            return torch.empty(self.shape, dtype=self.dtype, device=device)
        if self.fill is not None:
            return torch.full(self.shape, self.fill, dtype=self.dtype, device=device)
        if self.dtype.is_floating_point:
            return torch.randn(self.shape, dtype=self.dtype, generator=generator).to(device)
        if self.dtype == torch.bool:
            return torch.ones(self.shape, dtype=torch.bool, device=device)
        high = self.high or DEFAULT_INT_HIGH
        return torch.randint(0, high, self.shape, dtype=self.dtype, generator=generator).to(device)

    def value(self) -> torch.Tensor | None:
        """The input's values on the CPU when they are known without a generator (a fill), else None."""
        if self.fill is None:
            return None
        return torch.full(self.shape, self.fill, dtype=self.dtype)

    def describe(self) -> str:
        dims = ",".join(str(d) for d in self.shape)
        fill = "" if self.fill is None else f"={self.fill}"
        return f"{self.name}={str(self.dtype).removeprefix('torch.')}[{dims}]{fill}"


# Longer --input text is a paste accident, not a tensor: a name and a few dimensions fit in far less.
MAX_INPUT_TEXT = 1000
# An input's size: each dimension a count memgraph can use (options.MAX_COUNT, 2**31 - 1), and all of it at most
# 2**48 bytes (256 TiB), beyond what any GPU holds by three orders of magnitude; torch's own limit (a storage
# size in int64) is 2**63 bytes, and a shape past it is an overflow inside torch.empty, not a refusal.
MAX_DIM = 2**31 - 1
MAX_INPUT_BYTES = 2**48


def parse_input(text: str) -> InputSpec:
    """Parse ``name=dtype[d0,d1,...]`` (optionally ``<HIGH``, then ``=FILL``); errors name the bad text."""
    if len(text) > MAX_INPUT_TEXT:
        raise MemgraphError(f"--input {text[:40]!r}... is {len(text):,} characters: an input is name=dtype[dims], "
                            f"at most {MAX_INPUT_TEXT} characters")
    m = _SPEC.match(text)
    if not m:
        raise MemgraphError(
            f"--input {text!r} does not parse: write name=dtype[d0,d1,...], e.g. x=float32[32,3,224,224], "
            "optionally ending in <HIGH (integers) or =FILL, e.g. attention_mask=int64[8,512]=1"
        )
    name, dtype_name, dims, high, fill_text = m.groups()
    if dtype_name.lower() not in DTYPES:
        raise MemgraphError(
            f"--input {text!r}: unknown dtype {dtype_name!r}; use one of {', '.join(sorted(set(DTYPES)))}"
        )
    try:
        shape = tuple(int(d) for d in dims.split(",") if d.strip())
    except ValueError:
        raise MemgraphError(f"--input {text!r}: dimensions must be integers") from None
    if any(d <= 0 for d in shape):
        raise MemgraphError(f"--input {text!r}: every dimension must be >= 1")
    dtype = DTYPES[dtype_name.lower()]
    _check_size(text, shape, dtype)
    if high is not None and (dtype.is_floating_point or dtype == torch.bool):
        raise MemgraphError(f"--input {text!r}: '<HIGH' applies to integer inputs only")
    if high is not None and not 1 <= int(high) <= 2**63 - 1:
        raise MemgraphError(f"--input {text!r}: '<HIGH' is the exclusive upper end of the values: pass <1 to <2**63-1 (an int64)")
    return InputSpec(name, shape, dtype, int(high) if high else None, fill=_fill(text, fill_text, dtype))


def _check_size(text: str, shape: tuple[int, ...], dtype: torch.dtype) -> None:
    big = next((d for d in shape if d > MAX_DIM), None)
    if big is not None:
        raise MemgraphError(f"--input {text[:80]!r}: dimension {str(big)[:24]} is more than memgraph can use "
                            f"(at most {MAX_DIM:,})")
    nbytes = dtype.itemsize
    for d in shape:
        nbytes *= d
    if nbytes > MAX_INPUT_BYTES:
        raise MemgraphError(f"--input {text[:80]!r} is {nbytes:.3g} bytes, more than any GPU holds (memgraph takes "
                            f"inputs up to 2**48 bytes): pass smaller dimensions")


def _fill(text: str, fill_text: str | None, dtype: torch.dtype) -> int | float | None:
    """The ``=FILL`` value, as the dtype takes it (integers and bools: an integer; true/false for bool)."""
    if fill_text is None:
        return None
    if fill_text.lower() in ("true", "false"):
        if dtype != torch.bool:
            raise MemgraphError(f"--input {text!r}: true/false fills bool inputs only; give a number")
        return int(fill_text.lower() == "true")
    try:
        value = float(fill_text)
    except ValueError:
        raise MemgraphError(f"--input {text!r}: fill {fill_text!r} is not a number") from None
    if dtype.is_floating_point:
        return value
    if value != int(value):
        raise MemgraphError(f"--input {text!r}: fill {fill_text!r} of an integer input must be an integer")
    if dtype == torch.bool and int(value) not in (0, 1):
        raise MemgraphError(f"--input {text!r}: a bool input's fill is 0, 1, true or false")
    return int(value)


@dataclass(frozen=True)
class Batch:
    inputs: tuple[InputSpec, ...]
    constants: dict  # non-tensor keyword arguments (e.g. return_loss=True)
    positional: bool = False  # pass the inputs as forward(*inputs) (callables) instead of by name
    notes: tuple[str, ...] = ()  # how the recipe sized the inputs (e.g. the tiles an image becomes), for the report

    def make(self, device, generator=None) -> tuple[tuple, dict]:
        """(args, kwargs) for ``model(*args, **kwargs)``, tensors made on ``device``."""
        tensors = [(s.name, s.make(device, generator)) for s in self.inputs]
        if self.positional:
            return tuple(t for _, t in tensors), dict(self.constants)
        return (), {**dict(tensors), **self.constants}
