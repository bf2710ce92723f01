"""The built-in model zoo: ``models/<name>.json`` files with published configs and default inputs."""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from memgraph.errors import MemgraphError


@dataclass(frozen=True)
class ZooEntry:
    name: str
    hf_id: str
    family: str
    task: str
    model_class: str
    defaults: dict
    published_params: int
    notes: str
    config: dict


def zoo_dir() -> Path:
    """Folder of zoo JSON files: the source tree's ``models/`` when memgraph runs from a source tree
    (a checkout, an editable install), else the installed ``memgraph_zoo`` package (a wheel)."""
    source = Path(__file__).resolve().parents[2] / "models"
    if (source / "__init__.py").is_file():
        return source
    try:
        return Path(str(resources.files("memgraph_zoo")))
    except ModuleNotFoundError:
        raise MemgraphError("the model zoo is missing: memgraph_zoo is not installed; reinstall memgraph "
                            "(pip install memgraph or pip install -e . from a checkout)") from None


@lru_cache(maxsize=1)
def _entries() -> dict[str, ZooEntry]:
    out = {}
    for path in sorted(zoo_dir().glob("*.json")):
        data = json.loads(path.read_text())
        out[data["name"]] = ZooEntry(**{k: data[k] for k in ZooEntry.__dataclass_fields__})
    return out


def names() -> list[str]:
    return list(_entries())


def entries() -> list[ZooEntry]:
    return list(_entries().values())


def _length(name: str) -> str:
    """`` (300 characters)`` for a name too long to show whole (longer than a file name may be, too)."""
    return f" ({len(name):,} characters)" if len(name) > 100 else ""


def get(name: str) -> ZooEntry:
    table = _entries()
    if name in table:
        return table[name]
    lowered = {k.lower(): k for k in table}
    if name.lower() in lowered:
        return table[lowered[name.lower()]]
    close = difflib.get_close_matches(name.lower(), list(lowered), n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(lowered[c] for c in close)}? " if close else ""
    raise MemgraphError(
        f"unknown model {name if len(name) <= 100 else name[:60] + '...'!r}{_length(name)}: {hint}run 'memgraph models' for the zoo, or pass a config.json path "
        "or module:function"
    )
