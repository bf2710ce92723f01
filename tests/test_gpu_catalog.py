import pytest

from memgraph.facts.gpus import (
    GPUS,
    MiB,
    cublas_workspace_bytes_for,
    cublaslt_workspace_bytes_for,
    flash_attention_hardware_supported,
    get_gpu,
)

REQUIRED = {"v100-16gb", "v100-32gb", "t4", "a10g", "l4", "a100-40gb", "a100-80gb", "h100-80gb", "h200", "rtx-3090", "rtx-4090"}


def test_catalog_has_required_entries():
    assert REQUIRED <= set(GPUS)
    for key, spec in GPUS.items():
        assert "@" not in key  # a --gpu-memory board (facts/gpus.py with_capacity) never enters the catalog
        assert spec.key == key
        assert 0 < spec.capacity_bytes < spec.nvml_total_bytes  # the driver always reserves something
        assert spec.driver_reserved_bytes < 1024 * MiB
        assert spec.source


def test_h100_numbers():
    h100 = get_gpu("h100-80gb")
    assert h100.name == "NVIDIA H100 80GB HBM3"
    assert h100.nvml_total_bytes == 81559 * MiB == 85_520_809_984  # nvidia-smi "0MiB / 81559MiB"
    assert h100.capacity_bytes == 85_028_896_768  # deviceQuery: 81090 MBytes (85028896768 bytes)
    assert h100.compute_capability == (9, 0)
    assert h100.bf16_supported and h100.flash_attention_supported
    assert h100.cublas_workspace_bytes == 32 * MiB  # sm90 default :4096:8
    assert h100.cuda_context_bytes == 600 * MiB  # the sm90 estimate (CONTEXT_ESTIMATE_NOTE)
    # what the caching allocator may reserve: 85,028,896,768 - 600 * 1,048,576 = 84,399,751,168
    assert h100.allocator_budget_bytes == 84_399_751_168


def test_other_capacities_and_capabilities():
    assert get_gpu("a100-80gb").nvml_total_bytes == 81920 * MiB
    assert get_gpu("a100-80gb").capacity_bytes == 84_987_740_160
    assert get_gpu("t4").nvml_total_bytes == 15360 * MiB
    assert get_gpu("t4").compute_capability == (7, 5)
    assert get_gpu("v100-16gb").capacity_bytes == 16_945_512_448
    assert get_gpu("h200").compute_capability == (9, 0)
    assert get_gpu("l4").compute_capability == (8, 9)
    assert get_gpu("a10g").compute_capability == (8, 6)


def test_arch_flags():
    for key in ("v100-16gb", "v100-32gb", "t4"):
        spec = get_gpu(key)
        assert not spec.bf16_supported and not spec.flash_attention_supported
    for key in ("a10g", "l4", "a100-40gb", "a100-80gb", "h100-80gb", "h200", "rtx-3090", "rtx-4090"):
        spec = get_gpu(key)
        assert spec.bf16_supported and spec.flash_attention_supported
    assert flash_attention_hardware_supported((12, 1)) and not flash_attention_hardware_supported((12, 2))
    assert not flash_attention_hardware_supported((7, 5))


def test_cublas_workspace_rule():
    assert cublas_workspace_bytes_for((9, 0)) == 33_554_432
    assert cublas_workspace_bytes_for((8, 0)) == 4096 * 1024 * 2 + 16 * 1024 * 8 == 8_519_680
    assert cublas_workspace_bytes_for((10, 0)) == 8_519_680  # only sm90 gets 32 MiB
    assert cublas_workspace_bytes_for((8, 0), ":4096:8") == 32 * MiB
    assert cublas_workspace_bytes_for((9, 0), ":16:8") == 16 * 1024 * 8
    assert cublas_workspace_bytes_for((9, 0), "garbage") == 32 * MiB  # unparsable -> default
    assert cublaslt_workspace_bytes_for() == 1 * MiB
    assert get_gpu("a100-80gb").cublas_workspace_bytes == 8_519_680


def test_lookup_aliases_and_device_names():
    assert get_gpu("h100-sxm").key == "h100-80gb"
    with pytest.raises(KeyError, match="names more than one board: pass one of a100-40gb, a100-80gb"):
        get_gpu("a100")  # ambiguous: refused with the choices, never silently the 80 GB card
    assert get_gpu("  RTX_4090 ").key == "rtx-4090"
    assert get_gpu("NVIDIA H100 80GB HBM3").key == "h100-80gb"
    assert get_gpu("Tesla T4").key == "t4"
    assert get_gpu("nvidia a100-sxm4-40gb").key == "a100-40gb"


def test_unknown_gpu_lists_close_matches():
    with pytest.raises(KeyError) as err:
        get_gpu("h10")
    msg = str(err.value)
    assert "h100" in msg and "did you mean" in msg
    with pytest.raises(KeyError):
        get_gpu("mi300x")


def test_catalog_has_the_researched_boards():
    # facts/gpu_boards.py rows, less the ones whose only figures are Windows or a single weak source
    for key in ("rtx-a6000", "l40s", "rtx-6000-ada", "h100-pcie", "b200", "rtx-5090", "gh200-96gb", "a10"):
        assert key in GPUS
    assert "h100-nvl" not in GPUS and "rtx-5080" not in GPUS
    assert get_gpu("NVIDIA L40S").compute_capability == (8, 9)


def test_gpu_memory_keeps_the_architecture():
    from memgraph.model_spec.options import TrainingOptions

    o = TrainingOptions(gpu="a100-40gb", gpu_memory=48 * 2**30)
    spec = get_gpu(o.gpu)
    assert spec.capacity_bytes == 48 * 2**30 and spec.compute_capability == (8, 0)
    assert get_gpu(TrainingOptions(gpu=o.gpu, gpu_memory=48 * 2**30).gpu) == spec  # rebuilding options is stable


def test_a_gpu_memory_board_is_read_back_from_its_key_without_entering_the_catalog():
    from memgraph.facts.gpus import get_gpu, with_capacity

    before = dict(GPUS)
    board = with_capacity(get_gpu("h100-80gb"), 24 * 2**30)
    assert board.key == "h100-80gb@25769803776"  # 24 * 2**30 = 25,769,803,776 B
    assert get_gpu(board.key) == board
    assert board.capacity_bytes == board.nvml_total_bytes == 24 * 2**30
    assert board.compute_capability == get_gpu("h100-80gb").compute_capability == (9, 0)
    assert GPUS == before
