"""Which modality each module of a model belongs to, read from the model's own structure.

:func:`module_modalities` maps every module path (state_dict style, ``""`` is the model itself)
to one of these groups:

``"vision encoder"``, ``"audio encoder"``, ``"text encoder"``
    a tower that encodes one input modality;
``"language model"``
    the text tower of a model that generates text (and its output head);
``"text decoder"``
    the decoder of an encoder-decoder model (and its output head);
``"projector"``
    a module outside every tower of a text-generating model with a non-text tower: it can
    only sit between that tower and the language model (LLaVA's ``multi_modal_projector``);
``"shared"``
    containers whose children span several towers (the model itself, LLaVA's ``model``),
    and what no rule places (CLIP's ``logit_scale`` lives on the root, T5's ``shared``
    embedding feeds encoder and decoder);
``"model"``
    every module of a model without a transformers config (a user's callable).

The rule, in order:

1. **Towers from sub-configs.** For each sub-config of the model's config (``type(config).sub_configs``:
   ``vision_config``, ``text_config``, ``audio_config``, ``encoder``/``decoder``, ...), the tower is
   the shallowest module whose ``.config`` *is* that sub-config object (transformers builds each
   tower from its sub-config), else the shallowest whose config has the sub-config's class.
   The group comes from the sub-config's name: ``vision``/``image`` -> vision encoder,
   ``audio``/``speech`` -> audio encoder, ``text`` -> language model when the model has output
   embeddings (it generates text: LLaVA, Qwen2-VL) or text encoder when it does not (CLIP, SigLIP),
   ``encoder`` -> named by the encoder's input (below), ``decoder`` -> text decoder; any other name
   is used as is.
2. **Encoder-decoder models without sub-configs** (Whisper, T5, Bart): ``get_encoder()`` is the
   encoder, named by its main input (``input_features``/``input_values`` -> audio encoder,
   ``pixel_values`` -> vision encoder, ``input_ids`` -> text encoder); ``get_decoder()`` is the
   text decoder.
3. **Single-tower models** (Llama, BERT, ViT, ResNet): every module gets the group of the model's
   main input (``input_ids`` -> language model, ``pixel_values`` -> vision encoder, audio
   features -> audio encoder).
4. Everything inside a tower belongs to it. The output embeddings (``get_output_embeddings()``,
   e.g. ``lm_head``, Whisper's ``proj_out``) belong to the text-producing tower. A strict ancestor
   of a tower is ``"shared"``. Any other module outside the towers: in a text-generating model
   with a non-text tower it is a ``"projector"``; otherwise (contrastive models) it joins the one
   tower whose modality word its name contains (``visual_projection`` -> vision encoder,
   ``text_projection`` -> text encoder), else ``"shared"``. Its submodules inherit its group.
5. **A projector inside a tower.** In a text-generating model, a direct child of a non-text tower
   whose output width (the ``out_features`` of its last ``nn.Linear``) is the language model's
   hidden size is the projector: it maps the tower's features into the language model, wherever
   the model file put it (Qwen2-VL's ``visual.merger`` sits inside the vision tower; LLaVA's
   ``multi_modal_projector`` sits outside it and is found by rule 4). The tower's own parts are not
   projectors: a child holding its input embeddings or carrying a config of its own (its encoder stack), which
   end at the language model's width when the tower is as wide (Pix2Struct's 768-wide encoder and decoder).

No model is named anywhere: the groups follow from configs, the transformers accessors and,
for heads outside the towers of contrastive models, from the words in their names.
"""

from __future__ import annotations

import re

import torch

VISION, AUDIO, TEXT_ENCODER = "vision encoder", "audio encoder", "text encoder"
VIDEO, VISION_AND_VIDEO = "video encoder", "vision encoder (images + video)"
LANGUAGE_MODEL, TEXT_DECODER, PROJECTOR, SHARED, MODEL = (
    "language model", "text decoder", "projector", "shared", "model")

# Words naming a modality, in sub-config keys and module names.
_WORDS = {
    "vision": ("vision", "visual", "image", "img", "pixel", "patch", "video"),
    "audio": ("audio", "speech", "acoustic", "mel", "sound"),
    "text": ("text", "txt", "language", "lm", "token", "word"),
}
_INPUT_WORD = {"input_ids": "text", "pixel_values": "vision", "pixel_values_videos": "vision",
               "input_features": "audio", "input_values": "audio"}
