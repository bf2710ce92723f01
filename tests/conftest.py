from pathlib import Path

import pytest

CONFIGS = Path(__file__).parent / "configs"
REPO = Path(__file__).parent.parent


@pytest.fixture(autouse=True)
def _repo_cwd(monkeypatch):
    """Tests name callables as tests.fixtures.nets:NAME, importable from the repository root."""
    monkeypatch.chdir(REPO)
