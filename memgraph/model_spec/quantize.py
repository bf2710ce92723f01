"""QLoRA's frozen base: linear weights stored as bitsandbytes stores them (``--quantize 4bit``), emulated on meta.

bitsandbytes' CUDA kernels have no meta (or CPU-usable) implementation, so :class:`Linear4bitStandIn`
allocates exactly what bitsandbytes 0.50.1 allocates (github bitsandbytes-foundation/bitsandbytes, tag 0.50.1),
without computing anything. ``4bit`` is QLoRA's recipe: NF4, blocksize 64, double quantisation
(transformers' ``BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=<the model's dtype>)``); FP4 packs the same bytes.
``nf4`` is the same without double quantisation (``bnb_4bit_use_double_quant=False``, LitGPT's ``bnb.nf4``):
functional.py ``quantize_4bit(compress_statistics=False)`` keeps the op's float32 ``_absmax`` as the state's
``absmax``, and ``_dequant_linear_fallback`` / ``dequantize_4bit`` read it as it is (no float32 absmax rebuilt).

Storage of one quantised weight of ``n = out * in`` elements (functional.py ``quantize_4bit``, CUDA op
``bitsandbytes::quantize_4bit`` in backends/cuda/ops.py, quant_storage uint8):

- the packed weight: ``uint8 [(n + 1) // 2, 1]``, two 4-bit codes per byte (a frozen ``Params4bit``);
- ``absmax``: one per block of 64; with double quantisation (``compress_statistics``) it is itself
  quantised by ``quantize_blockwise(_absmax - offset, blocksize=256)``: ``uint8 [ceil(n / 64)]``, plus
  ``offset`` (``_absmax.mean()``, a float32 scalar), ``state2.absmax`` (``float32 [ceil(ceil(n / 64) / 256)]``)
  and ``state2.code`` (the dynamic map, ``code.to(A.device, copy=True)``: ``float32 [256]``);
- ``code``: the NF4/FP4 table (``get_4bit_type``: ``torch.tensor(data, device=device)``, ``float32 [16]``).

Forward (autograd/_functions.py ``matmul_4bit`` -> ``MatMul4Bit.forward`` -> ``bitsandbytes::gemm_4bit``,
backends/cuda/ops.py): with ``M = tokens`` rows, the fused ``cgemm_4bit_*`` kernel (output only) is used when
``M <= 4``, or for float32 when ``M < 8``; past ``M > 1536`` (and for float32 from ``M >= 8``) the fallback
``_dequant_linear_fallback`` runs: ``absmax_dq = empty_like(absmax_8bit, float32)``, ``absmax = absmax_dq +
offset``, ``B_dq = empty(shape, A.dtype)`` (the whole weight in the compute dtype), ``F.linear(A, B_dq, bias)``,
all three freed on return. Between, ``_gemm_4bit_use_custom_cuda`` picks per GPU architecture and shape;
that heuristic is not modelled: the fallback is counted there, an upper bound by one dequantised weight
(named in the trace notes). ``MatMul4Bit`` keeps the packed weight for backward (``ctx.tensors``: no new bytes).

Backward (``MatMul4Bit.backward``): ``F.dequantize_4bit(B, state)``: with double quantisation
``dequantize_blockwise`` makes a ``float32 [ceil(n / 64)]`` absmax (``+= offset`` in place), then
``bitsandbytes::dequantize_4bit`` a ``[out, in]`` weight in the original weight's dtype, ``.to(grad.dtype)``,
and ``torch.matmul(grad_output, W)``; the temporaries are freed when backward returns.

Older releases (``--bnb-version``, memgraph/facts/bitsandbytes.py): before 0.50 the forward always dequantises
the whole weight (``F.linear(A, dequantize_4bit(B).to(A.dtype).t())``, the absmax rebuilt in place), and before
0.44 ``MatMul4Bit`` also keeps its input ``A`` in ``ctx.tensors`` for as long as the graph lives.

``8bit`` is LLM.int8 as transformers loads it (``BitsAndBytesConfig(load_in_8bit=True)``: ``Linear8bitLt`` with
``has_fp16_weights=False``, ``threshold = llm_int8_threshold = 6.0``), :class:`Linear8bitLtStandIn`:
storage ``int8 [out, in]`` (``Int8Params.CB``) and its row statistics ``SCB`` (``float32 [out]``). Forward
(autograd/_functions.py ``MatMul8bitLt.forward``, CUDA ops in backends/cuda/ops.py and backends/default/ops.py):
``A.to(float16)`` (a copy unless the input is float16), ``int8_vectorwise_quant``: ``row_stats float32 [M]``,
``out_row int8 [M, K]``, and for the threshold ``A.abs() >= threshold`` (``[M, K]`` float16, then bool) with
``outliers.any(dim=0)``; then ``int8_mixed_scaled_mm`` -> ``int8_scaled_mm``: ``int8_linear_matmul``'s
``int32 [M, N]``, ``int8_mm_dequant``'s ``float16 [M, N]`` and ``.to(dtype)`` (a copy unless float16).
``ctx.tensors = (CAt, subA, A)`` keeps the layer's input alive for backward. The outlier columns are data:
none is modelled (each one would add ``subA [M, 1]``, a dequantised weight column, and, when any exists, the
second ``[M, N]`` output of ``output.addmm(subA, subB)``). Backward (``MatMul8bitLt.backward``): ``CB.to(A.dtype,
copy=True)`` (the whole weight), ``SCB.unsqueeze(1).mul(1/127)`` (``float32 [out, 1]``), ``torch.matmul``.

Which linears: every ``nn.Linear`` but the output embedding (transformers' ``get_keys_to_not_convert`` keeps
``lm_head`` in full precision) and the LoRA adapters.
"""

