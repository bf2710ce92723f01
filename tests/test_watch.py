"""The progress line (terminals only) and --timeout (stops with where the analysis was)."""

import io
import time

import pytest

from memgraph.cli import main
from memgraph.trace.record import progress
from memgraph.watch import AnalysisTimeout, progress_line, time_budget

SLOW_MODEL = '''
import time
import torch

class Slow(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = self.lin(x)
        time.sleep(30)  # the budget must stop this, not wait for it
        return y

def build():
    return Slow()
'''


def test_time_budget_raises_with_the_position():
    progress.stage("spinning")
    start = time.monotonic()
    with pytest.raises(AnalysisTimeout, match=r"stopped after 0.2 s \(--timeout\) while spinning"):
        with time_budget(0.2):
            while time.monotonic() - start < 10:
                pass
    assert time.monotonic() - start < 5


def test_timeout_names_stage_module_and_op(tmp_path, capsys):
    (tmp_path / "slow.py").write_text(SLOW_MODEL)
    start = time.monotonic()
    code = main(["analyze", f"{tmp_path}/slow.py:build", "--input", "x=float32[2,4]", "--timeout", "1"])
    err = capsys.readouterr().err
    assert code == 2 and time.monotonic() - start < 20
    assert err.count("\n") == 1 and "stopped after 1 s (--timeout) while tracing: iteration 1, forward" in err
    assert "module lin" in err and "aten.addmm" in err


def test_progress_line_only_on_a_terminal():
    piped = io.StringIO()
    with progress_line(piped):  # StringIO is not a terminal: nothing is drawn
        time.sleep(0.6)
    assert piped.getvalue() == ""
    shown = io.StringIO()
    progress.stage("building the model")
    with progress_line(shown, enabled=True):
        time.sleep(1.2)
    text = shown.getvalue()
    assert "memgraph: building the model" in text and text.endswith("\r")  # erased at the end
