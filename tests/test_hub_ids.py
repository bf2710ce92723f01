"""Hugging Face Hub ids without a network (memgraph/model_spec/hub.py): the zoo entry of that source, else the
local Hugging Face cache, else one line."""

import json

import pytest

from memgraph.api import analyze
from memgraph.cli import main
from memgraph.errors import MemgraphError
from memgraph.model_spec.sources import resolve
from tests.conftest import CONFIGS, TINY_LLAMA_PARAMETERS


def test_zoo_source_id_resolves_to_the_zoo_entry():
    spec = resolve("meta-llama/Llama-2-7b-hf")  # `memgraph models` lists it as llama-2-7b's source
    assert spec.source == "zoo" and spec.name == "llama-2-7b"
    assert spec.config.num_hidden_layers == 32 and spec.config.hidden_size == 4096  # Llama-2-7B's config.json


def _cache(root, hub_id: str, commit: str, config: dict, processor: dict | None = None):
    repo = root / ("models--" + hub_id.replace("/", "--"))
    snap = repo / "snapshots" / commit
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps(config))
    if processor is not None:
        (snap / "preprocessor_config.json").write_text(json.dumps(processor))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    return snap


def test_cached_hub_id_analyses(tmp_path, monkeypatch):
    tiny = json.loads((CONFIGS / "tiny-llama.json").read_text())
    _cache(tmp_path, "someone/tiny-llama", "0123abcd", tiny)
    # an older snapshot refs/main does not name: not the one read
    (tmp_path / "models--someone--tiny-llama" / "snapshots" / "old").mkdir()
    (tmp_path / "models--someone--tiny-llama" / "snapshots" / "old" / "config.json").write_text("{}")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    spec = resolve("someone/tiny-llama")
    assert spec.source == "config" and spec.name == "someone/tiny-llama"
    result = analyze("someone/tiny-llama", seq_len=32, target="cpu")
    assert result.parameters == TINY_LLAMA_PARAMETERS  # 202,048: tests/conftest.py counts it by hand


def test_hf_home_and_preprocessor_image_size(tmp_path, monkeypatch):
    vit = json.loads((CONFIGS / "tiny-vit.json").read_text())
    _cache(tmp_path / "hub", "someone/tiny-vit", "feed", vit,
           processor={"do_resize": True, "size": {"height": 48, "width": 48}})
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    spec = resolve("someone/tiny-vit")
    assert spec.defaults["image_size"] == 48  # the processor's resize, as transformers' ViTImageProcessor makes it


def test_unknown_hub_id_fails_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(MemgraphError, match="never downloads"):
        resolve("nobody/no-such-model")
    assert main(["analyze", "nobody/no-such-model"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "huggingface-cli download nobody/no-such-model config.json" in err
