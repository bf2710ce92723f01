"""Multimodal models on meta: shadow values, processor-like inputs, modality groups.

The cpu-target checks follow tests/test_cpu_ground_truth.py: the steady-state peak predicted
on meta must be within 2% of the CPU allocator's peak for the same step run for real.
"""

import json

import pytest
import torch

from memgraph.model_spec.modality import module_modalities, modality_of
from memgraph.api import analyze, measure
from memgraph.errors import MemgraphError, TraceError
from memgraph.model_spec.multimodal_inputs import IGNORE_INDEX, llava_image_tokens, qwen2_vl_grid, smart_resize
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import ModelSpec, resolve
from memgraph.trace.recorder import Recorder
from memgraph.model_spec.build import build_model
from memgraph.model_spec.options import PRECISION_DTYPE
from memgraph.trace.tracer import trace_training
from memgraph.trace.shadow_values import ShadowValues
from tests.conftest import CONFIGS

TOLERANCE = 0.02


def _measured(model, **kw):
    return max(it["peak_allocated"] for it in measure(model, device="cpu", **kw)["iterations"][1:])


# -- shadow values ------------------------------------------------------------------------------
def test_shadow_values_answer_value_dependent_ops():
    sv = ShadowValues()
    ids = torch.empty(2, 6, dtype=torch.long, device="meta")
    sv.attach(ids, torch.tensor([[1, 9, 9, 4, 5, 6], [1, 9, 3, 9, 9, 2]]))
    emb = torch.empty(2, 6, 4, device="meta")
    with sv:
        mask = ids == 9
        n = mask.sum()
        assert n.item() == 5 and int(n) == 5 and bool(n > 4)
        nz = mask.nonzero()
        assert nz.device.type == "meta" and nz.shape == (5, 2)
        assert sv.value(nz).tolist() == [[0, 1], [0, 2], [1, 1], [1, 3], [1, 4]]
        assert ids[1].tolist() == [1, 9, 3, 9, 9, 2]
        assert emb[mask].shape == (5, 4)  # boolean index into a valueless float tensor
        assert emb.masked_select(mask.unsqueeze(-1)).shape == (20,)
        assert torch.repeat_interleave(ids[0, :3]).shape == (1 + 9 + 9,)
        assert sv.value(torch.unique(ids)).tolist() == [1, 2, 3, 4, 5, 6, 9]
        assert max(ids[0, 1], ids[0, 3]).item() == 9
        assert torch.equal(ids, ids)
        # views and in-place ops keep the shadows right
        pos = torch.zeros(3, 2, 6, dtype=torch.long, device="meta")
        pos[:, 1, mask[1]] = torch.arange(3, device="meta").view(3, 1).expand(3, 3) + 10
        assert sv.value(pos)[:, 1].tolist() == [[0, 10, 0, 10, 10, 0], [0, 11, 0, 11, 11, 0], [0, 12, 0, 12, 12, 0]]
        v = ids.clone()
        v.view(-1)[0] = 7
        assert v[0, 0].item() == 7
        # torch.tensor(...) on meta never reaches the dispatcher: the companion mode shadows it
        assert sv.value(torch.tensor([n, n + 1], device="meta")).tolist() == [5, 6]
        # a write from a valueless tensor drops the shadows of every alias: never stale
        alias = v[0]
        v.copy_(torch.empty(2, 6, device="meta"))
        assert sv.value(v) is None and sv.value(alias) is None
        # floating-point work stays valueless; value-dependent ops on it fail as before
        assert sv.value(emb * 2) is None
        with pytest.raises(RuntimeError):
            (emb.sum() > 0).item()
        with pytest.raises(NotImplementedError):
            torch.empty(3, dtype=torch.long, device="meta").nonzero()  # uninitialised: no values


def test_recorder_sees_answered_ops_once_with_their_outputs():
    sv = ShadowValues()
    ids = torch.empty(8, dtype=torch.long, device="meta")
    sv.attach(ids, torch.tensor([0, 3, 0, 3, 3, 1, 0, 3]))
    rec = Recorder(device_type="meta")
    with sv, rec:  # the recorder on top
        idx = (ids == 3).nonzero()
        count = (ids == 3).sum().item()
    # each op once, none of the CPU work on the shadows
    assert [o.op for o in rec.log.ops] == ["aten.eq.Scalar", "aten.nonzero.default", "aten.eq.Scalar",
                                       "aten.sum.default", "aten._local_scalar_dense.default"]
    assert count == 4 and idx.shape == (4, 1)
    nz = rec.log.ops[1]
    assert rec.log.storages[nz.allocated[0]].shape == (4, 1)


