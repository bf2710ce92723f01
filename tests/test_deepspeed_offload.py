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

from memgraph.api import analyze, analyze_traced  # noqa: E402
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
    ({"offload_optimizer": {"device": "cpu"}, "optimizer": {"type": "Lamb"}}, False,
     "modelled only as DeepSpeedCPUAdam"),
    ({"offload_optimizer": {"device": "nvme"}}, False, "offload_optimizer.device nvme is not modelled"),
    ({"stage": 3, "offload_param": {"device": "nvme"}}, False, "offload_param.device nvme is not modelled"),
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


# ZeRO-3 with offload_param to the CPU (tests/configs/deepspeed/zero3-offload-param.json: persistence threshold 0, so
# every parameter is partitioned; reduce and prefetch buckets of 20,000 elements), 2 ranks, bf16
OFFLOAD_PARAM = "tests/configs/deepspeed/zero3-offload-param.json"


def test_offloaded_parameter_partitions_are_host_memory_on_the_cuda_target():
    # deepspeed 0.19.8 partition_parameters.py _partition_param makes each parameter's partition on the offload device
    # (torch.empty(partition_size, device='cpu')), then stage3.py _create_param_groups_fp16_flat_cpu_memory one flat
    # host buffer of this rank's partition, 202,048 / 2 = 101,024 bf16 elements = 202,048 B, and _move_to_flat_buffer
    # copies each partition in and frees it: peak 2 x 202,048 = 404,096 B on the host, 202,048 B (the flat buffer) to
    # the end. The device keeps no 16-bit partition buffer (no lp_param_buffer, the 202,048 B it holds without
    # offload_param: tests/test_deepspeed.py test_zero3_threshold_0_partitions_every_parameter)
    result, trace = analyze_traced(LLAMA, TrainingOptions(
        seq_len=32, batch_size=2, target="cuda", nproc=2, deepspeed=OFFLOAD_PARAM, precision="bf16-mixed",
        gpu="a100-80gb"))
    notes = "\n".join(result.notes)
    assert ("host memory of this rank peak 394.62 KiB (404,096 B), 197.31 KiB (202,048 B) at the end (ZeRO-3's "
            "16-bit parameter partitions (offload_param)), not in the device figures") in notes
    assert "param_groups_fp16_flat_cpu_memory 197.31 KiB (16-bit parameter partitions of this rank (offload_param), " \
           "in host memory)" in notes and "lp_param_buffer" not in notes
    # ZeRO-3 fetches a partition to the device before its all-gather (_all_gather_sequential:
    # param_ds_tensor.to(device)): the embedding's and the head's 64,000 / 2 = 32,000 bf16 elements, 64,000 B device
    # copies made in the forward of each iteration, each freed by the next event (the all-gather has read it)
    fetched = [s for s in trace.log.storages if s.name == "aten._to_copy.default" and s.shape == (32_000,)
               and s.dtype == "bfloat16" and s.phase == "forward"]
    assert {s.iteration for s in fetched} == {1, 2}
    assert all(s.nbytes == 64_000 and s.free_event == s.alloc_event + 1 for s in fetched)


@pytest.mark.slow
def test_offload_param_moves_exactly_the_16_bit_partitions_off_the_device():
    # the same run without offload_param: alive at the end of each iteration 202,048 B more on the device (this rank's
    # bf16 partitions, lp_param_buffer), nothing else
    def alive(config):
        _, trace = analyze_traced(LLAMA, TrainingOptions(seq_len=32, batch_size=2, target="cuda", nproc=2,
                                                          deepspeed=config, precision="bf16-mixed", gpu="a100-80gb"))
        ends = [trace.iteration_bounds[i][1] for i in (0, 1)]
        return [sum(s.nbytes for s in trace.log.storages
                    if s.alloc_event < end and (s.free_event is None or s.free_event >= end)) for end in ends]

    with open(OFFLOAD_PARAM) as f:
        config = json.load(f)
    del config["zero_optimization"]["offload_param"]
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(config, f)
    offloaded, on_device = alive(OFFLOAD_PARAM), alive(f.name)
    assert [d - o for d, o in zip(on_device, offloaded)] == [202_048, 202_048]


def test_zero2_flattens_through_the_host_when_the_gpu_lacks_the_room(tmp_path):
    # deepspeed 0.19.8 stage_1_and_2.py asks the accelerator's free memory (memgraph answers the target GPU's: its
    # capacity less the CUDA context, 500 MiB expected on an A100, less the model's weights) and, where the 16-bit flat
    # buffer does not fit, moves each weight to the host (param.data.cpu()), flattens there and copies the buffer
    # to the device. A board of 500 MiB + 500,000 B leaves 500,000 - 404,096 (the bf16 weights) - 128 (the rotary
    # inv_freq buffers, fp32) B free, under the 404,096 B flat buffer (202,048 bf16 elements, a multiple of the
    # alignment 2 x 2 ranks): on the host the weights' copies 404,096 B and the flat buffer 404,096 B, and the 21
    # one-element fp32 placeholders DeepSpeed gives the weights meanwhile (torch.empty(1).to(param.device): on meta
    # that .to is a no-op, so they stay host stand-ins; on a GPU 4-byte device tensors), 21 x 4 = 84 B: 808,276 B
    assert 404_096 + 404_096 + 21 * 4 == 808_276
    gpu = f"a100-80gb@{500 * 2**20 + 500_000}"
    result = analyze(LLAMA, TrainingOptions(seq_len=32, batch_size=2, target="cuda", nproc=2, precision="bf16-mixed",
                                            deepspeed="tests/configs/deepspeed/zero2.json", gpu=gpu))
    assert ("DeepSpeed flattened the 16-bit parameter groups through host memory (peak 808,276 B there)"
            in "\n".join(result.notes))
    # on a board with room (the A100 80GB) the same config flattens on the device: no such note
    roomy = analyze(LLAMA, TrainingOptions(seq_len=32, batch_size=2, target="cuda", nproc=2, precision="bf16-mixed",
                                           deepspeed="tests/configs/deepspeed/zero2.json", gpu="a100-80gb"))
    assert not any("through host memory" in n for n in roomy.notes)
