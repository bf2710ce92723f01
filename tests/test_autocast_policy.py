"""The CUDA autocast policy tables, against the installed torch (dispatcher, header, real kernels)."""

import functools
import json
import os
import re
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from memgraph.facts.autocast_policy import (
    BANNED_OPS,
    FP32_OPS,
    FP32_SET_OPT_DTYPE_OPS,
    LOWER_PRECISION_OPS,
    PROMOTE_OPS,
    REGISTERED_OVERLOADS,
    autocast_kind,
    autocast_policy,
)
from memgraph.trace.emulate.autocast_emulation import AutocastStats, autocast_region


def test_kinds():
    for op in ("mm", "addmm", "bmm", "matmul", "linear", "conv2d", "baddbmm", "_convolution",
               "scaled_dot_product_attention", "prelu", "einsum", "cudnn_convolution"):
        assert autocast_kind(op) == "lower", op
    for op in ("softmax", "log_softmax", "layer_norm", "group_norm", "nll_loss", "exp", "pow",
               "sum", "cumsum", "norm", "binary_cross_entropy_with_logits", "mse_loss", "logsumexp"):
        assert autocast_kind(op) == "fp32", op
    # rms_norm joined the fp32 list in torch 2.12 (the 2.11.0 wheel's autocast_mode.h does not list it)
    assert autocast_kind("rms_norm") == ("fp32" if torch.__version__ >= (2, 12) else "none")
    for op in ("addcdiv", "addcmul", "index_put", "scatter_add", "atan2", "tensordot"):
        assert autocast_kind(op) == "promote", op
    # CUDA autocast has no kernel for these (cat/stack/index_copy promote only on CPU; cross_entropy
    # decomposes into log_softmax + nll_loss, both fp32; batch_norm is left alone)
    for op in ("cat", "stack", "index_copy", "cross_entropy_loss", "batch_norm", "add", "relu", "not_an_op"):
        assert autocast_kind(op) == "none", op
    assert autocast_kind("binary_cross_entropy") == "none" and "binary_cross_entropy" in BANNED_OPS
    assert autocast_policy("binary_cross_entropy") == "banned"


def test_name_forms_and_overloads():
    assert autocast_kind("aten::mm") == autocast_kind("aten.mm.default") == autocast_kind(torch.ops.aten.mm.default) == "lower"
    assert autocast_kind(torch.ops.aten.softmax) == "fp32"
    assert autocast_policy("aten::softmax.int") == "fp32_set_opt_dtype"
    assert autocast_policy("aten.softmax.Dimname") is None  # only softmax.int is registered
    assert autocast_policy("aten::norm.Scalar") == "fp32_append_dtype"
    assert autocast_policy("aten::norm.ScalarOpt_dtype") is None  # explicit dtype: left alone
    assert autocast_policy("aten.sum.dim_IntList") == "fp32_set_opt_dtype"
    assert autocast_policy("aten.conv_transpose2d.input") == "lower_precision_fp"
    assert "softmax" in FP32_SET_OPT_DTYPE_OPS and "softmax" in FP32_OPS


def test_sets_are_disjoint():
    assert not (LOWER_PRECISION_OPS & FP32_OPS)
    assert not (LOWER_PRECISION_OPS & PROMOTE_OPS)
    assert not (FP32_OPS & PROMOTE_OPS)


def test_matches_installed_torch_dispatcher():
    """Every CUDA autocast kernel the installed torch registers is in the tables, and nothing else."""
    live = {
        op for op in torch._C._dispatch_get_all_op_names()
        if torch._C._dispatch_has_kernel_for_dispatch_key(op, "AutocastCUDA")
    }
    assert live == set(REGISTERED_OVERLOADS)


def _header_macro(text, name):
    m = re.search(rf"#define {name}\(_\)(.*?)(?:\n\s*\n|#define)", text, re.S)
    return m.group(1)


def test_matches_installed_autocast_header():
    header = os.path.join(os.path.dirname(torch.__file__), "include", "ATen", "autocast_mode.h")
    if not os.path.exists(header):
        pytest.skip("torch wheel ships no autocast_mode.h")
    with open(header) as f:
        text = f.read()

    def ops(name):
        return set(re.findall(r"_\(\s*([A-Za-z0-9_]+)", _header_macro(text, name)))

    assert ops("AT_FORALL_LOWER_PRECISION_FP") == LOWER_PRECISION_OPS - {"cudnn_convolution", "cudnn_convolution_transpose"}
    assert ops("AT_FORALL_FP32") | ops("AT_FORALL_FP32_SET_OPT_DTYPE") | {"norm"} == FP32_OPS
    assert ops("AT_FORALL_PROMOTE") == PROMOTE_OPS


