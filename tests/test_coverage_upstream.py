"""tools/coverage.py names a known transformers bug in a row's reason only while the real run still fails with
that bug's own error (a fixed transformers, or another failure, shows the raw error alone)."""

from tools.coverage import upstream_bug


def test_known_bug_named_only_for_its_own_error():
    kimi = RuntimeError("split_with_sizes expects split_sizes to sum exactly to 144 (input tensor's size at "
                        "dimension 0), but got split_sizes=[576]")
    assert upstream_bug("video-text-to-text", "kimi_k25", kimi).startswith(
        "transformers 5.23 bug, modeling_kimi_k25.py Kimi_K25Model.get_image_features")
    assert upstream_bug("video-text-to-text", "kimi_k25", RuntimeError("out of memory")) == ""
    assert upstream_bug("image-text-to-text", "kimi_k25", kimi) == ""  # its image rows run (-0.043%)
    cat = TypeError("cat(): argument 'tensors' (position 1) must be tuple of Tensors, not Tensor")
    assert "NemotronH_Omni_Reasoning_V3" in upstream_bug("video-text-to-text", "nemotron_h_omni", cat)
