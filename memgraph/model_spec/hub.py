"""Hugging Face Hub ids (``meta-llama/Llama-2-7b-hf``) without a network.

An id resolves, in this order, to:

1. the zoo entry whose source config is that id (``memgraph models`` lists each entry's ``hf_id``);
2. the local Hugging Face cache, if the model was downloaded before (by ``from_pretrained``,
   ``huggingface-cli download``, ...). The cache layout is huggingface_hub's (huggingface_hub 0.x/1.x,
   ``constants.py`` and ``file_download.py``): the folder is ``HF_HUB_CACHE`` (legacy
   ``HUGGINGFACE_HUB_CACHE``), else ``$HF_HOME/hub``, else ``$XDG_CACHE_HOME/huggingface/hub``, else
   ``~/.cache/huggingface/hub``; a model lives in ``models--{org}--{name}`` with ``refs/main`` holding the commit
   of the snapshot ``snapshots/{commit}/`` that ``from_pretrained`` loads (``config.json``, and for vision
   models ``preprocessor_config.json``);
3. otherwise one line: memgraph never downloads; fetch the config or pass a config.json.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from memgraph.errors import MemgraphError
from memgraph.model_spec import zoo

# huggingface_hub's repo id rule (utils/_validators.py validate_repo_id): [org/]name of letters, digits, - _ .
HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}")


def is_hub_id(ref: str) -> bool:
    """Whether ``ref`` has the form of a Hub model id ``org/name`` (and is not a path on this machine)."""
    return bool(HUB_ID.fullmatch(ref)) and not ref.endswith(".json") and ".." not in ref and not Path(ref).exists()


def zoo_entry(hub_id: str) -> zoo.ZooEntry | None:
    """The zoo entry whose source is ``hub_id`` (case-insensitive, as the Hub's ids are)."""
    return next((e for e in zoo.entries() if e.hf_id.lower() == hub_id.lower()), None)


def cache_dirs() -> list[Path]:
    """The Hugging Face cache folders to look in, first the one huggingface_hub would use."""
    env = os.environ
    if env.get("HF_HUB_CACHE"):
        return [Path(env["HF_HUB_CACHE"]).expanduser()]
    if env.get("HUGGINGFACE_HUB_CACHE"):
        return [Path(env["HUGGINGFACE_HUB_CACHE"]).expanduser()]
    if env.get("HF_HOME"):
        return [Path(env["HF_HOME"]).expanduser() / "hub"]
    xdg = env.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return [base / "huggingface" / "hub"]


def cached_snapshot(hub_id: str) -> Path | None:
    """The cached snapshot folder of ``hub_id`` holding its config.json, or None."""
    for root in cache_dirs():
        repo = root / ("models--" + hub_id.replace("/", "--"))
        if not repo.is_dir():
            continue
        snapshots = repo / "snapshots"
        ref = repo / "refs" / "main"
        if ref.is_file():  # what from_pretrained(revision="main") loads offline
            commit = ref.read_text().strip()
            folder = snapshots / commit
            if (folder / "config.json").is_file():
                return folder
        candidates = sorted((p for p in snapshots.glob("*") if (p / "config.json").is_file()),
                            key=lambda p: p.stat().st_mtime) if snapshots.is_dir() else []
        if candidates:  # no refs/main (a download by commit): the newest snapshot with a config
            return candidates[-1]
    return None


def processor_image_size(folder: Path) -> int | tuple[int, int] | None:
    """The image size a cached ``preprocessor_config.json`` makes (center crop if it crops, else the resize),
    as transformers' image processors read ``crop_size`` / ``size`` (``height``/``width`` or ``shortest_edge``)."""
    file = folder / "preprocessor_config.json"
    if not file.is_file():
        return None
    try:
        data = json.loads(file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise MemgraphError(f"{str(file)!r} is not valid JSON: delete or re-download it") from None
    if not isinstance(data, dict):
        return None
    size = data.get("crop_size") if data.get("do_center_crop") else data.get("size")
    if isinstance(size, int) and size > 0:
        return size
    if isinstance(size, dict):
        h, w = size.get("height"), size.get("width")
        if isinstance(h, int) and isinstance(w, int) and h > 0 and w > 0:
            return h if h == w else (h, w)
        edge = size.get("shortest_edge")
        if isinstance(edge, int) and edge > 0 and data.get("do_center_crop") is False:
            return None  # the other side follows each image's aspect ratio: leave the model's default
    return None


def not_fetched(hub_id: str) -> MemgraphError:
    where = cache_dirs()[0]
    return MemgraphError(
        f"{hub_id!r} is not in the zoo and not in the Hugging Face cache ({where}); memgraph never downloads: "
        f"fetch its config (huggingface-cli download {hub_id} config.json) or pass a config.json path")
