"""The plain-PyTorch side of Liger-Kernel's memory benchmarks, built as the benchmark scripts build it.

Liger-Kernel (linkedin/Liger-Kernel) measures each kernel against a plain PyTorch or Hugging Face provider
(``huggingface`` / ``torch`` in ``benchmark/data/all_benchmark_data.csv``). Its ``benchmark/scripts/utils.py``
``_test_memory`` (commit b5672a15, "Refactored benchmark tests", 2024-09-03, the commit that wrote the rows used
here) runs the measured function 10 times, each time ``torch.cuda.memory.reset_peak_memory_stats()``, the function,
then ``torch.cuda.max_memory_allocated() / 2**20``, and the CSV holds the 50th/20th/80th percentiles of the 10.
Nothing clears a gradient between the 10 calls: from the second call on, each leaf's ``.grad`` is alive and the new
gradient is added to it in place (memgraph: ``--optimizer none --zero-grad none``).

Each factory below returns a module whose parameters are the benchmark's leaf tensors (the ``requires_grad=True``
input and the layer's weights, so that memgraph keeps their gradients as the benchmark does) and whose forward runs
the measured function; the rows' ``--input`` give the tensors the script makes once (target, ``dy``).
Modules the script builds but the huggingface provider never calls (the Liger layer beside the torch one) are
buffers of the same shape and dtype: they hold the same device memory and take no part in the step.

``y.backward(dy, retain_graph=True)`` (rms_norm, layer_norm, swiglu, geglu) is a backward from a given gradient
that keeps the graph: :func:`_backward_from` makes the scalar memgraph calls ``backward()`` on pass ``dy`` (or a new
``torch.randn_like(y)``, as swiglu and geglu do) to ``y``, and :func:`_retaining_graph` keeps every tensor autograd
saves alive until the next call's forward starts, as the retained graph does until ``y`` goes out of scope at the end
of the script's ``full()``. ``y.backward()`` of cross_entropy keeps nothing.
"""

from __future__ import annotations

import contextlib

import torch
from torch import nn
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaMLP, LlamaRMSNorm


class _BackwardFrom(torch.autograd.Function):
    """A scalar whose backward hands ``grad`` (or ``torch.randn_like(y)`` when ``grad`` is None) to ``y``."""

    @staticmethod
    def forward(ctx, y, grad, keep):
        ctx.grad, ctx.keep = grad, keep
        ctx.like = (y.shape, y.dtype, y.device)
        return y.new_zeros(())

    @staticmethod
    def backward(ctx, _):
        shape, dtype, device = ctx.like
        if ctx.grad is None:  # ``y.backward(torch.randn_like(y))``: the argument is held until backward returns
            grad = torch.randn(shape, dtype=dtype, device=device)
            ctx.keep.append(grad)
            return grad, None, None
        grad = ctx.grad
        if grad.dtype != dtype:
            # ``y.backward(dy)`` with a ``dy`` of another dtype: the engine casts the root gradient in the list the
            # caller passed (torch/csrc/autograd/engine.cpp ``Engine::execute`` -> ``validate_outputs``, which
            # replaces it by ``grad.to(dtype)``), and that list (``grads`` of ``THPEngine_run_backward``,
            # torch/csrc/autograd/python_engine.cpp) holds the cast until the whole backward returns.
            grad = grad.to(dtype)
            ctx.keep.append(grad)
        return grad, None, None


def _backward_from(y: torch.Tensor, grad: torch.Tensor | None, keep: list) -> torch.Tensor:
    keep.append(y)  # the script's local ``y`` is alive until its ``full()`` returns
    return _BackwardFrom.apply(y, grad, keep)


class _RetainsGraph(nn.Module):
    """Keeps what autograd saves in one call alive until the next call starts (``retain_graph=True``)."""

    def __init__(self):
        super().__init__()
        self._kept: list[torch.Tensor] = []

    @contextlib.contextmanager
    def _retaining_graph(self):
        self._kept.clear()

        def pack(t):
            self._kept.append(t)
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            yield


# -- cross_entropy (benchmark_cross_entropy.py at b5672a15): B=8, T=2048, V from 4096 to 131072 ----------------

class CrossEntropyBench(nn.Module):
    """``_input = torch.randn(B * T, V, requires_grad=True)``; ``CrossEntropyLoss()(_input, target)``; ``backward()``."""

    def __init__(self, bt: int, vocab: int):
        super().__init__()
        self.input = nn.Parameter(torch.randn(bt, vocab))
        self.torch_ce = nn.CrossEntropyLoss()

    def forward(self, target):
        return self.torch_ce(self.input, target)


# -- rms_norm (benchmark_rms_norm.py at b5672a15): x (M=2048, H) bfloat16, the script's LlamaRMSNorm ---------------

class RMSNormBench(_RetainsGraph):
    """The script's ``LlamaRMSNorm`` (float32 weight, the same forward as transformers' ``LlamaRMSNorm``) on a
    bfloat16 ``x``; the unused ``LigerRMSNorm(hidden_size=H)`` holds a float32 weight of ``torch.ones(H)``."""

    def __init__(self, rows: int, hidden: int):
        super().__init__()
        self.x = nn.Parameter(torch.randn(rows, hidden, dtype=torch.bfloat16))
        self.llama_rms = LlamaRMSNorm(hidden, eps=1e-6)
        self.register_buffer("liger_rms_weight", torch.ones(hidden))

    def forward(self, dy):
        with self._retaining_graph():
            return _backward_from(self.llama_rms(self.x), dy, self._kept)