from __future__ import annotations

import torch

from memgraph.errors import MemgraphError
from memgraph.facts.bitsandbytes import MODELLED_BNB_VERSION, has_fused_4bit_gemm, matmul4bit_keeps_input
from memgraph.model_spec.options import PRECISION_DTYPE, TrainingOptions
from memgraph.notes import Note

BLOCKSIZE = 64  # BitsAndBytesConfig bnb_4bit_blocksize default / functional.quantize_4bit blocksize=64
NESTED_BLOCKSIZE = 256  # quantize_4bit: quantize_blockwise(_absmax - offset, blocksize=256)
DYNAMIC_MAP_VALUES = 256  # create_dynamic_map(total_bits=8)
FOURBIT_TABLE_VALUES = 16  # get_4bit_type("nf4"/"fp4"): 16 values
CUSTOM_MAX_M = 1536  # backends/cuda/ops.py _gemm_4bit_custom_max_m (CUDA)
CUSTOM_FLOOR_M = 4  # backends/cuda/ops.py _GEMM_4BIT_CUSTOM_FLOOR_M
# The model's parameters in one stored element of a packed 4-bit weight (a uint8 ``Params4bit``): two 4-bit codes
# per byte (bitsandbytes 0.50.1 functional.py ``quantize_4bit``, quant_storage uint8); transformers 5.23
# modeling_utils.py ``num_parameters`` counts a ``Params4bit`` as ``numel() * 2 * quant_storage itemsize`` likewise
PACKED_4BIT_VALUES_PER_BYTE = 2


def parameters_per_element(quantize: str | None, dtype: str) -> int:
    """How many of the model's parameters one stored element of a parameter of ``dtype`` (``"uint8"``) holds:
    2 for the packed weights of ``--quantize 4bit|nf4`` (their only uint8 parameters: :class:`Linear4bitStandIn`),
    else 1. The ``parameters:`` line and the per-module table count the model's parameters, not stored elements."""
    return PACKED_4BIT_VALUES_PER_BYTE if quantize in ("4bit", "nf4") and dtype == "uint8" else 1


