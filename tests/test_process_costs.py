"""The CLI process pays only for what its command uses (issue 17; figures in reports/speed.md).

The costs themselves are measured by benchmarks/speed_report.py, never by a timed test; these check the
mechanisms: what is imported, and when the cyclic collector runs.
"""

from __future__ import annotations

import gc
import importlib.metadata
import json
import logging
import subprocess
import sys

import pytest

from memgraph import cli


def _python(code: str) -> str:
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return p.stdout.strip()


@pytest.mark.cli
def test_plain_module_analysis_never_imports_transformers(tmp_path):
    out = tmp_path / "mlp.json"
    imported = _python(
        "import sys; from memgraph.cli import main; "
        f"main(['analyze', 'tests.fixtures.nets:mlp', '--input', 'x=float32[4,16]', '-o', {str(out)!r}]); "
        "print('transformers' in sys.modules)")
    assert imported == "False"
    # the report still names the installed transformers, from its package metadata
    assert json.loads(out.read_text())["versions"]["transformers"] == importlib.metadata.version("transformers")


@pytest.mark.cli
def test_transformers_imported_after_the_cli_started_logs_errors_only():
    # _quiet_transformers sets TRANSFORMERS_VERBOSITY before transformers exists: its logger then starts at ERROR
    level = _python("from memgraph.cli import main; main(['gpus']); "
                    "from transformers.utils import logging as l; print(l.get_verbosity())")
    assert int(level.splitlines()[-1]) == logging.ERROR  # after the gpus table


def test_transformers_already_imported_is_set_to_errors(monkeypatch):
    from transformers.utils import logging as hf_logging

    monkeypatch.setenv("TRANSFORMERS_VERBOSITY", "info")  # monkeypatch restores it
    before = hf_logging.get_verbosity()
    try:
        hf_logging.set_verbosity_info()
        cli._quiet_transformers()
        assert hf_logging.get_verbosity() == logging.ERROR
    finally:
        hf_logging.set_verbosity(before)


@pytest.fixture
def collector_paused():
    """The collector as run() leaves it before main: paused; restored afterwards."""
    was = gc.isenabled()
    gc.disable()
    yield
    gc.unfreeze()
    if was:
        gc.enable()


def test_listing_commands_keep_the_collector_paused(collector_paused, capsys):
    assert cli.main(["gpus"]) == 0
    assert not gc.isenabled()


def test_validate_gets_the_collector_back(collector_paused, tmp_path, capsys):
    cli.main(["validate", "--groundtruth", str(tmp_path)])  # an empty folder: whatever it answers, after imports
    assert gc.isenabled()
    assert "memgraph.api" in sys.modules
