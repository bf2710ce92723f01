"""Multimodal inputs laid out as the processors make them (LLaVA, Qwen2-VL), and their CLI options."""

import pytest
import torch

from memgraph.errors import MemgraphError
from memgraph.model_spec.multimodal_inputs import IGNORE_INDEX, llava_image_tokens, qwen2_vl_grid, smart_resize
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import resolve
from tests.conftest import CONFIGS


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