_ENCODER = {"vision": VISION, "audio": AUDIO, "text": TEXT_ENCODER}


def module_modalities(model: torch.nn.Module) -> dict[str, str]:
    """Module path -> modality group for every module of ``model`` (see the module docstring)."""
    names = {id(m): name for name, m in model.named_modules()}
    config = getattr(model, "config", None)
    if config is None or not hasattr(config, "to_dict"):
        return {name: MODEL for name in names.values()}
    out_emb = _output_embeddings(model)
    generative = out_emb is not None

    towers = _towers_from_subconfigs(model, config, generative)
    if not towers and getattr(config, "is_encoder_decoder", False):
        towers = _encoder_decoder(model, names)
    if not towers:
        label = _input_group(getattr(model, "main_input_name", "input_ids"), generative_text=True)
        return {name: label for name in names.values()}

    out: dict[str, str] = {}
    for path, label in towers:
        out[path] = label
    text_label = next((lab for _, lab in towers if lab in (LANGUAGE_MODEL, TEXT_DECODER)), None)
    if out_emb is not None and id(out_emb) in names and text_label is not None:
        out.setdefault(names[id(out_emb)], text_label)
    has_other_tower = any(lab not in (LANGUAGE_MODEL, TEXT_DECODER, TEXT_ENCODER) for _, lab in towers)
    if text_label == LANGUAGE_MODEL and has_other_tower:
        for path in _projectors_inside_towers(model, config, towers):
            out[path] = PROJECTOR

    for name in sorted(names.values(), key=lambda n: (n.count(".") + (n != ""), n)):
        if name in out:
            continue
        parent = _placed_ancestor(name, out)
        if parent is not None:  # inside a tower, or inside an already placed module
            out[name] = out[parent]
            continue
        if any(_is_ancestor(name, p) for p, _ in towers):
            out[name] = SHARED
        elif text_label == LANGUAGE_MODEL and has_other_tower:
            out[name] = PROJECTOR
        else:
            out[name] = _by_name(name, towers)
    return out


def modality_of(path: str, modalities: dict[str, str]) -> str | None:
    """Group of ``path`` (or of its nearest listed ancestor); None when nothing matches."""
    while True:
        if path in modalities:
            return modalities[path]
        if not path:
            return None
        path = path.rpartition(".")[0]


# -- the pieces of the rule ----------------------------------------------------------------------
def _output_embeddings(model) -> torch.nn.Module | None:
    get = getattr(model, "get_output_embeddings", None)
    try:
        emb = get() if callable(get) else None
    except Exception:  # some models raise instead of returning None
        return None
    return emb if isinstance(emb, torch.nn.Module) else None


def _subconfigs(config) -> dict[str, object]:
    keys = list(getattr(type(config), "sub_configs", {}) or {})
    out = {}
    for key in keys:
        sub = getattr(config, key, None)
        if sub is not None and hasattr(sub, "to_dict"):
            out[key] = sub
    return out


def _word(text: str) -> str | None:
    tokens = set(re.split(r"[^a-z0-9]+", text.lower()))
    hits = [w for w, syn in _WORDS.items() if tokens & set(syn)]
    return hits[0] if len(hits) == 1 else None


def _input_group(input_name: str, generative_text: bool) -> str:
    word = _INPUT_WORD.get(input_name, "text")
    if word == "text":
        return LANGUAGE_MODEL if generative_text else TEXT_ENCODER
    return _ENCODER[word]


def _towers_from_subconfigs(model, config, generative: bool) -> list[tuple[str, str]]:
    towers = []
    for key, sub in _subconfigs(config).items():
        owner = _owner(model, sub)
        if owner is None:
            continue
        path, module = owner
        stem = key.removesuffix("_config")
        if stem == "encoder":
            label = _input_group(getattr(module, "main_input_name", "input_ids"), generative_text=False)
        elif stem == "decoder":
            label = TEXT_DECODER
        else:
            word = _word(stem)
            if word == "text":
                label = LANGUAGE_MODEL if generative else TEXT_ENCODER
            elif word is not None:
                label = _ENCODER[word]
            else:
                label = stem.replace("_", " ")
        towers.append((path, label))
    return towers


