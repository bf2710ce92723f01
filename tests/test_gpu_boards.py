"""The extra GPU rows of memgraph/facts/gpu_boards.py: shape, consistency and a few facts by hand."""

import re

import pytest

from memgraph.facts.gpu_boards import BOARDS, DOUBTFUL, NOT_CATALOGUED
from memgraph.facts.gpus import GPUS, flash_attention_hardware_supported, native_bf16_supported
from memgraph.units import MiB

ROWS = {row[0]: row for row in BOARDS}


def test_rows_have_the_catalog_shape():
    assert len(ROWS) == len(BOARDS)  # keys are unique
    for key, name, capacity_bytes, nvml_total_mib, cc, source in BOARDS:
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", key), key
        assert name.startswith(("NVIDIA ", "Tesla ")) and name == name.strip(), name
        assert isinstance(capacity_bytes, int) and capacity_bytes > 0, key
        assert nvml_total_mib is None or isinstance(nvml_total_mib, int), key
        assert isinstance(cc, tuple) and len(cc) == 2 and all(isinstance(v, int) for v in cc), key
        assert source and "MiB" in source, key  # every row quotes the nvidia-smi figure it copies


def test_cuda_total_is_below_the_nvml_total_by_less_than_a_gib():
    # The driver's reservation is inside the nvidia-smi total and never handed to CUDA; e.g. the
    # catalog's H100 80GB HBM3: 81559 MiB (nvidia-smi) - 81090 MiB (deviceQuery) = 469 MiB.
    for key, _name, capacity_bytes, nvml_total_mib, _cc, _source in BOARDS:
        if nvml_total_mib is None:
            continue
        assert capacity_bytes < nvml_total_mib * MiB, key
        assert nvml_total_mib * MiB - capacity_bytes < 1024 * MiB, key


def test_rows_do_not_duplicate_the_catalog():
    # the catalog takes the rows in (facts/gpus.py): each key once, each device name once
    names = [spec.name for key, spec in GPUS.items() if "@" not in key]
    assert len(names) == len(set(names))
    assert len({key for key, *_ in BOARDS}) == len(BOARDS)
    assert not set(ROWS) & set(NOT_CATALOGUED)
    assert not set(NOT_CATALOGUED) & set(GPUS)


def test_compute_capabilities_by_hand():
    # NVIDIA's CUDA GPUs table: Ada 8.9, data-centre Blackwell 10.0, GeForce Blackwell 12.0,
    # A30 8.0 (GA100), GA102 boards 8.6, Hopper 9.0, Pascal P100 6.0.
    assert ROWS["l40s"][4] == (8, 9)
    assert ROWS["rtx-6000-ada"][4] == (8, 9)
    assert ROWS["b200"][4] == (10, 0)
    assert ROWS["rtx-5090"][4] == (12, 0)
    assert ROWS["a30"][4] == (8, 0)
    assert ROWS["a40"][4] == ROWS["rtx-a6000"][4] == ROWS["a10"][4] == (8, 6)
    assert ROWS["h20"][4] == ROWS["gh200-96gb"][4] == ROWS["h100-pcie"][4] == (9, 0)
    assert ROWS["p100-16gb"][4] == (6, 0)


def test_arch_flags_the_catalog_will_derive():
    # torch is_bf16_supported(including_emulation=False): major >= 8; flash SDPA: sm80..sm121.
    assert not native_bf16_supported(ROWS["p100-16gb"][4])
    assert not flash_attention_hardware_supported(ROWS["p100-16gb"][4])
    for key in ("b200", "rtx-5090", "l40s", "h20"):
        assert native_bf16_supported(ROWS[key][4]) and flash_attention_hardware_supported(ROWS[key][4]), key


@pytest.mark.parametrize(
    "key, printed_mib",
    [
        # deviceQuery / cudaDeviceProp bytes agree with the MiB figure printed beside them
        # (deviceQuery "N MBytes" and torch "total_memory=NMB" both floor bytes / 2**20).
        ("l40s", 45589),  # 47803596800 = 45589 * 1048576 + 65536
        ("a40", 45416),  # 47622258688 = 45416 * 1048576 + 131072; torch printed total_memory=45416MB
        ("rtx-5090", 32101),  # deviceQuery: 32101 MBytes (33660534784 bytes)
        ("rtx-3080", 9987),  # deviceQuery: 9987 MBytes (10472390656 bytes)
        ("a30", 24169),  # 24169 MB (25,343,295,488 bytes)
        ("a10", 22515),  # 23609475072 bytes = 21.99 GiB
        ("gh200-96gb", 97571),  # ComfyUI vram_total 102310658048
    ],
)
def test_byte_figures_match_their_mib_prints(key, printed_mib):
    assert ROWS[key][2] // MiB == printed_mib


def test_a10_nvml_bytes_by_hand():
    # mayooot/detect-gpu issue #3: NVML memoryInfo Total 24146608128 = 23028 * 1048576
    assert ROWS["a10"][3] * MiB == 24_146_608_128


def test_gddr6_ecc_state_shows_in_the_nvml_total():
    # ECC off: 49140 MiB (RTX A6000, RTX 6000 Ada); ECC on: 46068 MiB (A40, L40, L40S, all 48 GB GDDR6).
    assert ROWS["rtx-a6000"][3] == ROWS["rtx-6000-ada"][3] == 49140
    assert ROWS["a40"][3] == ROWS["l40"][3] == ROWS["l40s"][3] == 46068
    assert "ECC" in ROWS["rtx-a6000"][5] and "ECC" in ROWS["l40"][5]


def test_hbm_boards_sharing_a_frame_buffer():
    # H100 PCIe and H100 SXM (catalog h100-80gb) both show 81559 MiB; H20 and GH200 96GB both 97871 MiB.
    assert ROWS["h100-pcie"][3] * MiB == GPUS["h100-80gb"].nvml_total_bytes
    assert ROWS["h20"][3] == ROWS["gh200-96gb"][3] == 97871


def test_doubtful_rows_say_so_and_stay_out_of_the_catalog():
    assert ROWS["rtx-5080"][5].startswith("WINDOWS")
    assert ROWS["h100-nvl"][5].startswith("WEAK")
    assert set(DOUBTFUL) == {key for key, *_, source in BOARDS if source.startswith(("WINDOWS", "WEAK"))}
    assert not set(DOUBTFUL) & set(GPUS)
    assert set(ROWS) - set(DOUBTFUL) <= set(GPUS)
    assert "24258MiB" in ROWS["a30"][5]  # the older driver's nvidia-smi total is kept as a note


def test_not_catalogued_entries_carry_a_reason():
    for key, (name, nvml_total_mib, cc, reason) in NOT_CATALOGUED.items():
        assert name.startswith(("NVIDIA ", "Tesla ")), key
        assert nvml_total_mib is None or isinstance(nvml_total_mib, int), key
        assert cc is None or (len(cc) == 2 and all(isinstance(v, int) for v in cc)), key
        assert reason.startswith("no "), key
