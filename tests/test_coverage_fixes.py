"""Issue 13's per-architecture fixes: balanced routing values by hand, and tiny transformers architectures within
1% of the real CPU step (slow: each builds, measures and analyses one architecture, 5-15 s)."""

import pytest
import torch

from memgraph.cpu_profiler import cpu_memory_events, memory_profile
from memgraph.step.layerdrop import every_layer_runs, layerdrop_note
from memgraph.trace.emulate.meta_kernels import MetaKernelFixes
from memgraph.trace.record.recorder import ALLOC, FREE, Recorder
from memgraph.trace.shadow_values import ShadowValues, balanced_routing


def test_balanced_routing_by_hand():
    # 5 tokens choosing k=2 of E=4 experts: token t -> (2t, 2t+1) mod 4
    v = balanced_routing((5, 4), dim=1, k=2)
    assert v.tolist() == [[0, 1], [2, 3], [0, 1], [2, 3], [0, 1]]
    assert torch.bincount(v.flatten(), minlength=4).tolist() == [3, 3, 2, 2]  # balanced within one token
    # argmax over the expert dimension of [1, 6, 4] logits, keepdim False: t mod 4
    assert balanced_routing((1, 6, 4), dim=2, k=1, keepdim=False).tolist() == [[0, 1, 2, 3, 0, 1]]


def test_router_topk_gets_values_and_a_note():
    shadows = ShadowValues()
    logits = torch.empty(5, 4, device="meta")
    with shadows:
        _, idx = logits.topk(2, dim=1)
        counts = torch.zeros(5, 4, device="meta").scatter(1, idx, 1).long().sum(0).tolist()  # JetMoE's expert_size
    assert counts == [3, 3, 2, 2]
    assert shadows.routed == 1 and "balanced" in shadows.assumption_notes()[0]


def test_valueless_bool_read_is_guessed_and_counted():
    shadows = ShadowValues()
    x = torch.empty(3, device="meta")
    with shadows:
        assert bool(x.min() > -1e-5)  # I-BERT's activation-range test: no value on meta
    assert shadows.guessed == 1


@pytest.mark.slow
@pytest.mark.parametrize("task,model_type", [
    ("causal-lm", "jetmoe"),  # routing values: expert_size.tolist()
    ("masked-lm", "ibert"),  # guessed bool reads
    ("image-classification", "focalnet"),  # NC11 pointwise strides (was +20.7%)
    ("seq2seq-lm", "longt5"),  # host tensors on the cpu target (was -8.73%)
    ("seq2seq-lm", "m2m_100"),  # LayerDrop off in trace and measure (was +6.03%)
    ("causal-lm", "inkling_text"),  # gather's backward in place (was +6.66%)
])
def test_tiny_architecture_within_one_percent(task, model_type):
    """Measured for real on the CPU allocator and analysed for the cpu target; 1%: the sweep's tolerance (the
    remaining error on dense models is allocator rounding of a few bytes)."""
    from tools.coverage import architectures, run_one

    (row,) = [run_one(*a) for a in architectures([task], model_type)]
    assert row.runs_for_real and row.analyzes, row.reason
    assert abs(row.error_pct) <= 1.0, row


# -- host tensors: device memory on the cpu target, not on cuda --------------------------------------------------
def _host_mask_step(rec: Recorder):
    """LongT5's pattern: a mask made on the host without a device, moved to the model's device, kept."""
    with rec:
        mask = torch.arange(100)  # int64 [100] on the host: 800 B
        kept = mask.to("meta")  # the model's device
        del mask
        out = kept + 1  # 800 B on meta
    return kept, out


def test_host_tensors_are_recorded_on_the_cpu_target_only():
    cpu = Recorder(host_type="cpu")
    kept, out = _host_mask_step(cpu)
    # cpu target: the arange (800 B) and the add (800 B); the move to meta is the same tensor on the CPU
    # (Tensor.to returns self), so it allocates nothing and the arange's memory lives on in `kept`
    assert [cpu.log.storages[s].nbytes for k, s in cpu.log.events if k == ALLOC] == [800, 800]
    assert [k for k, _ in cpu.log.events] == [ALLOC, ALLOC]  # `del mask` frees nothing: `kept` holds it
    del kept
    assert cpu.log.events[-1] == (FREE, 0)
    cuda = Recorder()  # cuda target: the host arange is not device memory, its copy to the device is
    kept, out = _host_mask_step(cuda)
    assert [(cuda.log.storages[s].name, cuda.log.storages[s].nbytes) for k, s in cuda.log.events if k == ALLOC] \
        == [("aten._to_copy.default", 800), ("aten.add.Tensor", 800)]