def _owner(model, sub) -> tuple[str, torch.nn.Module] | None:
    """Shallowest non-root module built from ``sub`` (same object, else same config class)."""
    same_class = None
    for name, module in model.named_modules():
        if not name:
            continue
        cfg = getattr(module, "config", None)
        if cfg is sub:
            return name, module
        if same_class is None and cfg is not None and type(cfg) is type(sub):
            same_class = (name, module)
    return same_class


def _encoder_decoder(model, names: dict[int, str]) -> list[tuple[str, str]]:
    towers = []
    try:
        enc, dec = model.get_encoder(), model.get_decoder()
    except Exception:
        return []
    if isinstance(enc, torch.nn.Module) and id(enc) in names and names[id(enc)]:
        name = getattr(enc, "main_input_name", None) or getattr(model, "main_input_name", "input_ids")
        towers.append((names[id(enc)], _input_group(name, generative_text=False)))
    if isinstance(dec, torch.nn.Module) and id(dec) in names and names[id(dec)]:
        towers.append((names[id(dec)], TEXT_DECODER))
    return towers


def _projectors_inside_towers(model, config, towers: list[tuple[str, str]]) -> list[str]:
    """Rule 5: direct children of non-text towers whose output width is the language model's hidden size."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    width = getattr(text, "hidden_size", None)
    if width is None:
        return []
    modules = dict(model.named_modules())
    found = []
    for path, label in towers:
        if label in (LANGUAGE_MODEL, TEXT_DECODER, TEXT_ENCODER):
            continue
        tower = modules[path]
        for child_name, child in tower.named_children():
            if _tower_part(tower, child):
                continue
            linears = [m for m in child.modules() if isinstance(m, torch.nn.Linear)]
            if linears and linears[-1].out_features == width and not isinstance(child, torch.nn.ModuleList):
                found.append(f"{path}.{child_name}" if path else child_name)
    return found


def _tower_part(tower: torch.nn.Module, child: torch.nn.Module) -> bool:
    """A child that is the tower's own stack, not a projector after it: it holds the tower's input embeddings
    (``get_input_embeddings()``) or carries a config of its own (the tower's encoder). Pix2Struct's vision tower is
    as wide as its decoder (768), so its ``embeddings`` and ``encoder`` end at the language model's width too."""
    try:
        embeddings = tower.get_input_embeddings() if hasattr(tower, "get_input_embeddings") else None
    except (NotImplementedError, AttributeError):
        embeddings = None
    if embeddings is not None and any(m is embeddings for m in child.modules()):
        return True
    return getattr(child, "config", None) is not None and hasattr(child.config, "to_dict")


def _is_ancestor(a: str, b: str) -> bool:
    """``a`` is a strict ancestor of ``b``."""
    return a != b and (a == "" or b.startswith(a + "."))


def _placed_ancestor(name: str, placed: dict[str, str]) -> str | None:
    path = name
    while path:
        path = path.rpartition(".")[0]
        if path in placed and placed[path] != SHARED:
            return path
    return None


def _by_name(name: str, towers: list[tuple[str, str]]) -> str:
    """A head outside the towers of a non-generating model: the one tower its name points to."""
    word = _word(name.rpartition(".")[2])
    if word is None:
        return SHARED
    matches = {lab for path, lab in towers if _word(path.rpartition(".")[2]) == word or _label_word(lab) == word}
    return matches.pop() if len(matches) == 1 else SHARED


def _label_word(label: str) -> str | None:
    return {VISION: "vision", AUDIO: "audio", TEXT_ENCODER: "text", LANGUAGE_MODEL: "text",
            TEXT_DECODER: "text"}.get(label)


__all__ = ["module_modalities", "modality_of", "with_video", "VISION", "VIDEO", "VISION_AND_VIDEO", "AUDIO", "TEXT_ENCODER", "LANGUAGE_MODEL",
           "TEXT_DECODER", "PROJECTOR", "SHARED", "MODEL"]


def with_video(modalities: dict[str, str], options: dict) -> dict[str, str]:
    """The groups of a step with ``--video-frames``: the vision tower encodes the video's frames, so its group is
    ``"video encoder"`` when the samples hold no image (``--images`` unset or 0) and
    ``"vision encoder (images + video)"`` when they hold both (one tower encodes both inputs: Qwen2-VL runs it once
    for the images and once for the video; a row per input would need the two calls told apart)."""
    if not options.get("video_frames"):
        return modalities
    name = VISION_AND_VIDEO if options.get("images") else VIDEO
    return {module: name if group == VISION else group for module, group in modalities.items()}
