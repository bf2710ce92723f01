"""Shared test set-up: the fast/full split and the golden-file option.

``python -m pytest`` runs the fast tests (pure logic, hand-computed numbers, meta traces of tiny
models). Tests marked ``slow`` (they run a real training step on the CPU, or re-predict many
stored measurements) and ``cli`` (they start the CLI in a subprocess) are skipped unless
``--full`` is given; CI runs ``python -m pytest --full``.
"""

import gc
from pathlib import Path

import pytest

CONFIGS = Path(__file__).parent / "configs"
REPO = Path(__file__).parent.parent
# tests/configs/tiny-llama.json's parameters by hand: embedding 1000 x 64 = 64,000; per layer q 64x64 = 4,096, k and
# v 64x32 (2 kv heads x head dim 16) = 2,048 each, o 4,096, gate/up/down 64x128 = 8,192 each, two RMSNorm weights of
# 64: 36,992; 2 layers 73,984; final norm 64; lm_head 64 x 1000 = 64,000 (not tied): 202,048
TINY_LLAMA_PARAMETERS = 64_000 + 2 * (4_096 + 2 * 2_048 + 4_096 + 3 * 8_192 + 2 * 64) + 64 + 64_000

FULL_ONLY = ("slow", "cli")


def deep_tiny_llama(tmp_path: Path, layers: int = 12) -> str:
    """tests/configs/tiny-llama.json with ``layers`` layers (12: at least depth synthesis' MIN_DEPTH, 10), written
    under ``tmp_path``; its path."""
    import json

    config = json.loads((CONFIGS / "tiny-llama.json").read_text())
    config["num_hidden_layers"] = layers
    deep = tmp_path / "deep-llama.json"
    deep.write_text(json.dumps(config))
    return str(deep)


def tiny_llama_fit_setup(gpu: str, **kw):
    """tests/configs/tiny-llama.json resolved, and its options at 32 tokens on ``gpu`` (plus ``kw``) with
    memgraph's defaults resolved: the step ``memgraph fit`` starts from."""
    from memgraph.model_spec.defaults import resolve_defaults
    from memgraph.model_spec.options import TrainingOptions
    from memgraph.model_spec.sources import resolve

    spec = resolve(str(CONFIGS / "tiny-llama.json"))
    return spec, resolve_defaults(spec, TrainingOptions(seq_len=32, gpu=gpu, **kw)).options


def traced_depths(monkeypatch) -> list[int]:
    """The depths (layer counts) of every real trace made from now on in this test, in order."""
    import memgraph.trace.tracer as tracer

    depths = []
    real = tracer._trace_all_layers
    monkeypatch.setattr(tracer, "_trace_all_layers",
                        lambda s, o, rank=0: depths.append(s.config.num_hidden_layers) or real(s, o, rank))
    return depths


def _needs(touch_point: str):
    """Skip where the installed library predates ``touch_point`` (private_api.py ``_guard(..., since=...)``)."""
    from memgraph.private_api import unavailable

    why = unavailable(touch_point)
    return pytest.mark.skipif(why is not None, reason=str(why))


# audio-language inputs need transformers>=5.16 (private_api.py, transformers_audio_processors); CI's lower end
# (transformers 5.6) checks instead that they are refused with the version to install (test_private_api.py)
needs_audio_processors = _needs("transformers_audio_processors")
SKIP_REASON = "{marker} test: run it with `python -m pytest --full` (what CI runs)"


def pytest_addoption(parser):
    group = parser.getgroup("memgraph")
    group.addoption("--full", action="store_true", default=False,
                    help="also run the slow (live CPU measurements) and cli (subprocess) tests, as CI does")
    group.addoption("--update-golden", action="store_true", default=False,
                    help="rewrite tests/golden/ from the current renderers instead of comparing with it")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--full"):
        return
    for item in items:
        marker = next((m for m in FULL_ONLY if m in item.keywords), None)
        if marker:
            item.add_marker(pytest.mark.skip(reason=SKIP_REASON.format(marker=marker)))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if config.getoption("--full"):
        return
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if "--full" in str(r.longrepr)]
    if skipped:
        terminalreporter.write_line(f"{len(skipped)} slow/cli tests skipped: `python -m pytest --full` runs "
                                    "everything (CI does)")


def pytest_unconfigure(config):
    """At exit pytest's unraisable-exception check runs gc.collect() five times (pytest 8.4-9,
    _pytest/unraisableexception.py ``cleanup``), each a walk over every object the session left (torch,
    transformers, the traced models: 0.27 CPU s each for the 478,272 objects left by test_cli.py and
    test_lora.py alone). One collection here finds the garbage cycles and
    their ``__del__`` errors; the heap is then frozen, so that those five walk only what was made after it."""
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def _repo_cwd(monkeypatch):
    """Tests name callables as tests.fixtures.nets:NAME, importable from the repository root."""
    monkeypatch.chdir(REPO)
