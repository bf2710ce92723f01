"""`--deepspeed` with `offload_optimizer: {device: cpu}`: DeepSpeed's offloaded optimizer state as host memory
(memgraph/ds_engine/offload.py).

tiny-llama (2 layers, hidden 64): 202,048 parameters (tests/test_deepspeed.py), the largest the embedding and the
head, 64,000 each; 2 ranks, bf16, ZeRO-2, reduce and all-gather buckets of 20,000 elements
(tests/configs/deepspeed/zero2-offload.json). The ground truth (DeepSpeed on the CPU for real) is in
tests/test_deepspeed.py's gloo test.
"""

import json

import pytest

pytest.importorskip("deepspeed")

from memgraph.api import analyze  # noqa: E402
from memgraph.errors import MemgraphError  # noqa: E402
from memgraph.model_spec.options import TrainingOptions  # noqa: E402

LLAMA = "tests/configs/tiny-llama.json"
OFFLOAD = "tests/configs/deepspeed/zero2-offload.json"
PARTITION = 202_048 // 2  # elements of this rank's partition: 101,024 (202,048 is even: no padding)


def _analyze(config: str, target: str):
    return analyze(LLAMA, TrainingOptions(seq_len=32, batch_size=2, target=target, nproc=2, deepspeed=config,
                                          precision="bf16-mixed", gpu="a100-80gb"))


def test_offloaded_optimizer_state_is_host_memory_on_the_cuda_target():
    # deepspeed 0.19.8 stage_1_and_2.py with cpu_offload, this rank's host memory: the fp32 master partition
    # 101,024 x 4 = 404,096 B, its gradient (single_partition_of_fp32_groups[i].grad) 404,096 B, AdamW's exp_avg and
    # exp_avg_sq 2 x 404,096 B, the bf16 staging buffer of the largest parameter (temp_grad_buffer_for_cpu_offload)
    # 64,000 x 2 = 128,000 B and AdamW's float32 step counter 4 B: 4 x 404,096 + 128,000 + 4 = 1,744,388 B
    assert 4 * PARTITION * 4 + 64_000 * 2 + 4 == 1_744_388
    result = _analyze(OFFLOAD, "cuda")
    notes = "\n".join(result.notes)
    assert "host memory of this rank peak 1.66 MiB (1,744,388 B), 1.66 MiB (1,744,388 B) at the end" in notes
    assert "not in the device figures" in notes
    assert ("single_partition_of_fp32_groups 394.62 KiB (fp32 master weights of this rank's partition, in host "
            "memory)") in notes
    # on the device: no optimizer state (without the offload: 3 x 404,096 B, each rounded up to 512 B, + the step)
    assert result.ranks[0]["static"]["optimizer_state"] == 0
    # the 16-bit weights stay on the device: the same parameter bytes as without the offload
    without = _analyze("tests/configs/deepspeed/zero2.json", "cuda")
    assert result.ranks[0]["static"]["parameters"] == without.ranks[0]["static"]["parameters"]
    assert without.ranks[0]["static"]["optimizer_state"] == 3 * 404_480 + 512


def test_an_optimizer_section_with_the_offload_is_deepspeeds_cpu_adam():
    # "optimizer": {"type": "AdamW"} with offload_optimizer cpu: deepspeed 0.19.8 engine.py builds DeepSpeedCPUAdam
    # (transformers passes a DummyOptim); its exp_avg and exp_avg_sq, fp32 (fp32_optimizer_states), are host
    # memory, and its step count is a Python int: 4 x 404,096 + 128,000 = 1,744,384 B on the host, none on the device
    assert 4 * PARTITION * 4 + 64_000 * 2 == 1_744_384
    result = _analyze("tests/configs/deepspeed/zero2-offload-cpuadam.json", "cuda")
    notes = "\n".join(result.notes)
    assert "host memory of this rank peak 1.66 MiB (1,744,384 B), 1.66 MiB (1,744,384 B) at the end" in notes
    assert "DeepSpeedCPUAdam from the config's \"optimizer\" section" in notes
    assert "optimizer.params.lr = 5e-05" in notes  # "auto", from TrainingArguments' learning_rate default
    assert result.ranks[0]["static"]["optimizer_state"] == 0


def test_on_the_cpu_target_host_and_device_are_one_allocator():
    # the same host bytes are counted in the figures: the cpu prediction is the total the CPU allocator sees
    result = _analyze(OFFLOAD, "cpu")
    notes = "\n".join(result.notes)
    assert "host memory of this rank peak 1.66 MiB (1,744,388 B)" in notes and "counted in the figures" in notes
    # fp32 master + exp_avg + exp_avg_sq, 3 x 404,096 B, + AdamW's 4-byte step counter (the gradient partition and
    # the staging buffer are gradients / DeepSpeed buffers, not optimizer state)
    assert result.ranks[0]["static"]["optimizer_state"] == 3 * 404_096 + 4


@pytest.mark.parametrize("zero, force, message", [
    ({"offload_optimizer": {"device": "cpu"}}, None, '"zero_force_ds_cpu_optimizer": false'),
    ({"stage": 3, "offload_param": {"device": "cpu"}}, False, "offload_param to the CPU is not modelled"),
    ({"offload_optimizer": {"device": "cpu"}, "optimizer": {"type": "Lamb"}}, False,
     "modelled only as DeepSpeedCPUAdam"),
    ({"offload_optimizer": {"device": "nvme"}}, False, "nvme is not modelled"),
])
def test_offloads_not_modelled_are_one_line(tmp_path, zero, force, message):
    path = tmp_path / "ds_config.json"
    section = zero.pop("optimizer", None)
    config = {"bf16": {"enabled": "auto"}, "zero_optimization": {"stage": 2, **zero}}
    if section:
        config["optimizer"] = section
    if force is not None:
        config["zero_force_ds_cpu_optimizer"] = force
    path.write_text(json.dumps(config))
    with pytest.raises(MemgraphError, match=message) as info:
        _analyze(str(path), "cpu")
    assert "\n" not in str(info.value)
