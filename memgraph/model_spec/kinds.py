"""The kind of model a prediction is about, the key of the validated error band (validation/band.py).

Published measurements are grouped by kind because memgraph's error has different causes in each: a decoder
language model's activations grow per token, an encoder's with bidirectional attention, a convolutional
network's device total carries cuDNN's workspaces. The kind is read from the task memgraph trains
(model_spec/tasks.py) and the model's own structure; no model is named:

``decoder LM``          causal language modelling, or a text task of a model type transformers has no
                        masked-LM class for (Llama for sequence classification)
``text encoder``        a text task of a model type with a masked-LM class (BERT, ALBERT, DistilBERT, ELECTRA)
``encoder-decoder``     text-to-text (T5, BART)
``speech``              speech-to-text (Whisper)
``multimodal``          image-text-to-text, audio-text-to-text and contrastive image-text models (LLaVA,
                        Qwen2-VL, Qwen2-Audio, CLIP)
``vision transformer``  image classification by a model with an attention module (ViT, Swin, PVT)
``vision conv``         image classification by a model without one (ResNet, ConvNeXt)
``other``               a user's ``module:function`` model
"""

from __future__ import annotations

KINDS = ("decoder LM", "text encoder", "encoder-decoder", "speech", "multimodal", "vision transformer",
         "vision conv", "other")
_TEXT_TASKS = ("masked-lm", "sequence-classification", "token-classification", "question-answering")
_BY_TASK = {"causal-lm": "decoder LM", "seq2seq-lm": "encoder-decoder", "speech-seq2seq": "speech",
            "image-text-to-text": "multimodal", "audio-text-to-text": "multimodal", "contrastive": "multimodal"}


def model_kind(task: str, model) -> str:
    """The kind of ``model`` (an ``nn.Module``, built) trained on ``task`` (a key of model_spec.tasks.TASKS)."""
    if task in _BY_TASK:
        return _BY_TASK[task]
    if task in _TEXT_TASKS:
        return "text encoder" if _has_masked_lm_class(model) else "decoder LM"
    if task == "image-classification":
        attention = any(type(m).__name__.endswith(("Attention", "SelfAttention")) for m in model.modules())
        return "vision transformer" if attention else "vision conv"
    return "other"


def _has_masked_lm_class(model) -> bool:
    from transformers.models.auto import modeling_auto

    model_type = getattr(getattr(model, "config", None), "model_type", None)
    return model_type in modeling_auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES
