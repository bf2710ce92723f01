"""Weights a script loads from disk: shapes and dtypes only, on meta, each load named in the report.

* ``PreTrainedModel.from_pretrained(path)`` (also reached through ``AutoModel*.from_pretrained``): the model is
  built from its config on meta (``_from_config``, memgraph/private_api.py ``model_from_config``), in the dtype
  asked (``dtype=`` / ``torch_dtype=``; ``"auto"`` or none: the config's own dtype, else float32) and with the
  ``attn_implementation`` asked; no weight file is read. The config must be readable without a download (a
  local folder, or a Hub id already in the local cache): memgraph run never downloads.
* ``torch.load(f)``: loaded with ``map_location="meta"`` (every tensor with its saved shape and dtype, no
  values), so ``model.load_state_dict(torch.load(...))`` and resuming an optimizer keep their shapes.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from unittest import mock

import torch

from memgraph.private_api import model_from_config

_REAL_LOAD = torch.load


@contextlib.contextmanager
def weights_on_meta(loads: Counter):
    """While open, weight loads build on meta (see the module docstring); ``loads`` counts them by kind."""

    def load(f, *args, **kwargs):
        loads[f"torch.load({f!r})"] += 1
        kwargs.pop("map_location", None)
        return _REAL_LOAD(f, *args[1:] if args else (), map_location="meta", **kwargs)

    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(torch, "load", load))
        transformers = _transformers()
        if transformers is not None:
            stack.enter_context(mock.patch.object(transformers.PreTrainedModel, "from_pretrained",
                                                  classmethod(_from_pretrained(loads))))
        yield


def _transformers():
    import sys

    if "transformers" not in sys.modules:  # imported now (about a CPU second) so that the script's import finds
        try:                                 # it patched; without transformers installed there is nothing to patch
            import transformers
        except ImportError:
            return None
    return sys.modules["transformers"]


def _from_pretrained(loads: Counter):
    def from_pretrained(cls, path, *model_args, config=None, **kwargs):
        from transformers import AutoConfig

        if config is None or isinstance(config, str):
            config = AutoConfig.from_pretrained(config or path, local_files_only=True,
                                                trust_remote_code=kwargs.get("trust_remote_code", False))
        dtype = kwargs.get("dtype", kwargs.get("torch_dtype"))
        if dtype in (None, "auto"):
            dtype = getattr(config, "dtype", None) or torch.float32
        if isinstance(dtype, str):
            dtype = getattr(torch, dtype)
        loads[f"{cls.__name__}.from_pretrained({str(path)!r}) built on meta in {str(dtype).removeprefix('torch.')}"] += 1
        with torch.device("meta"):
            return model_from_config(cls, config, kwargs.get("attn_implementation"), dtype)

    return from_pretrained


def load_notes(loads: Counter) -> list[str]:
    return [f"weights: {what}, {n} time(s): shapes and dtypes only, no values read (memgraph run reads no weights)"
            for what, n in loads.items()]


__all__ = ["load_notes", "weights_on_meta"]
