"""The KV cache a training forward builds when config.use_cache is True, named in the notes."""

from memgraph.api import analyze
from tests.conftest import CONFIGS


def test_kv_cache_bytes_by_hand():
    # tiny-llama: 2 layers x (keys, values) x batch 2 x 2 KV heads x 64 tokens x head dim 16 x 4 bytes
    # the plain loop holds the outputs (and so the cache) through the step; the trainer loop (the default for
    # transformers models) drops them before backward, and the note is not given
    r = analyze(str(CONFIGS / "tiny-llama.json"), batch_size=2, seq_len=64, optimizer="sgd", target="cpu", loop="plain")
    assert 2 * 2 * 2 * 2 * 64 * 16 * 4 == 65_536
    (note,) = [n for n in r.notes if n.startswith("KV cache")]
    assert "(64.00 KiB)" in note


def test_no_kv_cache_note_for_encoders():
    r = analyze(str(CONFIGS / "tiny-bert.json"), batch_size=1, seq_len=16, optimizer="sgd", target="cpu")
    assert not [n for n in r.notes if n.startswith("KV cache")]
