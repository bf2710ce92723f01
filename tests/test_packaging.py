"""The wheel's package list (pyproject.toml) names every package under memgraph/ and the zoo."""

from pathlib import Path

import pytest
import setuptools

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[1]


def _declared() -> set[str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return set(data["tool"]["setuptools"]["packages"])


def test_every_memgraph_package_is_declared():
    found = set(setuptools.find_packages(where=str(ROOT), include=["memgraph", "memgraph.*"]))
    missing = found - _declared()
    assert not missing, f"add {sorted(missing)} to [tool.setuptools] packages in pyproject.toml"


def test_zoo_ships_as_package_data():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "memgraph_zoo" in _declared()
    assert data["tool"]["setuptools"]["package-dir"]["memgraph_zoo"] == "models"
    assert data["tool"]["setuptools"]["package-data"]["memgraph_zoo"] == ["*.json"]
    assert len(list((ROOT / "models").glob("*.json"))) >= 20
