"""What a bitsandbytes release does in a 4-bit (QLoRA) training step that changed between releases.

memgraph emulates bitsandbytes 0.50.1 (memgraph/model_spec/quantize.py). Published QLoRA measurements often
ran older releases (LitGPT's ``pyproject.toml`` pinned ``bitsandbytes==0.42.0`` from March 2024, and its
10/2023 resource tables name 0.41.1), so ``--bnb-version`` names the release and this module says what
differs. Read from github.com/bitsandbytes-foundation/bitsandbytes, tags 0.41.0 to 0.50.1:

- **The layer input kept for backward.** ``MatMul4Bit.forward`` (bitsandbytes/autograd/_functions.py)
  ends with ``if any(ctx.needs_input_grad[:2]): ctx.tensors = (A, B)`` up to 0.43.3, and with
  ``ctx.tensors = (None, B)`` from 0.44.0 on (commit 9e753741, PR #1270 "fix QLoRA mem bug: delete useless
  buffered activation"): backward only needs the weight, since a frozen 4-bit weight gets no gradient.
  ``ctx.tensors`` is a Python attribute of the autograd node, not ``save_for_backward``, so autograd never
  releases it after the node runs: the input ``A`` lives as long as the graph does, i.e. until the last
  reference to the loss (or to any output of the step) goes.
- **Which kernel the forward runs.** Up to 0.49.x ``matmul_4bit`` calls ``F.gemv_4bit`` (output only) only for
  an input of one row that does not require grad (``A.numel() == A.shape[-1] and A.requires_grad == False``);
  every other call runs ``MatMul4Bit``, whose forward is ``F.linear(A, F.dequantize_4bit(B, state).to(A.dtype).t(),
  bias)``: the whole weight dequantised in ``quant_state.dtype`` (functional.py ``dequantize_4bit``:
  ``out = torch.empty(quant_state.shape, dtype=quant_state.dtype)``), with double quantisation after
  ``absmax = dequantize_blockwise(absmax, state2); absmax += offset`` (one float32 ``[blocks]`` tensor). The
  0.50.0 moved the forward to ``torch.ops.bitsandbytes.gemm_4bit``, whose CUDA backend picks a fused kernel by
  the number of rows (quantize.py ``fused_kernel``) and otherwise runs ``_dequant_linear_fallback``. The
  backward is the same in every release: ``dequantize_4bit`` then ``torch.matmul(grad_output, W.to(grad.dtype).t())``.
"""

from __future__ import annotations

# The releases --bnb-version accepts: the minor versions whose 4-bit path was read (tags 0.41.0 .. 0.50.1).
BNB_VERSIONS = ("0.41", "0.42", "0.43", "0.44", "0.45", "0.46", "0.47", "0.48", "0.49", "0.50")
MODELLED_BNB_VERSION = "0.50"  # what memgraph/model_spec/quantize.py's docstring reads (tag 0.50.1)
# MatMul4Bit keeps its input A in ctx.tensors before this release (PR #1270, commit 9e753741, in 0.44.0)
MATMUL4BIT_DROPS_INPUT_FROM = (0, 44)
# before this release MatMul4Bit.forward dequantises the whole weight for every call (F.linear on it); from
# 0.50.0 on it calls bitsandbytes::gemm_4bit, which picks a fused kernel by rows (quantize.py fused_kernel)
FUSED_4BIT_GEMM_FROM = (0, 50)


def version_tuple(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def matmul4bit_keeps_input(version: str) -> bool:
    """Whether ``MatMul4Bit`` of this release keeps its input ``A`` in ``ctx.tensors`` (module docstring)."""
    return version_tuple(version) < MATMUL4BIT_DROPS_INPUT_FROM


def has_fused_4bit_gemm(version: str) -> bool:
    """Whether this release's ``gemm_4bit`` picks a fused kernel for training inputs (module docstring)."""
    return version_tuple(version) >= FUSED_4BIT_GEMM_FROM