# -- the emulation against the real AutocastCUDA kernels ---------------------------------------------
# Expressions of each policy kind; a: float32, h: the autocast dtype, d: float64, idx: int64. (The
# weight-cast cache is checked by hand in tests/test_precision_emulation.py: cached_cast runs the copy
# of a leaf that requires grad under autograd, which reaches for a CUDA device guard on fake tensors.)
AUTOCAST_CASES = {
    # lower_precision_fp: float32 arguments cast down, the op runs in the autocast dtype
    "mm": "torch.mm(a, a)", "matmul": "a @ a", "bmm": "torch.bmm(a3, a3)", "baddbmm": "torch.baddbmm(a3, a3, a3)",
    "addmm": "torch.addmm(a, a, a)", "linear": "F.linear(a, a)", "conv2d": "F.conv2d(img, kernel)",
    "prelu": "F.prelu(a, w1)", "einsum": "torch.einsum('ij,jk->ik', a, a)", "sdpa": "F.scaled_dot_product_attention(q, q, q)",
    # fp32: low-precision arguments cast up; fp32_set_opt_dtype: dtype=float32 passed, no copy for sum/cumsum
    "softmax": "torch.softmax(h, -1)", "F.softmax": "F.softmax(h, -1)", "log_softmax": "torch.log_softmax(h, -1)",
    "softmax_explicit_dtype": "torch.softmax(h, -1, dtype=h.dtype)", "layer_norm": "F.layer_norm(h, (8,))",
    "group_norm": "F.group_norm(img_h, 1)", "rms_norm": "F.rms_norm(h, (8,))", "exp": "torch.exp(h)",
    "pow": "h ** 2", "sum": "h.sum()", "cumsum": "torch.cumsum(h, 0)", "norm": "torch.norm(h)",
    "mse_loss": "F.mse_loss(h, h)", "bce_with_logits": "F.binary_cross_entropy_with_logits(h, h)",
    "logsumexp": "torch.logsumexp(h, 0)", "nll_loss": "F.nll_loss(h, idx)", "cross_entropy": "F.cross_entropy(h, idx)",
    # promote: cast to the widest floating type among the arguments
    "addcmul": "torch.addcmul(h, a, h)", "addcdiv": "torch.addcdiv(h, h, a)", "atan2": "torch.atan2(h, a)",
    # no autocast kernel on CUDA: ordinary type promotion, no casts
    "cat": "torch.cat([h, h])", "cat_mixed": "torch.cat([h, a])", "stack": "torch.stack([h, h])", "add": "h + a",
    "relu": "torch.relu(h)", "gelu": "F.gelu(h)", "silu": "F.silu(h)",
    # float64 is never autocast
    "mm_float64": "torch.mm(d, d)",
}
# torch.empty, not randn: a random generator reaches for a CUDA device guard, which aborts a CPU-only build.
AUTOCAST_SETUP = """
a = torch.empty(8, 8, device=DEV)
h = torch.empty(8, 8, device=DEV, dtype=LOW)
d = torch.empty(8, 8, device=DEV, dtype=torch.float64)
a3 = torch.empty(2, 8, 8, device=DEV)
q = torch.empty(1, 2, 8, 8, device=DEV)
img = torch.empty(1, 3, 8, 8, device=DEV)
img_h = torch.empty(1, 4, 8, 8, device=DEV, dtype=LOW)
kernel = torch.empty(4, 3, 3, 3, device=DEV)
w1 = torch.empty(1, device=DEV)
idx = torch.zeros(8, dtype=torch.long, device=DEV)
"""
# Records what each expression produced and every cast (aten._to_copy) below the autocast layer.
CAST_RECORDER = """
from torch.utils._python_dispatch import TorchDispatchMode

def short(dtype):
    return str(dtype).removeprefix("torch.")

class Casts(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is torch.ops.aten._to_copy.default:
            self.seen.append(f"{short(args[0].dtype)}->{short(out.dtype)}")
        return out

def run_cases(cases, ns):
    out = {}
    for name, expr in cases.items():
        with Casts() as casts:
            result = eval(expr, ns)
        out[name] = [short(result.dtype), casts.seen]
    return out
"""
# In a subprocess: a CPU-only build may abort the process if an op reaches for a CUDA device guard.
REAL_AUTOCAST = CAST_RECORDER + """
import json, sys
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode

cases, setup, got = json.loads(sys.argv[1]), sys.argv[2], {}
for dtype in sys.argv[3:]:
    low = getattr(torch, dtype)
    with FakeTensorMode(), torch.no_grad():  # autograd's copy would reach for a CUDA device guard
        ns = {"torch": torch, "F": F, "DEV": "cuda", "LOW": low}
        exec(setup, ns)
        torch.set_autocast_enabled("cuda", True)  # torch.autocast("cuda") refuses without a GPU: set it by hand
        torch.set_autocast_dtype("cuda", low)
        torch.autocast_increment_nesting()
        got[dtype] = run_cases(cases, ns)
        torch.autocast_decrement_nesting()
        torch.set_autocast_enabled("cuda", False)
print(json.dumps(got))
"""


