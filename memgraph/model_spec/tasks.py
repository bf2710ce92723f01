"""Training tasks: which inputs a model takes and which loss it trains on.

Each task maps (model config, options, zoo defaults) to input specs, and model outputs to
the loss. Transformers heads compute their loss themselves when given labels.
"""

from __future__ import annotations

from typing import Callable

import torch

from memgraph.errors import MemgraphError
from memgraph.facts.learned_positions import learned_position_limit
from memgraph.model_spec.inputs import Batch, InputSpec
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.speech_inputs import speech_encoder_decoder
from memgraph.model_spec.codec_token_inputs import codec_token_batch, is_codec_token_model
from memgraph.model_spec.tts_inputs import is_diffusion_tts, tts_batch
from memgraph.model_spec.audio_text_inputs import audio_text_to_text, image_text_with_audio, is_audio_text_class_name

LONG = torch.int64
# Whisper's feature extractor: 16 kHz audio, hop length 160 samples -> 100 frames per second.
WHISPER_FRAMES_PER_SECOND = 100


def _text(cfg):
    return cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg


def _need(value, label: str, flag: str):
    if value is None:
        raise MemgraphError(f"no default {label} for this model: pass {flag}")
    return value


def _seq(cfg, opts: TrainingOptions, defaults: dict) -> int:
    return _within_positions(_text(cfg), _need(opts.seq_len or defaults.get("seq_len"), "sequence length", "--seq-len"))


def _within_positions(text_cfg, seq_len: int) -> int:
    """``seq_len``, refused if it is longer than the model's learned position table (facts/learned_positions.py)."""
    found = learned_position_limit(text_cfg)
    if found is not None and seq_len > found[0]:
        limit, name = found
        raise MemgraphError(f"--seq-len {seq_len} is longer than this {text_cfg.model_type} model's {limit} learned "
                            f"positions (config {name!r}); the real model fails with an index error: "
                            f"pass --seq-len {limit} or less")
    return seq_len


def _image(cfg, opts: TrainingOptions, defaults: dict) -> int:
    vision = getattr(cfg, "vision_config", cfg)
    size = _need(opts.image_size or defaults.get("image_size") or getattr(vision, "image_size", None),
                 "image size", "--image-size")
    if isinstance(size, tuple):  # --image-size HxW
        if size[0] != size[1]:
            raise MemgraphError(f"this model takes square images, got --image-size {size[0]}x{size[1]}: pass --image-size N")
        size = size[0]
    return size


def _pixels(cfg, opts, defaults, dtype) -> InputSpec:
    vision = getattr(cfg, "vision_config", cfg)
    size = _image(cfg, opts, defaults)
    channels = getattr(vision, "num_channels", 3)
    return InputSpec("pixel_values", (opts.batch_size, channels, size, size), dtype)


def causal_lm(cfg, opts, defaults, dtype) -> Batch:
    b, s, vocab = opts.batch_size, _seq(cfg, opts, defaults), _text(cfg).vocab_size
    return Batch((InputSpec("input_ids", (b, s), LONG, vocab), InputSpec("labels", (b, s), LONG, vocab)), {})


def sequence_classification(cfg, opts, defaults, dtype) -> Batch:
    """``*ForSequenceClassification``: token ids and one class index per sample (``labels`` [b]); with integer
    labels and ``num_labels`` > 1 the head takes cross-entropy (transformers' ``problem_type``
    "single_label_classification")."""
    b, s, vocab = opts.batch_size, _seq(cfg, opts, defaults), _text(cfg).vocab_size
    return Batch((InputSpec("input_ids", (b, s), LONG, vocab), InputSpec("labels", (b,), LONG, cfg.num_labels)), {})


def token_classification(cfg, opts, defaults, dtype) -> Batch:
    """``*ForTokenClassification``: token ids and one class index per token (``labels`` [b, s] < ``num_labels``);
    the head takes cross-entropy over every token (transformers 5.23 loss/loss_utils.py
    ``ForTokenClassification``: ``logits.view(-1, num_labels).float()``, ignore_index -100)."""
    b, s, vocab = opts.batch_size, _seq(cfg, opts, defaults), _text(cfg).vocab_size
    return Batch((InputSpec("input_ids", (b, s), LONG, vocab), InputSpec("labels", (b, s), LONG, cfg.num_labels)), {})


