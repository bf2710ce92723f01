"""More NVIDIA boards for the GPU catalog: CUDA total, nvidia-smi total and compute capability.

Each row of :data:`BOARDS` is ``(key, name, capacity_bytes, nvml_total_mib, (major, minor),
source)``, the argument order of ``memgraph.facts.gpus._spec``, which builds the catalog from them. The
two totals mean exactly what the ``gpus`` module docstring says:

``capacity_bytes``
    ``cudaMemGetInfo``'s total == ``cudaDeviceProp::totalGlobalMem`` == ``torch.cuda
    .get_device_properties(i).total_memory``. Copied from one of: a ``deviceQuery`` print
    ("Total amount of global memory: N MBytes (B bytes)", exact bytes); a torch
    ``_CudaDeviceProperties(... total_memory=NMB)`` print, which is ``totalGlobalMem / (1024ull *
    1024)`` in integer arithmetic (torch/csrc/cuda/Module.cpp, the ``__repr__`` bound in
    ``registerCudaDeviceProperties``), so the row stores ``N * MiB``: at most 1 MiB below the true
    value; a ComfyUI ``/system_stats`` ``vram_total``, which is ``torch.cuda.mem_get_info(dev)[1]``
    (comfy/model_management.py ``get_total_memory``,
    ``_, mem_total_cuda = torch.cuda.mem_get_info(dev)``), exact bytes; or ComfyUI's log line
    "Total VRAM N MB" (the same total / 2**20, printed with ``{:0.0f}``, i.e. rounded).
``nvml_total_mib``
    The right-hand number of nvidia-smi's ``Memory-Usage`` column (or ``memory.total`` of
    ``nvidia-smi --query-gpu``), in MiB.

Both totals depend on the driver (tens of MiB across versions, see ``gpus``) and, on GDDR6
boards, on the ECC mode: the driver takes the ECC check bits out of the frame buffer, so e.g. an
RTX A6000 or L40 shows 49140MiB with ECC off and 46068MiB with ECC on. Every row says which
driver and ECC state its figures were seen with where the public output shows it. In the Windows
(WDDM) outputs found the CUDA total is about the nvidia-smi total (RTX 3080: 10240 vs 10240 MiB,
RTX 5090: 32606.6 vs 32607, RTX A4000: 16379.1 vs 16376), while Linux outputs of the same boards
are a few hundred MiB lower; the rows are Linux figures unless the source says WINDOWS.

The figures come from public outputs found in the stored GitHub/web corpus (the ``search`` and
``find_string`` tools); each ``source`` names the output, the numbers as printed and where it was
seen. Compute capabilities are NVIDIA's "CUDA GPUs" table (developer.nvidia.com/cuda-gpus) and,
for boards that table does not list (H20, L40S), the ``major``/``minor`` of a torch print of
that board. Nothing here is derived by a factor; a board without a public CUDA total is not a row
but an entry of :data:`NOT_CATALOGUED` with the reason.
"""

from __future__ import annotations

from memgraph.units import MiB

