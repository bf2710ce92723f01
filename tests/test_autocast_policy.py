import os
import re
import subprocess
import sys
import textwrap

import pytest
import torch

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


def test_kinds():
    for op in ("mm", "addmm", "bmm", "matmul", "linear", "conv2d", "baddbmm", "_convolution",
               "scaled_dot_product_attention", "prelu", "einsum", "cudnn_convolution"):
        assert autocast_kind(op) == "lower", op
    for op in ("softmax", "log_softmax", "layer_norm", "group_norm", "rms_norm", "nll_loss", "exp", "pow",
               "sum", "cumsum", "norm", "binary_cross_entropy_with_logits", "mse_loss", "logsumexp"):
        assert autocast_kind(op) == "fp32", op
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


def test_policies_on_fake_cuda_tensors():
    """Run the real AutocastCUDA kernels of the installed torch on fake CUDA tensors (no GPU needed).

    In a subprocess: a CPU-only build aborts the process if something reaches for a CUDA device guard.
    """
    code = textwrap.dedent("""
        import torch
        from torch._subclasses.fake_tensor import FakeTensorMode
        with FakeTensorMode(), torch.no_grad():
            a = torch.empty(8, 8, device="cuda")
            h = a.to(torch.bfloat16)
            torch.set_autocast_enabled("cuda", True)
            torch.set_autocast_dtype("cuda", torch.bfloat16)
            torch.autocast_increment_nesting()
            out = {
                "mm": torch.mm(a, a).dtype,
                "linear": torch.nn.functional.linear(a, a).dtype,
                "softmax": torch.softmax(h, -1).dtype,
                "softmax_explicit_dtype": torch.softmax(h, -1, dtype=torch.bfloat16).dtype,
                "layer_norm": torch.nn.functional.layer_norm(h, (8,)).dtype,
                "addcmul": torch.addcmul(h, a, h).dtype,
                "cat": torch.cat([h, h]).dtype,
            }
            torch.autocast_decrement_nesting()
            torch.set_autocast_enabled("cuda", False)
        print({k: str(v) for k, v in out.items()})
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        pytest.skip(f"fake CUDA tensors unavailable here: {proc.stderr[-300:]}")
    got = eval(proc.stdout.strip().splitlines()[-1])
    assert got == {
        "mm": "torch.bfloat16",  # lower
        "linear": "torch.bfloat16",  # lower
        "softmax": "torch.float32",  # fp32_set_opt_dtype
        "softmax_explicit_dtype": "torch.bfloat16",  # explicit dtype is respected
        "layer_norm": "torch.float32",  # fp32
        "addcmul": "torch.float32",  # promote to widest
        "cat": "torch.bfloat16",  # not autocast on CUDA: bf16 inputs stay bf16
    }