# -- layer_norm (benchmark_layer_norm.py at b5672a15): x (M=4096, N) float32, torch.nn.LayerNorm ------------------

class LayerNormBench(_RetainsGraph):
    """``torch.nn.LayerNorm(N, eps=1e-6)`` on a float32 ``x``; the unused ``LigerLayerNorm(hidden_size=N)`` holds a
    float32 weight (ones) and bias (zeros) of N each."""

    def __init__(self, rows: int, hidden: int):
        super().__init__()
        self.x = nn.Parameter(torch.randn(rows, hidden))
        self.torch_ln = nn.LayerNorm(hidden, eps=1e-6)
        self.register_buffer("liger_ln_weight", torch.ones(hidden))
        self.register_buffer("liger_ln_bias", torch.zeros(hidden))

    def forward(self, dy):
        with self._retaining_graph():
            return _backward_from(self.torch_ln(self.x), dy, self._kept)


# -- group_norm (benchmark_group_norm.py at dea3a772): x (M=128, C, H=512) float32, torch.nn.GroupNorm ------------

class GroupNormBench(_RetainsGraph):
    """``torch.nn.GroupNorm(C // 4, C, eps=1e-6)`` on a float32 ``x``; the unused
    ``LigerGroupNorm(num_channels=C, num_groups=C // 4)`` holds a float32 weight (ones) and bias (zeros) of C each."""

    def __init__(self, rows: int, channels: int, length: int, per_group: int):
        super().__init__()
        self.x = nn.Parameter(torch.randn(rows, channels, length))
        self.torch_gn = nn.GroupNorm(channels // per_group, channels, eps=1e-6)
        self.register_buffer("liger_gn_weight", torch.ones(channels))
        self.register_buffer("liger_gn_bias", torch.zeros(channels))

    def forward(self, dy):
        with self._retaining_graph():
            return _backward_from(self.torch_gn(self.x), dy, self._kept)


# -- swiglu / geglu (benchmark_swiglu.py, benchmark_geglu.py at b5672a15): transformers' LlamaMLP in bfloat16 -------

class LlamaMLPBench(_RetainsGraph):
    """``LlamaMLP(LlamaConfig(hidden_size, intermediate_size, hidden_act)).to(bfloat16)`` on a bfloat16
    ``x = torch.randn(B, T, hidden_size, requires_grad=True)``; ``y.backward(torch.randn_like(y), retain_graph=True)``."""

    def __init__(self, batch: int, seq: int, hidden: int, intermediate: int, act: str):
        super().__init__()
        self.x = nn.Parameter(torch.randn(batch, seq, hidden, dtype=torch.bfloat16))
        config = LlamaConfig(hidden_size=hidden, intermediate_size=intermediate, hidden_act=act)
        self.layer = LlamaMLP(config).to(torch.bfloat16)

    def forward(self, *_):
        with self._retaining_graph():
            return _backward_from(self.layer(self.x), None, self._kept)


# -- fused_linear_cross_entropy (benchmark_fused_linear_cross_entropy.py at 90fb5e4a): H=4096, V=128256, bf16 ------

class LMHeadCEBench(nn.Module):
    """The script's ``TorchLMHeadCE``: ``nn.Linear(H, V, bias=False, dtype=bfloat16)`` then
    ``CrossEntropyLoss(ignore_index=-100, reduction="mean")`` on the bfloat16 logits, of a bfloat16
    ``_input = torch.randn(BT, H, requires_grad=True)``; ``y.backward()``. The unused ``LigerLMHeadCE`` holds its own
    bfloat16 ``[V, H]`` linear weight."""

    def __init__(self, bt: int, hidden: int, vocab: int):
        super().__init__()
        self.input = nn.Parameter(torch.randn(bt, hidden, dtype=torch.bfloat16))
        self.lin = nn.Linear(hidden, vocab, bias=False, dtype=torch.bfloat16)
        self.ce_loss = nn.CrossEntropyLoss(ignore_index=-100, reduction="mean")
        self.register_buffer("liger_lin_weight", torch.empty(vocab, hidden, dtype=torch.bfloat16))

    def forward(self, target):
        return self.ce_loss(self.lin(self.input), target)


# -- the factories the rows name (one per benchmarked size) --------------------------------------------------------

def _factories():
    made = {}
    for vocab in (4096, 8192, 16384, 32768, 65536, 131072):
        made[f"cross_entropy_v{vocab}"] = lambda vocab=vocab: CrossEntropyBench(8 * 2048, vocab)
    for hidden in (1024, 2048, 4096, 8192, 16384, 32768):
        made[f"rms_norm_h{hidden}"] = lambda hidden=hidden: RMSNormBench(2048, hidden)
    for hidden in (1024, 2048, 4096, 8192, 16384):
        made[f"layer_norm_n{hidden}"] = lambda hidden=hidden: LayerNormBench(4096, hidden)
    for seq in (1024, 2048, 4096, 8192):
        made[f"swiglu_t{seq}"] = lambda seq=seq: LlamaMLPBench(4, seq, 4096, 11008, "silu")
        made[f"geglu_t{seq}"] = lambda seq=seq: LlamaMLPBench(8, seq, 4096, 11008, "gelu_pytorch_tanh")
    for channels in (32, 64, 128, 256, 512, 1024, 2048):
        made[f"group_norm_c{channels}"] = lambda channels=channels: GroupNormBench(128, channels, 512, 4)
    for bt in (4096, 8192, 16384, 32768):
        made[f"fused_linear_cross_entropy_bt{bt}"] = lambda bt=bt: LMHeadCEBench(bt, 4096, 128256)
    return made


globals().update(_factories())