# (key, name, capacity_bytes, nvml_total_mib, compute_capability, source)
BOARDS: tuple[tuple[str, str, int, int | None, tuple[int, int], str], ...] = (
    # ---- Ampere workstation / data centre (sm86, sm80) ------------------------------------------
    (
        "rtx-a6000", "NVIDIA RTX A6000", 48676 * MiB, 49140, (8, 6),
        "torch _CudaDeviceProperties(name='NVIDIA RTX A6000', major=8, minor=6, total_memory=48676MB, "
        "multi_processor_count=84) (pytorch/ao hqq prototype README; MiB, floored); nvidia-smi "
        "'NVIDIA RTX A6000 ... 27525MiB / 49140MiB' with ECC off (several issue/README tables); "
        "with ECC on nvidia-smi shows 46068MiB (thamada/gls RTX_A6000_x9_smi.py, driver 550.127.05)",
    ),
    (
        "rtx-a5000", "NVIDIA RTX A5000", 24138 * MiB, 24564, (8, 6),
        "torch _CudaDeviceProperties(name='NVIDIA RTX A5000', major=8, minor=6, total_memory=24138MB, "
        "multi_processor_count=64, L2_cache_size=6MB) (MiB, floored; 24114MB in another print); "
        "nvidia-smi 'NVIDIA RTX A5000 On ... 1MiB / 24564MiB' (ECC off)",
    ),
    (
        "a40", "NVIDIA A40", 47622258688, 46068, (8, 6),
        "cudaDeviceProp name b'NVIDIA A40' totalGlobalMem 47622258688, major 8 minor 6, ECCEnabled 1 "
        "(pyscf/gpu4pyscf issue #304); matches torch total_memory=45416MB; nvidia-smi 'NVIDIA A40 On "
        "... 1MiB / 46068MiB' with ECC on (thamada/nvidia-smi nvsim/A40x10_smi.py, driver 550.127.05); "
        "49140MiB with ECC off (a Windows WDDM table)",
    ),
    (
        "a10", "NVIDIA A10", 23609475072, 23028, (8, 6),
        "deviceQuery-style print 'NVIDIA A10' (driver/runtime 12.2/12.2, CC 8.6): 21.99 GBytes "
        "(23609475072 bytes) (aalanwyr/face2cuda step2cuda/README.md); NVML memoryInfo Total "
        "24146608128 = 23028 MiB (mayooot/detect-gpu issue #3, driver 535.129.03); nvidia-smi "
        "'A10: 23028MiB' (modal-labs/modal-client PR #2797)",
    ),
    (
        "a30", "NVIDIA A30", 25343295488, 24576, (8, 0),
        "deviceQuery 'NVIDIA A30' (driver/runtime 12.5/12.1, CC 8.0): 24169 MB (25,343,295,488 bytes) "
        "(a transcribed A30 spec sheet in the code corpus); nvidia-smi 'NVIDIA A30 Off ... 0MiB / "
        "24576MiB' on driver 575.64.03 (same figure in several 535+ tables). Driver 470.82.01 showed "
        "24258MiB (PaddleTS GPU install docs): like the A100 40GB (40536 -> 40960MiB) the nvidia-smi "
        "total grew with newer drivers. No deviceQuery and nvidia-smi pair from one machine was found",
    ),
    # ---- Ada (sm89) ------------------------------------------------------------------------------
    (
        "l40", "NVIDIA L40", 45457 * MiB, 46068, (8, 9),
        "ComfyUI log on Linux, pytorch 2.9.1+cu130: 'Total VRAM 45458 MB' (mem_get_info total, "
        "rounded) and 'comfy-aimdo inited for GPU: NVIDIA L40 (VRAM: 45457 MB)' (floored), "
        "'Device: cuda:0 NVIDIA L40 : cudaMallocAsync'; nvidia-smi 'NVIDIA L40 On ... 5MiB / "
        "46068MiB' with ECC on (49140MiB with ECC off)",
    ),
    (
        "l40s", "NVIDIA L40S", 47803596800, 46068, (8, 9),
        "deviceQuery 'NVIDIA L40S' (driver/runtime 12.4/12.4, CC 8.9): 45589 MBytes (47803596800 bytes) "
        "(a transcribed L40S spec sheet in the code corpus); torch prints total_memory=45589MB, "
        "major=8, minor=9 (k8s GPU-sharing blog); nvidia-smi --query-gpu 'NVIDIA L40S, 595.71.05, "
        "46068 MiB' (akash-network/provider-configs PR #99) with ECC on; Modal lists L40S 46068MiB",
    ),
    (
        "rtx-6000-ada", "NVIDIA RTX 6000 Ada Generation", 48622 * MiB, 49140, (8, 9),
        "torch 2.3.0+cu121 get_device_properties() = (name='NVIDIA RTX 6000 Ada Generation', major=8, "
        "minor=9, total_memory=48622MB, multi_processor_count=142) (MiB, floored); nvidia-smi "
        "'NVIDIA RTX 6000 Ada Gene... 12MiB / 49140MiB' (ECC off)",
    ),
    (
        "rtx-4080", "NVIDIA GeForce RTX 4080", 16049 * MiB, 16376, (8, 9),
        "torch _CudaDeviceProperties(name='NVIDIA GeForce RTX 4080', major=8, minor=9, "
        "total_memory=16049MB, multi_processor_count=76) (a setup guide; OS not stated; MiB, floored); "
        "nvidia-smi 'NVIDIA GeForce RTX 4080 Off ... 378MiB / 16376MiB'",
    ),
    (
        "rtx-4070-ti-super", "NVIDIA GeForce RTX 4070 Ti SUPER", 15934 * MiB, 16376, (8, 9),
        "torch 2.2.0+cu121 _CudaDeviceProperties(name='NVIDIA GeForce RTX 4070 Ti SUPER', major=8, minor=9, "
        "total_memory=15934MB, multi_processor_count=66) (a voice-control server's startup log, Linux: "
        "/home/... paths; MiB, floored); nvidia-smi total 16,376MiB (a deployment note's machine table, "
        "WSL2 on Windows, driver 560.94: the Windows driver's figure, as the RTX 4080's 16376MiB)",
    ),
    # ---- Ampere GeForce (sm86) ------------------------------------------------------------------
    (
        "rtx-3080", "NVIDIA GeForce RTX 3080", 10472390656, 10240, (8, 6),
        "deviceQuery 'NVIDIA GeForce RTX 3080' (driver/runtime 12.0/11.8, CC 8.6): 9987 MBytes "
        "(10472390656 bytes) (a Korean CUDA blog); Windows deviceQuery.exe shows the full 10240 MBytes "
        "(10736893952 bytes); nvidia-smi 'NVIDIA GeForce RTX 3080 Off ... 1MiB / 10240MiB'. The 12GB "
        "RTX 3080 has the same name and a 12288MiB nvidia-smi total: this row is the 10GB board",
    ),
    # ---- Blackwell GeForce (sm120) --------------------------------------------------------------
    (
        "rtx-5090", "NVIDIA GeForce RTX 5090", 33660534784, 32607, (12, 0),
        "deviceQuery 'NVIDIA GeForce RTX 5090' (driver/runtime 13.0/12.8, CC 12.0): 32101 MBytes "
        "(33660534784 bytes) (another print on the same driver: 32109 MBytes (33668857856 bytes)); "
        "nvidia-smi 'NVIDIA GeForce RTX 5090 Off ... 29428MiB / 32607MiB' (noonghunna/club-3090 "
        "issue #1107, driver 610.57.04)",
    ),
    (
        "rtx-5080", "NVIDIA GeForce RTX 5080", 16302 * MiB, 16303, (12, 0),
        "WINDOWS figures only: torch 2.7.1+cu128 on Windows _CudaDeviceProperties(name='NVIDIA GeForce "
        "RTX 5080', major=12, minor=0, total_memory=16302MB, multi_processor_count=84) (MiB, floored); "
        "NVML vram_total 16303 MiB (17094934528 bytes, Windows driver 591.86). No Linux CUDA total "
        "was found; on Linux expect a smaller CUDA total (the driver reserves memory there)",
    ),
    # ---- Hopper (sm90) --------------------------------------------------------------------------
    (
        "h100-pcie", "NVIDIA H100 PCIe", 81008 * MiB, 81559, (9, 0),
        "torch _CudaDeviceProperties(name='NVIDIA H100 PCIe', major=9, minor=0, total_memory=81008MB, "
        "multi_processor_count=114) (MiB, floored); nvidia-smi 'NVIDIA H100 PCIe Off ... 1MiB / "
        "81559MiB' (several tables incl. a SkyPilot log; one early doc shows 81920MiB)",
    ),
    (
        "h100-nvl", "NVIDIA H100 NVL", 99456909312, 95830, (9, 0),
        "WEAK: gpu_total_bytes=99456909312 with gpu_name='NVIDIA H100 NVL', capability=[9,0], "
        "torch='2.5.1+cu124' is a recorded runtime dict repeated in one project's test fixtures (no "
        "deviceQuery/torch print found); nvidia-smi 'NVIDIA H100 NVL Off ... 0MiB / 95830MiB' "
        "(NVIDIA/gpu-admin-tools issue #4, driver 535.183.01)",
    ),
    (
        "h20", "NVIDIA H20", 97285 * MiB, 97871, (9, 0),
        "torch _CudaDeviceProperties(name='NVIDIA H20', major=9, minor=0, total_memory=97285MB, "
        "multi_processor_count=78) (comments in a Triton attention-kernel repo; MiB, floored); "
        "nvidia-smi 'NVIDIA H20 On ... 0MiB / 97871MiB'. The 141GB H20 is named 'NVIDIA H20-3e' "
        "(NVIDIA driver README) and is not this row",
    ),
    (
        "gh200-96gb", "NVIDIA GH200 480GB", 102310658048, 97871, (9, 0),
        "ComfyUI /system_stats {'name': 'cuda:0 NVIDIA GH200 480GB', 'vram_total': 102310658048} "
        "(vram_total = torch.cuda.mem_get_info total; quoted in a public scan write-up); nvidia-smi "
        "'NVIDIA GH200 480GB On ... 1MiB / 97871MiB'. NVIDIA names the 96GB-HBM3 superchip by its "
        "480GB LPDDR5X; the 144GB HBM3e one is 'NVIDIA GH200 144G HBM3e'",
    ),
    # ---- Blackwell data centre (sm100) ----------------------------------------------------------
    (
        "b200", "NVIDIA B200", 182631 * MiB, 183359, (10, 0),
        "torch _CudaDeviceProperties(name='NVIDIA B200', major=10, minor=0, total_memory=182631MB, "
        "multi_processor_count=148, L2_cache_size=126MB) (MiB, floored; an older print on Modal shows "
        "182642MB); nvidia-smi 'NVIDIA B200 On ... 0MiB / 183359MiB'",
    ),
    # ---- Pascal (sm60) --------------------------------------------------------------------------
    (
        "p100-16gb", "Tesla P100-PCIE-16GB", 16276 * MiB, 16384, (6, 0),
        "torch _CudaDeviceProperties(name='Tesla P100-PCIE-16GB', total_memory=16276MB) (Kaggle, 2024; "
        "MiB, floored; torch 1.7-1.9 on 2020-21 Colab drivers printed major=6, minor=0, "
        "total_memory=16280MB); nvidia-smi 'Tesla P100-PCIE-16GB Off ... 0MiB / 16384MiB' (current "
        "nvidia-smi format, Kaggle)",
    ),
)