def test_fake_tensors_are_not_host_memory():
    # DTensor's sharding propagation runs each op on fake global-shape tensors of device "cpu" under a
    # FakeTensorMode above the recorder (torch/distributed/tensor/_sharding_prop.py); they hold no memory, and
    # counting them doubled FSDP2's first-iteration peak on the cpu target (4,850,412 B predicted against the
    # gloo run's 2,447,056 B). A real host tensor beside them is still 40 B.
    from torch._subclasses.fake_tensor import FakeTensorMode

    rec = Recorder(host_type="cpu")
    with rec:
        with FakeTensorMode():
            torch.empty(1000, 64)  # 256,000 B if it were real
        real = torch.empty(10)
    assert [rec.log.storages[s].nbytes for k, s in rec.log.events if k == ALLOC] == [40]
    del real


def test_torch_tensor_is_an_allocation_of_lift_fresh():
    rec = Recorder(host_type="cpu")
    with rec:
        step = torch.tensor(0.0)  # AdamW for-loop's `step` counter: a float32 host scalar, 4 B
    (s,) = rec.log.storages
    assert (s.nbytes, s.name, s.origin.value) == (4, "aten.lift_fresh.default", "op")
    assert rec.log.ops[0].allocated == (0,) and step.item() == 0.0


# -- gather's backward: scatter_add_ into the fresh zeros, as the real step does --------------------------------


def test_gather_backward_runs_in_place_as_measured():
    # x [64, 512] float32 (128 KiB), gather 16 columns. Backward: sum's grad (4 B, expanded to [64, 16] without
    # memory), gather_backward's zeros [64, 512] (131,072 B), scatter_add_ into them (nothing), mul's grad
    # [64, 512] (131,072 B) = x.grad. Out of place, scatter_add would allocate another 131,072 B.
    zeros = 64 * 512 * 4
    x = torch.randn(64, 512, requires_grad=True)
    index = torch.randint(0, 512, (64, 16))
    loss = torch.gather(x * 2, 1, index).sum()
    with memory_profile() as prof:
        loss.backward()
    # the real CPU allocator (besides a few scalars of 4 B): two zeros-sized blocks, no third
    real = [b for _t, b in cpu_memory_events(prof) if b > 0]
    assert sorted(b for b in real if b > 8) == [zeros, zeros]

    rec, fixes = Recorder(), MetaKernelFixes("cpu")
    xm = torch.empty(64, 512, device="meta", requires_grad=True)
    im = torch.zeros(64, 16, dtype=torch.long, device="meta")
    with fixes, rec:
        loss = torch.gather(xm * 2, 1, im).sum()
        first = len(rec.log.storages)
        loss.backward()
    traced = sorted(s.nbytes for s in rec.log.storages[first:])
    assert [b for b in traced if b > 8] == [zeros, zeros] and fixes.gather_backward.in_place == 1
    assert xm.grad.shape == (64, 512)


def test_other_scatter_add_stays_out_of_place():
    rec, fixes = Recorder(), MetaKernelFixes("cpu")
    src = torch.empty(4, 8, device="meta")
    with fixes, rec:
        zeros = src.new_zeros(4, 8)  # not in a backward pass: user code's own out-of-place scatter_add
        out = zeros.scatter_add(1, torch.zeros(4, 8, dtype=torch.long, device="meta"), src)
    assert out.untyped_storage()._cdata != zeros.untyped_storage()._cdata and fixes.gather_backward.in_place == 0


# -- LayerDrop ------------------------------------------------------------------------------------------------
def test_every_layer_runs_sets_layerdrop_to_zero_and_restores_it():
    from transformers import M2M100Config, M2M100ForConditionalGeneration

    cfg = M2M100Config(vocab_size=64, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                       decoder_attention_heads=2, encoder_ffn_dim=16, decoder_ffn_dim=16)
    assert (cfg.encoder_layerdrop, cfg.decoder_layerdrop) == (0.05, 0.05)  # M2M100's defaults
    with torch.device("meta"):
        model = M2M100ForConditionalGeneration(cfg)
    with every_layer_runs(model) as dropped:
        assert model.model.encoder.layerdrop == model.model.decoder.layerdrop == 0.0
        assert model.config.encoder_layerdrop == model.config.decoder_layerdrop == 0.0
    assert model.model.encoder.layerdrop == model.config.decoder_layerdrop == 0.05
    assert sorted(name for name, _p in dropped) == ["config.decoder_layerdrop", "config.encoder_layerdrop",
                                                     "model.decoder.layerdrop", "model.encoder.layerdrop"]
    assert "decoder_layerdrop 0.05" in layerdrop_note(dropped)[0] and layerdrop_note([]) == []


def test_a_host_buffer_is_a_buffer_on_the_cpu_target_only():
    from memgraph.api import analyze

    # float32 [64] made with device="cpu": 256 B of the CPU allocator on the cpu target (alive from setup, a
    # buffer), no device memory on the cuda target
    cpu = analyze("tests.fixtures.nets:host_buffer", inputs=("x=float32[4,16]",), target="cpu")
    assert cpu.steady_state_peak.by_category["buffers"] == 64 * 4
    cuda = analyze("tests.fixtures.nets:host_buffer", inputs=("x=float32[4,16]",), target="cuda")
    assert cuda.steady_state_peak.by_category.get("buffers", 0) == 0