def question_answering(cfg, opts, defaults, dtype) -> Batch:
    """``*ForQuestionAnswering`` (extractive): token ids and one answer span per sample, ``start_positions`` and
    ``end_positions`` [b] < s; the head splits its [b, s, 2] logits into start and end logits and averages their
    cross-entropies (transformers 5.23 loss/loss_utils.py ``ForQuestionAnsweringLoss``)."""
    b, s, vocab = opts.batch_size, _seq(cfg, opts, defaults), _text(cfg).vocab_size
    return Batch((InputSpec("input_ids", (b, s), LONG, vocab), InputSpec("start_positions", (b,), LONG, s),
                  InputSpec("end_positions", (b,), LONG, s)), {})


def seq2seq_lm(cfg, opts, defaults, dtype) -> Batch:
    b, s, vocab = opts.batch_size, _seq(cfg, opts, defaults), cfg.vocab_size
    t = opts.target_len or defaults.get("target_len", s)
    return Batch((InputSpec("input_ids", (b, s), LONG, vocab), InputSpec("labels", (b, t), LONG, vocab)), {})


def image_classification(cfg, opts, defaults, dtype) -> Batch:
    labels = InputSpec("labels", (opts.batch_size,), LONG, cfg.num_labels)
    return Batch((_pixels(cfg, opts, defaults, dtype), labels), {})


def contrastive(cfg, opts, defaults, dtype) -> Batch:
    text = cfg.text_config
    s = _within_positions(text, opts.seq_len or defaults.get("seq_len") or text.max_position_embeddings)
    ids = InputSpec("input_ids", (opts.batch_size, s), LONG, text.vocab_size)
    return Batch((ids, _pixels(cfg, opts, defaults, dtype)), {"return_loss": True})


# Whisper's default label length: the longest transcript Hugging Face's Whisper fine-tuning recipes expect of a 30 s
# segment, their `--generation_max_length 225` (transformers examples/pytorch/speech-recognition/README.md, the
# Whisper commands; the "Fine-Tune Whisper" blog's Seq2SeqTrainingArguments(generation_max_length=225)); their
# collator pads labels to the longest in the batch. 448 (max_target_positions) is the decoder's limit, not a transcript.
WHISPER_TARGET_LEN = 225


def speech_seq2seq(cfg, opts, defaults, dtype) -> Batch:
    if is_codec_token_model(cfg):  # Kyutai speech-to-text, Dia: codec token streams (codec_token_inputs.py)
        return codec_token_batch(cfg, opts, defaults, dtype)
    if is_diffusion_tts(cfg):  # VibeVoice text-to-speech: LM and diffusion losses (tts_inputs.py)
        return tts_batch(cfg, opts, defaults, dtype)
    if getattr(cfg, "model_type", None) != "whisper":  # the others: their feature extractor (speech_inputs.py)
        return speech_encoder_decoder(cfg, opts, defaults, dtype)
    seconds = _need(opts.audio_seconds or defaults.get("audio_seconds"), "audio length", "--audio-seconds")
    frames = round(seconds * WHISPER_FRAMES_PER_SECOND)
    expected = 2 * cfg.max_source_positions  # the conv stem halves the frames into positions
    if frames != expected:
        raise MemgraphError(
            f"audio length {seconds:g} s gives {frames} frames but this Whisper model takes exactly "
            f"{expected} ({expected / WHISPER_FRAMES_PER_SECOND:g} s, padded as the processor does): "
            f"pass --audio-seconds {expected / WHISPER_FRAMES_PER_SECOND:g}"
        )
    b = opts.batch_size
    # transformers' WhisperForConditionalGeneration refuses labels longer than max_target_positions
    # (the decoder's learned position table): the limit. The default is a typical transcript, not the limit.
    limit = cfg.max_target_positions
    t = opts.target_len or defaults.get("target_len") or min(WHISPER_TARGET_LEN, limit)
    if t > limit:
        raise MemgraphError(f"target length {t} exceeds this Whisper model's {limit} decoder positions "
                            f"(max_target_positions): pass --target-len {limit} or less")
    feats = InputSpec("input_features", (b, cfg.num_mel_bins, frames), dtype)
    return Batch((feats, InputSpec("labels", (b, t), LONG, cfg.vocab_size)), {})


