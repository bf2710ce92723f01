"""The per-modality table's audio and video rows: an audio-language model's audio encoder, and the vision tower
of a step with --video-frames (model_spec/modality.py ``with_video``)."""

from memgraph.api import analyze
from memgraph.model_spec.modality import VIDEO, VISION, VISION_AND_VIDEO, with_video
from memgraph.model_spec.options import TrainingOptions
from tests.conftest import CONFIGS, needs_audio_processors


def test_with_video_names_the_vision_tower_by_its_inputs():
    groups = {"visual": VISION, "visual.blocks.0": VISION, "model.language_model": "language model"}
    assert with_video(groups, {"video_frames": None}) == groups
    assert with_video(groups, {"video_frames": 4, "images": None})["visual.blocks.0"] == VIDEO
    both = with_video(groups, {"video_frames": 4, "images": 1})
    assert both["visual"] == VISION_AND_VIDEO and both["model.language_model"] == "language model"


def test_a_video_step_has_a_video_row():
    opts = TrainingOptions(seq_len=320, batch_size=1, target="cpu", image_size=56, video_frames=4)
    rows = {m.modality: m for m in analyze(str(CONFIGS / "tiny-qwen2-vl.json"), opts).modalities}
    assert VIDEO in rows and VISION not in rows and rows[VIDEO].saved_activation_bytes > 0


@needs_audio_processors
def test_an_audio_language_model_has_an_audio_row():
    opts = TrainingOptions(seq_len=300, batch_size=1, target="cpu", audio_seconds=10)
    rows = {m.modality: m for m in analyze(str(CONFIGS / "tiny-qwen2-audio.json"), opts).modalities}
    # the tiny Qwen2-Audio encoder (d_model 32, 2 layers, 128 mel bins, 1500 positions): conv1 128*32*3 + 32 =
    # 12,320; conv2 32*32*3 + 32 = 3,104; positions 1500*32 = 48,000 (frozen: sinusoidal); per layer q, v, o
    # 32*32 + 32 and k 32*32 (no bias) = 4,192, two layer norms 128, fc1 32*64 + 64 = 2,112, fc2 64*32 + 32 = 2,080:
    # 8,512 x 2 = 17,024; final layer norm 64; total 80,512, trainable 80,512 - 48,000 = 32,512
    audio = rows["audio encoder"]
    assert (audio.parameters, audio.trainable_parameters) == (80_512, 32_512)
    assert rows["projector"].parameters == 32 * 32 + 32  # multi_modal_projector.linear: d_model -> text hidden