def storage_bytes(numel: int, double_quant: bool = True) -> dict[str, int]:
    """Unrounded bytes of one 4-bit weight's storage, by tensor (module docstring)."""
    blocks = -(-numel // BLOCKSIZE)
    parts = {"weight": (numel + 1) // 2, "code": 4 * FOURBIT_TABLE_VALUES}
    if double_quant:
        parts.update(absmax=blocks, offset=4, state2_absmax=4 * -(-blocks // NESTED_BLOCKSIZE),
                     state2_code=4 * DYNAMIC_MAP_VALUES)
    else:
        parts["absmax"] = 4 * blocks
    return parts


def fused_kernel(rows: int, dtype: torch.dtype) -> bool | None:
    """Whether ``bitsandbytes::gemm_4bit`` runs its fused kernel (True), the dequantise + ``F.linear`` fallback
    (False), or it depends on the GPU's heuristic (None: not modelled; the fallback is counted)."""
    if rows > CUSTOM_MAX_M:
        return False
    if rows <= CUSTOM_FLOOR_M:
        return True
    if dtype == torch.float32:
        return rows < 8
    return None


class _MatMul4Bit(torch.autograd.Function):
    """The allocations of bitsandbytes 0.50.1 ``MatMul4Bit`` (module docstring); values are not computed."""

    @staticmethod
    def forward(ctx, x, layer):
        rows = x.numel() // x.shape[-1]
        fused = fused_kernel(rows, x.dtype) if has_fused_4bit_gemm(layer.bnb_version) else False
        if fused is None:
            layer.heuristic_calls += 1
        if fused:
            out = torch.empty((*x.shape[:-1], layer.out_features), dtype=x.dtype, device=x.device)
        elif has_fused_4bit_gemm(layer.bnb_version):  # 0.50: _dequant_linear_fallback
            absmax = layer.dequantized_absmax()
            w = torch.empty((layer.out_features, layer.in_features), dtype=x.dtype, device=x.device)
            out = torch.nn.functional.linear(x, w, layer.bias)
            del w, absmax
        else:  # before 0.50: F.linear(A, F.dequantize_4bit(B, state).to(A.dtype).t(), bias)
            absmax = layer.dequantized_absmax(in_place_offset=True)
            w = torch.empty((layer.out_features, layer.in_features), dtype=layer.weight_dtype, device=x.device)
            del absmax  # dequantize_4bit's local, freed when it returns
            w = w.to(x.dtype)
            out = torch.nn.functional.linear(x, w, layer.bias)
            del w
        ctx.layer = layer
        if matmul4bit_keeps_input(layer.bnb_version) and getattr(ctx, "needs_input_grad", (False,))[0]:
            ctx.tensors = (x,)  # before 0.44: ctx.tensors = (A, B), alive as long as the graph (facts/bitsandbytes.py)
        return out

    @staticmethod
    def backward(ctx, grad_output):
        layer = ctx.layer
        absmax = layer.dequantized_absmax(in_place_offset=True)
        w = torch.empty((layer.out_features, layer.in_features), dtype=layer.weight_dtype, device=grad_output.device)
        w = w.to(grad_output.dtype)
        grad_x = torch.matmul(grad_output, w)
        del w, absmax
        return grad_x, None


class Linear4bitStandIn(torch.nn.Module):
    """What ``bnb.nn.Linear4bit`` holds and allocates (module docstring): packed uint8 weight (a frozen
    parameter) and the quantisation statistics (buffers)."""

    def __init__(self, linear: torch.nn.Linear, compute_dtype: torch.dtype, double_quant: bool = True,
                 bnb_version: str = MODELLED_BNB_VERSION):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight_dtype = linear.weight.dtype  # QuantState.dtype: the dtype the weight was quantised from
        self.compute_dtype, self.double_quant, self.bnb_version = compute_dtype, double_quant, bnb_version
        self.heuristic_calls = 0
        device, n = linear.weight.device, linear.weight.numel()
        blocks = -(-n // BLOCKSIZE)
        self.weight = torch.nn.Parameter(torch.empty(((n + 1) // 2, 1), dtype=torch.uint8, device=device),
                                         requires_grad=False)
        self.bias = None
        if linear.bias is not None:
            self.bias = torch.nn.Parameter(linear.bias.detach().to(compute_dtype), requires_grad=False)
        f32 = dict(dtype=torch.float32, device=device)
        self.register_buffer("code", torch.empty(FOURBIT_TABLE_VALUES, **f32), persistent=False)
        if double_quant:
            self.register_buffer("absmax", torch.empty(blocks, dtype=torch.uint8, device=device), persistent=False)
            self.register_buffer("offset", torch.empty((), **f32), persistent=False)
            self.register_buffer("state2_absmax", torch.empty(-(-blocks // NESTED_BLOCKSIZE), **f32),
                                 persistent=False)
            self.register_buffer("state2_code", torch.empty(DYNAMIC_MAP_VALUES, **f32), persistent=False)
        else:
            self.register_buffer("absmax", torch.empty(blocks, **f32), persistent=False)

    def dequantized_absmax(self, in_place_offset: bool = False):
        """Double quantisation: the float32 absmax rebuilt before dequantising (forward: ``absmax_dq + offset``,
        a second tensor; backward: ``dequantize_blockwise`` then ``+= offset`` in place)."""
        if not self.double_quant:
            return ()
        absmax = torch.empty(self.absmax.shape, dtype=torch.float32, device=self.absmax.device)
        if in_place_offset:
            return (absmax.add_(self.offset),)
        return absmax, absmax + self.offset  # both locals of _dequant_linear_fallback, alive until it returns

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # bnb.nn.Linear4bit.forward
        inp_dtype = x.dtype
        x = x.to(self.compute_dtype)
        if torch.is_grad_enabled() and x.requires_grad:
            out = _MatMul4Bit.apply(x, self)
        else:  # matmul_4bit without autograd: the same gemm_4bit allocations
            with torch.no_grad():
                out = _MatMul4Bit.forward(_NoCtx(), x, self)
        return out.to(inp_dtype)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, nf4, double_quant={self.double_quant}, "
                f"bitsandbytes {self.bnb_version}")


class _NoCtx:
    pass


LLM_INT8_THRESHOLD = 6.0  # transformers BitsAndBytesConfig llm_int8_threshold default


class _MatMul8bitLt(torch.autograd.Function):
    """The allocations of bitsandbytes 0.50.1 ``MatMul8bitLt`` (module docstring), no outlier column."""

    @staticmethod
    def forward(ctx, x, layer):
        a = x.reshape(-1, x.shape[-1])
        rows, n = a.shape[0], layer.out_features
        ca, sca = _int8_vectorwise_quant(a.to(torch.float16), LLM_INT8_THRESHOLD)  # locals until forward returns
        out_i32 = torch.empty((rows, n), dtype=torch.int32, device=x.device)  # int8_linear_matmul
        out16 = torch.empty_like(out_i32, dtype=torch.float16)  # int8_mm_dequant, while out_i32 is its argument
        if layer.bias is not None:
            out16.add_(layer.bias)  # fused (float16) or out.add_(bias)
        out = out16.to(x.dtype)  # int8_mm_dequant's return: out_i32 and out16 still alive
        del out_i32, out16
        ctx.layer, ctx.a, ctx.shape = layer, a, x.shape  # ctx.tensors = (CAt, subA, A)
        return out.reshape(*x.shape[:-1], n)

    @staticmethod
    def backward(ctx, grad_output):
        layer = ctx.layer
        grad_output = grad_output.reshape(-1, grad_output.shape[-1]).contiguous()
        cb = layer.weight.to(ctx.a.dtype, copy=True)  # state.CB (the int8 weight) .to(ctx.dtype_A, copy=True)
        cb.mul_(layer.SCB.unsqueeze(1).mul(1.0 / 127.0))
        grad_a = torch.matmul(grad_output.to(ctx.a.dtype), cb).view(ctx.shape)
        return grad_a, None


def _int8_vectorwise_quant(a16: torch.Tensor, threshold: float):
    """backends/cuda/ops.py ``int8_vectorwise_quant``: row_stats, out_row and the outlier search (none found)."""
    row_stats = torch.empty(a16.shape[0], dtype=torch.float32, device=a16.device)
    out_row = torch.empty(a16.shape, dtype=torch.int8, device=a16.device)
    if threshold > 0.0:
        outliers = a16.abs() >= threshold
        outliers.any(dim=0)
        del outliers
    return out_row, row_stats


class Linear8bitLtStandIn(torch.nn.Module):
    """What ``bnb.nn.Linear8bitLt(has_fp16_weights=False)`` holds and allocates (module docstring): int8 weight
    (a frozen parameter) and its float32 row statistics ``SCB`` (a buffer)."""

    def __init__(self, linear: torch.nn.Linear):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        device = linear.weight.device
        self.weight = torch.nn.Parameter(torch.empty(linear.weight.shape, dtype=torch.int8, device=device),
                                         requires_grad=False)
        self.bias = None
        if linear.bias is not None:
            self.bias = torch.nn.Parameter(linear.bias.detach(), requires_grad=False)
        self.register_buffer("SCB", torch.empty(self.out_features, dtype=torch.float32, device=device),
                             persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled() and x.requires_grad:
            return _MatMul8bitLt.apply(x, self)
        with torch.no_grad():
            return _MatMul8bitLt.forward(_NoCtx(), x, self)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8, threshold={LLM_INT8_THRESHOLD}"


def quantize_base_linears(model: torch.nn.Module, opts: TrainingOptions) -> list[str]:
    """Replace every frozen base ``nn.Linear`` (not the output embedding, not a LoRA adapter) with a
    :class:`Linear4bitStandIn`; returns the replaced module paths."""
    device = next(model.parameters()).device
    if device.type != "meta":  # a real run would need bitsandbytes' own Linear4bit, not this stand-in
        raise MemgraphError(f"--quantize {opts.quantize} is emulated on meta for 'analyze' only: measuring it needs "
                            "bitsandbytes' real Linear4bit (not wired yet); drop --quantize to measure")
    dtype = PRECISION_DTYPE[opts.precision]
    output = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    replaced = []
    for path, module in list(model.named_modules()):
        if type(module) is not torch.nn.Linear or module is output or ".lora_" in path:
            continue
        parent_path, _, name = path.rpartition(".")
        stand_in = (Linear8bitLtStandIn(module) if opts.quantize == "8bit"
                    else Linear4bitStandIn(module, compute_dtype=dtype, double_quant=opts.quantize == "4bit",
                                           bnb_version=opts.bnb_version or MODELLED_BNB_VERSION))
        setattr(model.get_submodule(parent_path), name, stand_in)
        replaced.append(path)
    return replaced


def quantize_notes(model: torch.nn.Module) -> list[str]:
    int8 = sum(isinstance(m, Linear8bitLtStandIn) for m in model.modules())
    if int8:
        return [Note("--quantize 8bit: {weights} linear weights stored as bitsandbytes 0.50.1 LLM.int8 (int8 weight, float32 "
                "row statistics); forward quantises each input to int8 with threshold {threshold} and finds "
                "no outlier column (outliers are data: each adds a column of the input and of the weight, and any "
                "adds a second output from addmm); the layer input is kept for backward, which dequantises the "
                "weight (model_spec/quantize.py)", per_layer=("weights",), weights=int8,
                threshold=LLM_INT8_THRESHOLD)]
    layers = [m for m in model.modules() if isinstance(m, Linear4bitStandIn)]
    if not layers:
        return []
    flag = "4bit" if layers[0].double_quant else "nf4"
    stats = ("with double quantisation (uint8 packed weight as a frozen parameter; uint8 absmax, offset and code "
             "tables as buffers)" if layers[0].double_quant else
             "without double quantisation (uint8 packed weight as a frozen parameter; float32 absmax per block of "
             f"{BLOCKSIZE} and the code table as buffers)")
    version = layers[0].bnb_version
    release = "0.50.1" if version == MODELLED_BNB_VERSION else version
    notes = [Note("--quantize {flag}: {weights} linear weights stored as bitsandbytes {release} NF4 {stats}; "
                  "forward and backward allocate the dequantised weight as bitsandbytes' gemm_4bit fallback and "
                  "MatMul4Bit.backward do (model_spec/quantize.py)", per_layer=("weights",), flag=flag,
                  weights=len(layers), release=release, stats=stats)]
    if matmul4bit_keeps_input(version):
        notes.append(f"--bnb-version {version}: MatMul4Bit keeps each quantised layer's input that requires grad "
                     "(ctx.tensors = (A, B), dropped in bitsandbytes 0.44) until the step's graph is freed, not only "
                     "until its backward runs (facts/bitsandbytes.py)")
    calls = sum(m.heuristic_calls for m in layers)
    if calls:
        notes.append(Note("--quantize {flag}: {calls} forward matmuls have {floor} < rows <= {top}, where "
                          "bitsandbytes picks its fused kernel or the dequantise + F.linear fallback by GPU "
                          "architecture (_gemm_4bit_use_custom_cuda, not modelled): counted as the fallback, an upper "
                          "bound by one dequantised weight", per_layer=("calls",), flag=flag, calls=calls,
                          floor=CUSTOM_FLOOR_M, top=CUSTOM_MAX_M))
    return notes