TASKS: dict[str, Callable] = {
    "causal-lm": causal_lm,
    "masked-lm": causal_lm,  # same tensors: input_ids and labels of the same length
    "sequence-classification": sequence_classification,
    "token-classification": token_classification,
    "question-answering": question_answering,
    "seq2seq-lm": seq2seq_lm,
    "image-classification": image_classification,
    "contrastive": contrastive,
    "speech-seq2seq": speech_seq2seq,
    "image-text-to-text": image_text_with_audio,  # LLaVA, Qwen2-VL (multimodal_inputs.py); omni thinkers' audio
    "audio-text-to-text": audio_text_to_text,  # Qwen2-Audio, Voxtral (audio_text_inputs.py)
}

# Transformers class-name endings -> task, for config.json files without a zoo entry.
_CLASS_SUFFIXES = (
    ("ForCausalLM", "causal-lm"), ("LMHeadModel", "causal-lm"), ("ForMaskedLM", "masked-lm"),
    ("ForImageClassification", "image-classification"), ("ForSequenceClassification", "sequence-classification"),
    ("ForTokenClassification", "token-classification"), ("ForQuestionAnswering", "question-answering"),
)
_CLASS_TASKS = {
    "T5ForConditionalGeneration": "seq2seq-lm", "BartForConditionalGeneration": "seq2seq-lm",
    "MT5ForConditionalGeneration": "seq2seq-lm", "WhisperForConditionalGeneration": "speech-seq2seq",
    "CLIPModel": "contrastive", "SiglipModel": "contrastive",
    "LlavaForConditionalGeneration": "image-text-to-text", "Qwen2VLForConditionalGeneration": "image-text-to-text",
}


def task_for_class(class_name: str) -> str | None:
    if class_name in _CLASS_TASKS:
        return _CLASS_TASKS[class_name]
    for suffix, task in _CLASS_SUFFIXES:
        if class_name.endswith(suffix):
            return task
    return _auto_mapping_task(class_name)


def _auto_mapping_task(class_name: str) -> str | None:
    """Image-text and speech classes by transformers' own auto mappings (their recipes take the config or refuse
    it with the reason: multimodal_inputs.py, speech_inputs.py)."""
    from transformers.models.auto import modeling_auto

    if is_audio_text_class_name(class_name):  # audio tokens in a decoder-only prompt (audio_text_inputs.py)
        return "audio-text-to-text"
    for mapping, task in (("MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES", "image-text-to-text"),
                          ("MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES", "speech-seq2seq")):
        names = getattr(modeling_auto, mapping, {}).values()
        if any(class_name == n or (isinstance(n, (list, tuple)) and class_name in n) for n in names):
            return task
    return None


def loss_from_outputs(outputs) -> torch.Tensor:
    """The loss: a scalar output, ``outputs.loss`` / ``outputs["loss"]``, or the sum of the output."""
    if isinstance(outputs, torch.Tensor):
        return outputs if outputs.dim() == 0 else outputs.sum()
    loss = getattr(outputs, "loss", None)
    if loss is None and isinstance(outputs, dict):
        loss = outputs.get("loss")
    if loss is None and isinstance(outputs, (tuple, list)) and outputs and isinstance(outputs[0], torch.Tensor):
        return loss_from_outputs(outputs[0])
    if not isinstance(loss, torch.Tensor):
        raise MemgraphError(
            f"cannot find a loss in the model output of type {type(outputs).__name__}: return a scalar "
            "tensor, or an object with a .loss tensor"
        )
    return loss