FAKE_CUDA_PROBE = """
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
with FakeTensorMode():
    torch.empty(1, device="cuda")
"""


AUTOCAST_DTYPES = ("bfloat16", "float16")


@functools.lru_cache(maxsize=1)
def _real_cuda_autocast() -> dict:
    """{dtype: {case: [result dtype, casts]}} from one subprocess for both autocast dtypes."""
    args = [sys.executable, "-c", "import torch\n" + REAL_AUTOCAST, json.dumps(AUTOCAST_CASES), AUTOCAST_SETUP,
            *AUTOCAST_DTYPES]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        probe = subprocess.run([sys.executable, "-c", FAKE_CUDA_PROBE], capture_output=True, text=True, timeout=300)
        if probe.returncode != 0:  # this torch build cannot make fake CUDA tensors at all
            pytest.skip(f"fake CUDA tensors unavailable here: {probe.stderr[-300:]}")
        pytest.fail(f"the real-autocast run failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _emulated_autocast(dtype: str) -> dict:
    ns = {"torch": torch, "F": F, "DEV": "meta", "LOW": getattr(torch, dtype)}
    exec(CAST_RECORDER, ns)
    exec(AUTOCAST_SETUP, ns)
    with torch.no_grad(), autocast_region(AutocastStats(getattr(torch, dtype))):
        return ns["run_cases"](AUTOCAST_CASES, ns)


@pytest.mark.parametrize("dtype", AUTOCAST_DTYPES)
def test_emulation_matches_the_real_cuda_autocast(dtype):
    """memgraph's autocast emulation on meta makes the casts the real AutocastCUDA kernels make.

    The real side runs the installed torch's AutocastCUDA kernels on fake CUDA tensors (no GPU
    needed); the emulated side runs the same expressions on meta under ``autocast_region``. Both
    record each result's dtype and every ``aten._to_copy`` below the autocast layer: those copies
    are the memory autocast costs.
    """
    real, emulated = _real_cuda_autocast()[dtype], _emulated_autocast(dtype)
    if torch.__version__ < (2, 12):
        # torch 2.11 has no autocast kernel for rms_norm: on CUDA it is one fused kernel that makes no copies,
        # while on meta it decomposes with float32 copies of its own. A known difference of torch < 2.12 only.
        real.pop("rms_norm"), emulated.pop("rms_norm")
    assert emulated == real
    # a sanity anchor written by hand, so the comparison cannot pass on two empty sides
    assert real["mm"] == [dtype, ["float32->" + dtype] * 2]  # lower: both arguments cast down
    assert real["layer_norm"] == ["float32", [dtype + "->float32"]]  # fp32: cast up
    assert real["addcmul"] == ["float32", [dtype + "->float32"] * 2]  # promote to the widest (float32)
    assert real["cat"] == [dtype, []]  # not autocast on CUDA
    # softmax (fp32_set_opt_dtype): a float16 input runs _softmax(half_to_float=True) without a float32
    # copy; bfloat16 has no such kernel and is copied to float32 first (SoftMax.cpp)
    assert real["softmax"] == ["float32", [] if dtype == "float16" else ["bfloat16->float32"]]