# Rows kept out of the catalog, with why: their only CUDA total is a Windows one (Windows reports a total close to
# nvidia-smi's, Linux a few hundred MiB less) or comes from a single weak source (each row's source says which).
DOUBTFUL: dict[str, str] = {
    "rtx-5080": "Windows figures only",
    "h100-nvl": "one weak source (a recorded runtime dict in test fixtures)",
}

# Boards without a public CUDA total (so no row), with the public facts that were found.
# key -> (name, nvml_total_mib or None, compute_capability or None, reason)
NOT_CATALOGUED: dict[str, tuple[str, int | None, tuple[int, int] | None, str]] = {
    "rtx-a4000": (
        "NVIDIA RTX A4000", 16376, (8, 6),
        "no Linux deviceQuery/torch total found (a Windows deviceQuery.exe, driver/runtime 12.3/12.1, "
        "prints 16376 MBytes (17174683648 bytes), more than the nvidia-smi total); nvidia-smi "
        "'NVIDIA RTX A4000 Off ... 1MiB / 16376MiB' (geerlingguy/raspberry-pi-pcie-devices issue "
        "#791, driver 580.95.05)",
    ),
    "rtx-4000-ada": (
        "NVIDIA RTX 4000 Ada Generation", 20475, (8, 9),
        "no deviceQuery/torch total found (only '20474 MB' from an unnamed Windows tool); nvidia-smi "
        "20475 MiB per GPU on driver 580.126.20",
    ),
    "l20": (
        "NVIDIA L20", 46068, None,
        "no CUDA total found; nvidia-smi 'NVIDIA L20 Off ... 37816MiB / 46068MiB'; not in NVIDIA's "
        "CUDA GPUs table",
    ),
    "a800-80gb": (
        "NVIDIA A800-SXM4-80GB", 81920, (8, 0),
        "no CUDA total found (one report rounds it to 85.17 GB); nvidia-smi 'NVIDIA A800-SXM4-80GB On ... "
        "34447MiB / 81920MiB' (dexmal/dexbotic issue #41, driver 535.86.10); also sold as "
        "'NVIDIA A800 80GB PCIe' (81920MiB) and A800 40GB",
    ),
    "h800": (
        "NVIDIA H800", None, (9, 0),
        "no CUDA total found; the name 'NVIDIA H800' is used by an 80GB board and by a 141GB one "
        "(nvidia-smi '1MiB / 143771MiB'), so a total cannot be tied to the name",
    ),
    "gh200-144gb": (
        "NVIDIA GH200 144G HBM3e", None, (9, 0),
        "no totals found (name from NVIDIA/mig-parted PR #139, device 0x2348)",
    ),
    "gb200": (
        "NVIDIA GB200", 189471, (10, 0),
        "no CUDA total found; nvidia-smi 'NVIDIA GB200 On ... 0MiB / 189471MiB' (per GPU)",
    ),
    "b100": ("NVIDIA B100", None, None, "no public deviceQuery/torch/nvidia-smi output found"),
    "v100s": (
        "Tesla V100S-PCIE-32GB", 32768, (7, 0),
        "no CUDA total found; nvidia-smi 'Tesla V100S-PCIE-32GB Off ... 0MiB / 32768MiB'",
    ),
    "a2": (
        "NVIDIA A2", 15356, (8, 6),
        "no CUDA total found; nvidia-smi 'NVIDIA A2 On ... 0MiB / 15356MiB'",
    ),
    "a16": (
        "NVIDIA A16", 15356, (8, 6),
        "no CUDA total found; nvidia-smi 'NVIDIA A16 Off ... 14MiB / 15356MiB' per GPU (driver "
        "580.95.05; the board carries four such GPUs)",
    ),
}
