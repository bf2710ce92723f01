"""--min-pixels / --max-pixels: Qwen2-VL's smart_resize budget from the flag, the released checkpoint's
preprocessor_config.json (zoo defaults), or the processor class's default (model_spec/pixel_budget.py)."""

import pytest
import torch

from memgraph.cli import main
from memgraph.errors import MemgraphError
from memgraph.model_spec.input_warnings import input_warnings
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.pixel_budget import CLASS_MAX_PIXELS, pixel_budget
from memgraph.model_spec.sources import resolve
from tests.conftest import CONFIGS


def _rows(spec, **options):
    opts = TrainingOptions(seq_len=8192, target="cpu", **options)
    return {s.name: s for s in spec.batch(opts, torch.float32).inputs}


def test_the_checkpoint_budget_is_the_default_for_the_zoo_qwen2_vl():
    spec = resolve("qwen2-vl-2b")
    budget = pixel_budget(TrainingOptions(), spec.defaults)
    assert (budget.min_pixels, budget.max_pixels) == (3136, 12845056)  # Qwen2-VL-2B-Instruct's preprocessor_config
    # 2048 px: round(2048 / 28) = 73 -> 2044 px; 2044^2 = 4,177,936 <= 12,845,056, kept: 146 x 146 patches of 14 px
    b = _rows(spec, image_size=2048)
    assert b["pixel_values"].shape == (146 * 146, 3 * 2 * 14 * 14)
    assert b["image_grid_thw"].value().tolist() == [[1, 146, 146]]
    assert (b["input_ids"].value() == spec.config.image_token_id).sum() == 146 * 146 // 4  # 5,329 after 2x2 merge


def test_max_pixels_flag_overrides_the_checkpoint():
    spec = resolve("qwen2-vl-2b")
    # class budget 1,003,520: 2044^2 is above it, beta = sqrt(2048^2 / 1,003,520) = 2.0444;
    # floor(2048 / 2.0444 / 28) = floor(35.78) = 35 -> 980 px, 70 x 70 patches: what 1024 px also becomes
    b2048 = _rows(spec, image_size=2048, max_pixels=CLASS_MAX_PIXELS)
    b1024 = _rows(spec, image_size=1024, max_pixels=CLASS_MAX_PIXELS)
    assert b2048["image_grid_thw"].value().tolist() == b1024["image_grid_thw"].value().tolist() == [[1, 70, 70]]
    # with the checkpoint's budget 1024 px stays distinct: round(1024 / 28) = 37 -> 1036 px, 74 x 74 patches
    assert _rows(spec, image_size=1024)["image_grid_thw"].value().tolist() == [[1, 74, 74]]


def test_min_pixels_scales_a_small_image_up():
    spec = resolve("qwen2-vl-2b")
    # 112 px: 112^2 = 12,544 < 200,704 = 448^2 -> beta = sqrt(200,704 / 12,544) = 4, ceil(112 * 4 / 28) * 28 = 448
    b = _rows(spec, image_size=112, min_pixels=448 * 448)
    assert b["image_grid_thw"].value().tolist() == [[1, 32, 32]]


def test_the_warning_names_the_budget_and_its_source():
    spec = resolve("qwen2-vl-2b")
    [line] = input_warnings(spec, TrainingOptions(seq_len=8192, image_size=2048))
    assert "2044x2044" in line and "max_pixels 12,845,056 (the checkpoint's preprocessor_config.json)" in line
    [line] = input_warnings(spec, TrainingOptions(seq_len=8192, image_size=2048, max_pixels=CLASS_MAX_PIXELS))
    assert "980x980" in line and "max_pixels 1,003,520 (--max-pixels)" in line


def test_a_config_without_checkpoint_figures_takes_the_class_default():
    spec = resolve(str(CONFIGS / "tiny-qwen2-vl.json"))
    budget = pixel_budget(TrainingOptions(), spec.defaults)
    assert (budget.min_pixels, budget.max_pixels) == (56 * 56, 28 * 28 * 1280)
    assert "class default" in budget.describe()


def test_bad_budgets_are_refused(capsys):
    with pytest.raises(MemgraphError, match="--min-pixels 1,000,000 is above --max-pixels 200,704"):
        pixel_budget(TrainingOptions(min_pixels=1_000_000, max_pixels=448 * 448), {})
    with pytest.raises(MemgraphError, match="--max-pixels applies to processors that resize by pixel count"):
        resolve(str(CONFIGS / "tiny-llava.json")).batch(TrainingOptions(seq_len=64, max_pixels=10**6), torch.float32)
    with pytest.raises(SystemExit) as exit_:
        main(["analyze", "qwen2-vl-2b", "--max-pixels", "0"])
    assert exit_.value.code == 2 and "argument --max-pixels: '0' must be >= 1" in capsys.readouterr().err
