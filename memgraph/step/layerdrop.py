"""LayerDrop: the step where every layer runs, in the trace and in the real step alike.

Many transformers encoders and decoders (M2M100, NLLB, BART-likes, Wav2Vec2, Whisper, ...) skip each layer
in training with probability ``layerdrop`` (Fan et al., "Reducing Transformer Depth on Demand with Structured
Dropout"): ``dropout_probability = torch.rand([])`` then ``if dropout_probability < self.layerdrop: continue``
(transformers 5.23, e.g. models/m2m_100/modeling_m2m_100.py ``M2M100Encoder.forward``; other models read
``self.config.layerdrop`` or ``self.config.speech_encoder_layerdrop``). The draw is a host random number: a
dropped layer saves no activations and its parameters get no gradient, and an optimizer creates no state for
a parameter until it first has a gradient. So the memory of one step depends on the draws: tiny M2M100
(``encoder_layerdrop = decoder_layerdrop = 0.05``) measured on the CPU with seed 0 drops a decoder layer in
iteration 1, so iteration 2 still creates that layer's AdamW state (102,760 B) and peaks 65,152 B below
iteration 3, the first step with every layer and all the state (1,145,588 B).

The steady-state peak of a long run is that of a step in which no layer is dropped (each step has
probability ``prod(1 - p)`` over the layers, so a long run has many) after every parameter has state.
:func:`every_layer_runs` sets every LayerDrop probability of a model to 0 while it is open, and the trace and
``memgraph measure`` (memgraph/measure/real_step.py) both run their iterations inside it, so both describe
that step; the trace says so in a note.
"""

from __future__ import annotations

import contextlib

import torch

_SUFFIX = "layerdrop"  # module attributes and config fields named ...layerdrop (transformers' convention)


def _configs(model: torch.nn.Module) -> list:
    """The model's config objects (each module's ``config`` and their sub-configs), each once."""
    seen, out = set(), []
    stack = [getattr(m, "config", None) for m in model.modules()]
    while stack:
        cfg = stack.pop()
        if cfg is None or id(cfg) in seen or not hasattr(cfg, "to_dict"):
            continue
        seen.add(id(cfg))
        out.append(cfg)
        stack += [v for v in vars(cfg).values() if hasattr(v, "to_dict")]
    return out


def _drops(model: torch.nn.Module) -> list[tuple[object, str, float, str]]:
    """(owner, attribute, probability, name) of every LayerDrop probability above 0."""
    found = []
    for name, module in model.named_modules():
        p = vars(module).get("layerdrop")
        if isinstance(p, float) and p > 0:
            found.append((module, "layerdrop", p, f"{name or type(module).__name__}.layerdrop"))
    for cfg in _configs(model):
        for attr, p in vars(cfg).items():
            if attr.endswith(_SUFFIX) and isinstance(p, float) and p > 0:
                found.append((cfg, attr, p, f"config.{attr}"))
    return found


@contextlib.contextmanager
def every_layer_runs(model: torch.nn.Module):
    """While open, no layer of ``model`` is dropped; yields the names and probabilities set to 0."""
    drops = _drops(model)
    for owner, attr, _p, _name in drops:
        setattr(owner, attr, 0.0)
    try:
        yield [(name, p) for _o, _a, p, name in drops]
    finally:
        for owner, attr, p, _name in drops:
            setattr(owner, attr, p)


def layerdrop_note(dropped: list[tuple[str, float]]) -> list[str]:
    """The trace note for the LayerDrop probabilities :func:`every_layer_runs` set to 0 (none: no note)."""
    if not dropped:
        return []
    named = ", ".join(sorted({f"{name.rsplit('.', 1)[-1]} {p:g}" for name, p in dropped}))
    return [f"LayerDrop ({named}): training skips each layer at random; traced with every layer run, the step a "
            "long run's peak comes from (step/layerdrop.py)"]


__all__ = ["every_layer_runs", "layerdrop_note"]