def test_value_dependent_op_without_values_names_op_and_module():
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            h = self.lin(x)
            return h[h > 0].sum()  # depends on float values: no shadow, must fail clearly

    spec = ModelSpec(name="net", source="callable", task="custom", factory=Net)
    with pytest.raises(TraceError, match=r"tracing failed at aten\.index\.Tensor in module 'the model's top level'"):
        trace_training(spec, TrainingOptions(inputs=("x=float32[2,4]",), target="cpu"))


def test_text_only_batches_carry_no_values():
    spec = resolve(str(CONFIGS / "tiny-llama.json"))
    opts = TrainingOptions(seq_len=16, target="cpu")
    batch_spec = spec.batch(opts, torch.float32)
    assert ShadowValues().attach_batch(batch_spec, batch_spec.make("meta")) == 0


# -- inputs like the processors make them -------------------------------------------------------------
def test_llava_layout_two_images():
    spec = resolve(str(CONFIGS / "tiny-llava.json"))
    opts = TrainingOptions(batch_size=2, seq_len=40, images=2, target="cpu")
    b = {s.name: s for s in spec.batch(opts, torch.float32).inputs}
    per_image = (32 // 8) ** 2  # CLS dropped by the "default" strategy
    assert llava_image_tokens(spec.config) == per_image
    assert b["pixel_values"].shape == (4, 3, 32, 32)
    ids, labels = b["input_ids"].value(), b["labels"].value()
    image = ids == spec.config.image_token_id
    assert image.sum(1).tolist() == [2 * per_image, 2 * per_image]
    assert ids[:, 0].tolist() == [spec.config.text_config.bos_token_id] * 2
    assert (labels[image] == IGNORE_INDEX).all() and (labels[~image] == ids[~image]).all()
    assert b["attention_mask"].value().eq(1).all()
    with pytest.raises(MemgraphError, match="--seq-len"):
        spec.batch(TrainingOptions(seq_len=20, images=2), torch.float32)
    with pytest.raises(MemgraphError, match="--image-size 32"):
        spec.batch(TrainingOptions(seq_len=40, image_size=64), torch.float32)


def test_zoo_llava_image_tokens():
    cfg = resolve("llava-1.5-7b").config
    assert llava_image_tokens(cfg) == 576  # (336/14)^2, CLS dropped
    cfg.vision_feature_select_strategy = "full"
    assert llava_image_tokens(cfg) == 577


def test_qwen2_vl_layout():
    cfg = resolve("qwen2-vl-7b").config
    assert qwen2_vl_grid(cfg, 448) == (32, 32, 256)
    assert qwen2_vl_grid(cfg, (448, 672)) == (32, 48, 384)
    assert smart_resize(500, 500) == (504, 504)  # multiples of 28, as the image processor rounds
    assert smart_resize(4000, 4000)[0] * smart_resize(4000, 4000)[1] <= 28 * 28 * 1280
    spec = resolve(str(CONFIGS / "tiny-qwen2-vl.json"))
    opts = TrainingOptions(batch_size=2, seq_len=40, images=2, image_size=(56, 84), target="cpu")
    b = {s.name: s for s in spec.batch(opts, torch.float32).inputs}
    gh, gw, tokens = 4, 6, 6
    assert b["pixel_values"].shape == (2 * 2 * gh * gw, 3 * 2 * 14 * 14)
    assert b["image_grid_thw"].value().tolist() == [[1, gh, gw]] * 4
    ids, types, labels = b["input_ids"].value(), b["mm_token_type_ids"].value(), b["labels"].value()
    assert (ids == spec.config.image_token_id).sum(1).tolist() == [2 * tokens] * 2
    assert types.eq(ids == spec.config.image_token_id).all()
    assert (ids == spec.config.vision_start_token_id).sum(1).tolist() == [2, 2]
    assert (labels[ids == spec.config.image_token_id] == IGNORE_INDEX).all()


def test_cli_image_size_and_images():
    from memgraph.cli import build_parser, training_options

    a = build_parser().parse_args(["analyze", "qwen2-vl-2b", "--image-size", "448x672", "--images", "3"])
    opts = training_options(a, target="cpu")
    assert opts.image_size == (448, 672) and opts.images == 3
    a = build_parser().parse_args(["analyze", "qwen2-vl-2b", "--image-size", "448"])
    assert training_options(a, target="cpu").image_size == 448
    assert TrainingOptions(image_size=[448, 672]).image_size == (448, 672)  # read back from JSON
    with pytest.raises(MemgraphError):
        TrainingOptions(image_size=(448, 0))


# -- traces against the CPU allocator -------------------------------------------------------------------
@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_tiny_llava_two_images_within_2_percent(optimizer):
    model = str(CONFIGS / "tiny-llava.json")
    kw = dict(batch_size=2, seq_len=64, images=2, optimizer=optimizer, target="cpu")
    r = analyze(model, **kw)
    assert "pixel_values=float32[4,3,32,32]" in r.batch
    predicted, measured = r.steady_state_peak.bytes, _measured(model, **kw)
    assert abs(predicted - measured) <= TOLERANCE * measured, (predicted, measured)


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_tiny_qwen2_vl_within_2_percent(optimizer):
    model = str(CONFIGS / "tiny-qwen2-vl.json")
    kw = dict(batch_size=2, seq_len=64, images=2, image_size=(56, 84), optimizer=optimizer, target="cpu")
    r = analyze(model, **kw)
    assert "image_grid_thw=int64[4,3]" in r.batch
    predicted, measured = r.steady_state_peak.bytes, _measured(model, **kw)
    assert abs(predicted - measured) <= TOLERANCE * measured, (predicted, measured)


# -- modality groups --------------------------------------------------------------------------------
def _modalities(name: str) -> dict[str, str]:
    data = json.loads((CONFIGS / f"{name}.json").read_text())
    spec = resolve(str(CONFIGS / f"{name}.json"))
    opts = TrainingOptions(target="cpu")
    assert data["architectures"][0] == spec.model_class
    return module_modalities(build_model(spec, opts, "meta"))


def _top(m: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in m.items() if k.count(".") <= 1}


def test_modalities_tiny_llava():
    m = _modalities("tiny-llava")
    assert _top(m) == {
        "": "shared", "model": "shared", "model.vision_tower": "vision encoder",
        "model.multi_modal_projector": "projector", "model.language_model": "language model",
        "lm_head": "language model",
    }
    assert m["model.vision_tower.encoder.layers.0.mlp.fc1"] == "vision encoder"
    assert m["model.multi_modal_projector.linear_1"] == "projector"
    assert modality_of("model.language_model.layers.1.self_attn.q_proj", m) == "language model"


def test_modalities_tiny_qwen2_vl():
    m = _modalities("tiny-qwen2-vl")
    assert m["model.visual"] == m["model.visual.blocks"] == "vision encoder"
    assert m["model.visual.merger"] == "projector"  # inside the tower, found by its role (rule 5)
    assert m["model.language_model"] == m["lm_head"] == "language model"
    assert m["model"] == m[""] == "shared"


def test_modalities_tiny_clip():
    m = _modalities("tiny-clip")
    assert {k: v for k, v in m.items() if "." not in k} == {
        "": "shared", "text_model": "text encoder", "vision_model": "vision encoder",
        "text_projection": "text encoder", "visual_projection": "vision encoder",
    }
    assert all(v == "text encoder" for k, v in m.items() if k.startswith("text_model"))
    assert all(v == "vision encoder" for k, v in m.items() if k.startswith("vision_model"))


def test_modalities_tiny_siglip():
    # SigLIP's heads live inside the towers (text_model.head, vision_model.head); logit_scale/bias on the root
    m = _modalities("tiny-siglip")
    assert {k: v for k, v in m.items() if "." not in k} == {
        "": "shared", "text_model": "text encoder", "vision_model": "vision encoder"}
    assert m["text_model.head"] == "text encoder" and m["vision_model.head"] == "vision encoder"


def test_modalities_tiny_whisper():
    m = _modalities("tiny-whisper")
    assert m["model.encoder"] == m["model.encoder.layers.0.fc1"] == "audio encoder"
    assert m["model.decoder"] == m["model.decoder.embed_tokens"] == "text decoder"
    assert m["proj_out"] == "text decoder"
    assert m[""] == m["model"] == "shared"


def test_modalities_single_tower_and_callable():
    assert set(_modalities("tiny-llama").values()) == {"language model"}
    assert set(_modalities("tiny-vit").values()) == {"vision encoder"}
    assert set(module_modalities(torch.nn.Sequential(torch.nn.Linear(2, 2))).values()) == {"model"}


def test_trace_stores_modalities():
    spec = resolve(str(CONFIGS / "tiny-llava.json"))
    t = trace_training(spec, TrainingOptions(batch_size=1, seq_len=32, target="cpu", optimizer="sgd"))
    assert t.modalities["model.multi_modal_projector"] == "projector"
    modules = {o.module for o in t.log.ops}
    assert {modality_of(p, t.modalities) for p in modules} >= {"vision encoder", "projector", "language model"}
    assert PRECISION_DTYPE["fp32"] == torch.float32
