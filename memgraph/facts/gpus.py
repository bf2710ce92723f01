"""A small catalog of NVIDIA GPUs: memory capacity, compute capability and the
fixed, non-tensor memory a PyTorch process holds on them.

What the memory numbers mean
----------------------------
Two "totals" exist for every board and they differ by a few hundred MiB:

``nvml_total_bytes``
    The frame-buffer size NVML reports, i.e. the right-hand number of
    ``nvidia-smi``'s ``Memory-Usage`` column (``0MiB / 81559MiB``). Newer
    drivers print a separate ``Reserved`` row under ``nvidia-smi -q``; that
    reservation (driver, ECC bookkeeping) is *inside* this number and can
    never be allocated.

``capacity_bytes``
    What CUDA says the process can use at most: ``cudaMemGetInfo``'s total,
    which is also ``cudaDeviceProp::totalGlobalMem`` (``deviceQuery``'s
    "Total amount of global memory"), ``torch.cuda.get_device_properties(i)
    .total_memory`` and the "GPU 0 has a total capacity of X GiB" in PyTorch's
    out-of-memory message. This is the number an OOM check must compare
    against. It is ``nvml_total_bytes`` minus the driver reservation, and it
    moves by tens of MiB between driver versions (e.g. H100 80GB HBM3:
    81079-81106 MiB across drivers 12.4-13.0), so every entry names the
    public ``deviceQuery``/``torch`` output it was copied from. Where only
    ``torch``'s ``total_memory=...MB`` print was found, the figure is that
    MiB count times 2**20 (exact to within 1 MiB, because torch floors).

Neither number is what a training step can fill with tensors: the CUDA
context (driver state plus the lazily loaded kernel images of cuBLAS, cuDNN and
PyTorch itself) takes memory *outside* the caching allocator. That is
``cuda_context_bytes`` -- an **estimate** for lazy module loading and the board's default CUDA
version; :func:`cuda_context_for` gives it with its range for any CUDA major and loading mode.

cuBLAS workspaces, by contrast, *are* caching-allocator memory: see
:func:`cublas_workspace_bytes_for`.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from memgraph.facts.gpu_boards import BOARDS, DOUBTFUL
from memgraph.facts.sdpa_backend import FLASH_SM_RANGE
from memgraph.units import MiB

CONTEXT_ESTIMATE_NOTE = (
    "the CUDA context is an estimate, not a measurement: the memory nvidia-smi shows for the process beyond "
    "torch.cuda.memory_reserved() once a training step has run (driver state + the kernel images the step loaded "
    "for libtorch_cuda, cuBLAS and cuDNN); memgraph/facts/gpus.py cuda_context_for() gives each figure's sources. "
    "Pass --context-bytes to use a figure measured on your own stack."
)

# -- The CUDA context and loaded kernel images: by architecture, CUDA major version and module loading --------
#
# Public figures (what each family's expected value and range below are built from):
#   [a] pytorch/pytorch PR #86509 (torch 1.13, CUDA 11.7, one elementwise kernel, cudaMemGetInfo used bytes):
#       287,047,680 B with CUDA_MODULE_LOADING=LAZY, 666,632,192 B without (eager): eager loading of
#       libtorch_cuda's kernel images alone cost 379,584,512 B (362 MiB) more, before any cuBLAS/cuDNN kernel.
#   [b] ptrblck in pytorch/pytorch #107667 (2023, CUDA >= 11.7, lazy): "~300MB"; #109888: "around 400MB";
#       before CUDA 11.7 (everything loaded eagerly) "took >1000MB".
#   [c] invoke-ai/InvokeAI #9413: bare context 256 MiB on an RTX 3090 (sm86), torch 2.7.1+cu128, lazy.
#   [d] unslothai/unsloth-zoo PR #1053: 426 MiB on an RTX 6000 Ada (sm89), torch 2.10+cu130, lazy.
#   [e] ggml-org/llama.cpp PR #23604: a bare context (cudaMemGetInfo, no PyTorch kernels) takes 555 MiB on an
#       RTX PRO 6000 Blackwell and 107 MiB on an RTX 4060 Ti: the context grows with the SM count.
#   [f] LMCache/LMCache #4019 (2026): ~616 MiB held by a context that cudaHostRegister alone created on cuda:0
#       of an 8-GPU data-centre node (board not named), before any kernel ran.
#   [g] pytorch/pytorch #12873 (CUDA 10, eager): creating a cuDNN handle loads ~750 MB of kernels, PyTorch's
#       own ~1 GB, "2GB+" in all; pytorch/pytorch #55277: 1687 MB on an RTX 3090 with torch 1.8.2+cu111 (eager).
#   A training step then loads the GEMM (cuBLAS/cuBLASLt), attention, norm and optimizer kernels it runs:
#   ~100-300 MiB more under lazy loading (the gap between [a]/[c] and the 400-600 MiB of [b]/[d]/[f]).
# No public source separates CUDA 12 from CUDA 13 contexts on the same board (the figures above span CUDA 11.7
# to 13.0 and fall inside the ranges below), so the figures are the same for both majors; what the major
# version changes is which boards it runs on: CUDA 13 dropped offline compilation and library support for
# compute capability < 7.5 (Maxwell, Pascal, Volta; NVIDIA CUDA 12.9/13.0 release notes "Deprecated
# Architectures", pytorch/pytorch #157517, #190385), so a V100 runs only PyTorch's CUDA 12 (cu126) wheels.

CUDA_MAJORS = (12, 13)
# CUDA_MODULE_LOADING=LAZY / EAGER. Lazy is the default: torch sets LAZY when the variable is unset since 1.13
# (pytorch/pytorch PR #86509, torch/cuda/__init__.py), and CUDA itself since 12.2 on Linux (CUDA Programming
# Guide, "Lazy Loading", change history).
MODULE_LOADINGS = ("lazy", "eager")
# The CUDA major of the torch wheel PyPI serves (the pinned torch 2.13.0): PyPI has carried the CUDA 13.0 build
# since torch 2.12 ("CUDA 13 is now the default version installed", googlecolab/colabtools #5982, 2026-05;
# pytorch/pytorch PR #187130 "latest torch is 13.0 by default"; #190385 keeps 13.x as the PyPI default for 2.14).
PYPI_CUDA_MAJOR = 13
CUDA13_MIN_CC = (7, 5)  # CUDA 13 supports compute capability 7.5 (Turing) and newer only (see above)
# Eager loading adds every kernel image of the loaded libraries: at least [a]'s 362 MiB (libtorch_cuda alone),
# ~1 GiB as expected (PyTorch's own kernels, [g]), and up to 2 GiB more with cuDNN's and cuBLAS's ([g]).
_EAGER_LOW_EXTRA = 379_584_512  # [a]: 666,632,192 - 287,047,680
_EAGER_EXPECTED_EXTRA = 1024 * MiB
_EAGER_HIGH_EXTRA = 2048 * MiB

# (first compute capability of the family, label, lazy expected MiB, lazy low MiB, lazy high MiB, sources)
_LAZY_CONTEXT = (
    ((9, 0), "sm90+ (Hopper, Blackwell)", 600, 450, 900,
     "bare context 555 MiB (RTX PRO 6000 Blackwell) [e] to ~616 MiB (8-GPU data-centre node) [f], + 100-300 MiB of step kernels"),
    ((8, 0), "sm80-sm89 (Ampere, Ada)", 500, 256, 750,
     "bare context 256 MiB (RTX 3090, cu128) [c] to 426 MiB (RTX 6000 Ada, cu130) [d], + 100-300 MiB of step kernels"),
    ((0, 0), "sm70-sm75 (Volta, Turing)", 400, 256, 650,
     "bare context ~274-400 MiB [a][b], + 100-250 MiB of step kernels"),
)


@dataclass(frozen=True)
class ContextEstimate:
    """The CUDA context and loaded kernel images of one training process: an expected value and a range."""

    expected_bytes: int
    low_bytes: int
    high_bytes: int
    arch: str  # "sm90"
    family: str  # "sm90+ (Hopper, Blackwell)"
    cuda_major: int
    module_loading: str  # "lazy" | "eager"
    source: str  # the public figures it rests on (see the comment above cuda_context_for)

    def assumption(self) -> str:
        """One line: what the figure assumed."""
        return (f"{self.arch}, CUDA {self.cuda_major}, {self.module_loading} module loading "
                f"(CUDA_MODULE_LOADING={self.module_loading.upper()})")


def default_cuda_major(cc: tuple[int, int]) -> int:
    """The CUDA major a pip-installed torch 2.13 runs with on this board: the PyPI wheel's (13), or 12 where
    CUDA 13 cannot run (compute capability < 7.5: PyTorch's cu126 wheels are the ones that still carry sm70)."""
    return PYPI_CUDA_MAJOR if tuple(cc) >= CUDA13_MIN_CC else 12


def cuda_context_for(cc: tuple[int, int], cuda_major: int | None = None, module_loading: str = "lazy") -> ContextEstimate:
    """Expected CUDA context + kernel images after a training step, with its range, for this board.

    ``cuda_major`` None: :func:`default_cuda_major`. Raises ``ValueError`` for a CUDA major that cannot run
    on ``cc`` or an unknown major / loading mode. Figures: see the sources [a]-[g] above; never fitted.
    """
    cc = tuple(cc)
    major = default_cuda_major(cc) if cuda_major is None else int(cuda_major)
    if major not in CUDA_MAJORS:
        raise ValueError(f"CUDA major version {cuda_major!r} is not one of {', '.join(map(str, CUDA_MAJORS))}")
    if major >= 13 and cc < CUDA13_MIN_CC:
        raise ValueError(f"CUDA {major} does not support compute capability {cc[0]}.{cc[1]} (it needs >= 7.5)")
    if module_loading not in MODULE_LOADINGS:
        raise ValueError(f"module loading {module_loading!r} is not one of {', '.join(MODULE_LOADINGS)}")
    first, family, expected, low, high, why = next(row for row in _LAZY_CONTEXT if cc >= row[0])
    expected, low, high = expected * MiB, low * MiB, high * MiB
    source = f"CUDA_MODULE_LOADING=LAZY, {family}: {why}"
    if module_loading == "eager":
        expected, low, high = expected + _EAGER_EXPECTED_EXTRA, low + _EAGER_LOW_EXTRA, high + _EAGER_HIGH_EXTRA
        source = (f"CUDA_MODULE_LOADING=EAGER, {family}: the lazy figure ({why}) + every kernel image of the "
                  "loaded libraries: +362 MiB for libtorch_cuda alone [a] to +2 GiB with cuDNN and cuBLAS [g]")
    return ContextEstimate(expected, low, high, f"sm{cc[0]}{cc[1]}", family, major, module_loading,
                           source + " (sources in memgraph/facts/gpus.py)")


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model. See the module docstring for what each memory figure means."""

    key: str
    name: str  # torch.cuda.get_device_name() / nvidia-smi --query-gpu=name
    capacity_bytes: int  # cudaMemGetInfo total == torch total_memory (driver-dependent, see source)
    nvml_total_bytes: int  # nvidia-smi "Memory-Usage" total
    compute_capability: tuple[int, int]
    bf16_supported: bool  # native bf16: torch.cuda.is_bf16_supported(including_emulation=False)
    flash_attention_supported: bool  # PyTorch's flash SDPA kernel can run on this arch
    cuda_context_bytes: int  # ESTIMATE of non-allocator memory (context + kernel images); default cuda_context_for(cc)
    cublas_workspace_bytes: int  # per (cuBLAS handle, stream); goes through the caching allocator
    cublaslt_workspace_bytes: int  # per (cuBLASLt handle, stream); goes through the caching allocator
    source: str  # where capacity_bytes / nvml_total_bytes come from

    @property
    def allocator_budget_bytes(self) -> int:
        """What the caching allocator can reserve at most: capacity minus the (estimated) context."""
        return self.capacity_bytes - self.cuda_context_bytes

    @property
    def driver_reserved_bytes(self) -> int:
        """Frame buffer NVML counts but CUDA never hands out (nvml total - CUDA total)."""
        return self.nvml_total_bytes - self.capacity_bytes


# ---------------------------------------------------------------------------------------------
# Derived rules (mirroring PyTorch source).


def process_context(gpu: "GpuSpec", cuda_major: int | str | None = None, module_loading: str = "lazy",
                    context_bytes: int | None = None) -> tuple[ContextEstimate, int]:
    """The context estimate for ``gpu`` and the bytes a prediction counts for it: ``context_bytes``
    (``--context-bytes``, measured by the user) when given, else the estimate's expected value."""
    estimate = cuda_context_for(gpu.compute_capability, cuda_major, module_loading)
    return estimate, estimate.expected_bytes if context_bytes is None else context_bytes


def flash_attention_hardware_supported(cc: tuple[int, int]) -> bool:
    """PyTorch's flash SDPA kernel runs on sm80..sm121 inclusive.

    Mirrors ``check_flash_attention_hardware_support`` in
    aten/src/ATen/native/transformers/cuda/sdp_utils.cpp (``check_sm_version<sm80, sm121>``).
    """
    lo, hi = FLASH_SM_RANGE
    return lo <= tuple(cc) <= hi


def native_bf16_supported(cc: tuple[int, int]) -> bool:
    """``torch.cuda.is_bf16_supported(including_emulation=False)``: ``major >= 8``.

    (torch/cuda/__init__.py ``is_bf16_supported``; with the default ``including_emulation=True``
    it also answers True on sm70/sm75 because a bf16 tensor *can* be created there, but the math
    is emulated and the flash kernel still refuses bf16 below sm80.)
    """
    return cc[0] >= 8


def cublas_workspace_bytes_for(cc: tuple[int, int], cublas_workspace_config: str | None = None) -> int:
    """Size of the cuBLAS workspace PyTorch allocates per (cuBLAS handle, CUDA stream).

    Mirrors ``parseChosenWorkspaceSize`` in aten/src/ATen/cuda/CublasHandlePool.cpp:
    ``CUBLAS_WORKSPACE_CONFIG=":SIZE_KiB:COUNT[:SIZE:COUNT...]"`` gives sum(SIZE*1024*COUNT);
    unset, the default is ``:4096:8`` = 32 MiB on sm90 (``major == 9 && minor == 0`` only) and
    ``:4096:2:16:8`` = 8 MiB + 128 KiB = 8,519,680 bytes everywhere else.

    The workspace comes from ``getNewWorkspace()`` =
    ``c10::cuda::CUDACachingAllocator::get()->allocate(...)``, so it is counted by
    ``torch.cuda.memory_allocated()`` *and* ``memory_reserved()``, and it is never freed while the
    handle/stream pair lives (``cublas_handle_stream_to_workspace`` map; only
    ``torch._C._cuda_clearCublasWorkspaces()`` drops it). Handles are per thread
    (``DeviceThreadHandlePool``), and autograd runs backward on its own device thread, so a
    training step usually ends up with two of these (forward thread + backward thread).
    """
    if cublas_workspace_config:
        pairs = re.findall(r":([0-9]+):([0-9]+)", cublas_workspace_config)
        if pairs:
            return sum(int(size) * 1024 * int(count) for size, count in pairs)
        # unparsable -> PyTorch warns and falls back to the default below
    if tuple(cc) == (9, 0):
        return 4096 * 8 * 1024
    return 4096 * 1024 * 2 + 16 * 1024 * 8


def cublaslt_workspace_bytes_for(cublaslt_workspace_size_kib: int | None = None) -> int:
    """cuBLASLt workspace per (handle, stream): ``CUBLASLT_WORKSPACE_SIZE`` KiB, default 1024 KiB.

    Mirrors ``parseCUDABlasLtWorkspaceSize`` / ``getNewCUDABlasLtWorkspace`` in
    CublasHandlePool.cpp (also a caching-allocator allocation). Unless
    ``TORCH_CUBLASLT_UNIFIED_WORKSPACE=1`` it is a separate buffer from the cuBLAS workspace.
    A 1 MiB request lands in the allocator's small pool (<= 1 MiB), i.e. inside a 2 MiB segment.
    """
    kib = 1024 if cublaslt_workspace_size_kib is None else cublaslt_workspace_size_kib
    return kib * 1024


def _context_estimate(cc: tuple[int, int]) -> int:
    """The default context estimate (lazy loading, the board's default CUDA major): see cuda_context_for."""
    return cuda_context_for(cc).expected_bytes


def _spec(key, name, capacity_bytes, nvml_total_mib, cc, source) -> GpuSpec:
    return GpuSpec(
        key=key,
        name=name,
        capacity_bytes=capacity_bytes,
        nvml_total_bytes=nvml_total_mib * MiB,
        compute_capability=cc,
        bf16_supported=native_bf16_supported(cc),
        flash_attention_supported=flash_attention_hardware_supported(cc),
        cuda_context_bytes=_context_estimate(cc),
        cublas_workspace_bytes=cublas_workspace_bytes_for(cc),
        cublaslt_workspace_bytes=cublaslt_workspace_bytes_for(),
        source=source,
    )


# Sources are public deviceQuery / torch.cuda.get_device_properties / nvidia-smi outputs found in
# the stored GitHub corpus; "driver X" is the CUDA driver version printed with them.
_ENTRIES = (
    _spec(
        "v100-16gb", "Tesla V100-SXM2-16GB", 16945512448, 16384, (7, 0),
        "deviceQuery 'Tesla V100-SXM2-16GB': 16160 MBytes (16945512448 bytes) (drivers 9.0-10.2; "
        "torch prints total_memory=16160MB); nvidia-smi total 16384MiB on current drivers (older: 16160MiB)",
    ),
    _spec(
        "v100-32gb", "Tesla V100-SXM2-32GB", 34072559616, 32768, (7, 0),
        "deviceQuery 'Tesla V100-SXM2-32GB': 32494 MBytes (34072559616 bytes) (driver 12.9; "
        "32510-32511 MBytes on drivers 11.2-11.6); nvidia-smi total 32768MiB",
    ),
    _spec(
        "t4", "Tesla T4", 15843721216, 15360, (7, 5),
        "deviceQuery 'Tesla T4': 15110 MBytes (15843721216 bytes) (driver 11.0); torch total_memory "
        "15095-15109MB on Colab drivers; nvidia-smi total 15360MiB",
    ),
    _spec(
        "a10g", "NVIDIA A10G", 22587 * MiB, 23028, (8, 6),
        "torch _CudaDeviceProperties(name='NVIDIA A10G', total_memory=22587MB) (MiB, floored); "
        "nvidia-smi 'NVIDIA A10G' total 23028MiB",
    ),
    _spec(
        "l4", "NVIDIA L4", 23612293120, 23034, (8, 9),
        "deviceQuery 'NVIDIA L4': 22518 MBytes (23612293120 bytes) (driver 12.0); nvidia-smi total 23034MiB",
    ),
    _spec(
        "a100-40gb", "NVIDIA A100-SXM4-40GB", 42298834944, 40960, (8, 0),
        "deviceQuery 'NVIDIA A100-PCIE-40GB': 40339 MBytes (42298834944 bytes) (driver 12.2; 40338-40441 "
        "MBytes on drivers 12.0-13.0; SXM4 and PCIe 40GB have the same 40960MiB frame buffer); "
        "nvidia-smi total 40960MiB",
    ),
    _spec(
        "a100-80gb", "NVIDIA A100-SXM4-80GB", 84987740160, 81920, (8, 0),
        "deviceQuery 'NVIDIA A100-SXM4-80GB': 81051 MBytes (84987740160 bytes) (driver 12.2; 81158 MBytes "
        "(85100068864 bytes) on driver 12.5); nvidia-smi total 81920MiB",
    ),
    _spec(
        "h100-80gb", "NVIDIA H100 80GB HBM3", 85028896768, 81559, (9, 0),
        "deviceQuery 'NVIDIA H100 80GB HBM3': 81090 MBytes (85028896768 bytes) (driver 12.8; torch 2.7+cu128 "
        "prints total_memory=81089MB; 81079-81106 MBytes on drivers 12.4-13.0); nvidia-smi total 81559MiB",
    ),
    _spec(
        "h200", "NVIDIA H200", 143156 * MiB, 143771, (9, 0),
        "torch _CudaDeviceProperties(name='NVIDIA H200', total_memory=143156MB) (MiB, floored); "
        "nvidia-smi 'NVIDIA H200' total 143771MiB",
    ),
    _spec(
        "rtx-3090", "NVIDIA GeForce RTX 3090", 24259 * MiB, 24576, (8, 6),
        "torch _CudaDeviceProperties(name='NVIDIA GeForce RTX 3090', total_memory=24259MB) on Linux "
        "(MiB, floored); nvidia-smi total 24576MiB",
    ),
    _spec(
        "rtx-4090", "NVIDIA GeForce RTX 4090", 24207 * MiB, 24564, (8, 9),
        "TensorRT trtexec on 'NVIDIA GeForce RTX 4090': Device Global Memory 24207 MiB (= PyTorch OOM "
        "'total capacity of 23.64 GiB' seen on a 4090); deviceQuery ranges from 24081 MBytes (driver 13.0) "
        "to 24564 MBytes (driver 12.1); nvidia-smi total 24564MiB",
    ),
)

# The boards researched from public outputs (facts/gpu_boards.py), less the doubtful rows (gpu_boards.DOUBTFUL).
_ENTRIES = _ENTRIES + tuple(_spec(*row) for row in BOARDS if row[0] not in DOUBTFUL)

GPUS: dict[str, GpuSpec] = {spec.key: spec for spec in _ENTRIES}
DEFAULT_GPU = "h100-80gb"  # the target GPU when --gpu is not given

# Extra spellings accepted by get_gpu (besides each key and each device name).
ALIASES: dict[str, str] = {
    "h100-sxm": "h100-80gb",
    "h100-80gb-hbm3": "h100-80gb",
    "a100-80": "a100-80gb",
    "a100-40": "a100-40gb",
    "h200-141gb": "h200",
    "tesla-t4": "t4",
    "3090": "rtx-3090",
    "rtx3090": "rtx-3090",
    "4090": "rtx-4090",
    "rtx4090": "rtx-4090",
    "v100-16": "v100-16gb",
    "v100-32": "v100-32gb",
}


# Names that mean more than one board: refused with the choices, never silently one of them.
AMBIGUOUS: dict[str, tuple[str, ...]] = {
    "a100": ("a100-40gb", "a100-80gb"),
    "h100": ("h100-80gb", "h100-pcie"),
    "v100": ("v100-16gb", "v100-32gb"),
}


def _norm(text: str) -> str:
    return re.sub(r"[\s_]+", "-", text.strip().lower())


_LOOKUP: dict[str, str] = {}
for _spec_entry in _ENTRIES:
    _LOOKUP[_norm(_spec_entry.key)] = _spec_entry.key
    _LOOKUP[_norm(_spec_entry.name)] = _spec_entry.key
for _alias, _target in ALIASES.items():
    _LOOKUP[_norm(_alias)] = _target
del _spec_entry, _alias, _target


def get_gpu(key: str) -> GpuSpec:
    """Look a GPU up by key, alias or device name, case-insensitively.

    ``get_gpu("H100")`` -> the ``h100-80gb`` entry; ``get_gpu(torch.cuda.get_device_name())`` works
    for the listed boards. Unknown names raise ``KeyError`` listing the closest known spellings.
    """
    if not isinstance(key, str) or not key.isprintable():  # a pasted newline or tab is a mistake, not a name
        raise KeyError(f"GPU name {key!r} has control characters in it: pass the name alone (see 'memgraph gpus')")
    norm = _norm(key)
    if norm in _LOOKUP:
        return GPUS[_LOOKUP[norm]]
    base, at, capacity = key.rpartition("@")
    if at and base and capacity.isdigit():  # BASE@BYTES: a --gpu-memory board (with_capacity)
        return with_capacity(get_gpu(base), int(capacity))
    if norm in AMBIGUOUS:
        raise KeyError(f"GPU {key!r} names more than one board: pass one of {', '.join(AMBIGUOUS[norm])} "
                       "(or --gpu-memory SIZE for another)")
    close = difflib.get_close_matches(norm, list(_LOOKUP), n=5, cutoff=0.4)
    hint = f"; did you mean: {', '.join(close)}?" if close else ""
    raise KeyError(f"unknown GPU {key!r}{hint} (known: {', '.join(sorted(GPUS))})")


def with_capacity(base: GpuSpec, capacity_bytes: int) -> GpuSpec:
    """``base``'s architecture (compute capability, workspaces, context) with another CUDA total: a board the
    catalog lacks (``--gpu-memory``). Its key is ``BASE@BYTES``, which :func:`get_gpu` reads back; the catalog
    itself is not changed."""
    from dataclasses import replace

    base = GPUS[base.key.split("@")[0]]
    key = f"{base.key}@{capacity_bytes}"
    return replace(base, key=key, name=f"{base.name} architecture with {capacity_bytes / 2**30:.2f} GiB",
                   capacity_bytes=capacity_bytes, nvml_total_bytes=capacity_bytes,
                   source=f"--gpu-memory {capacity_bytes} on {base.key}'s architecture")

