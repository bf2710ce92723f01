"""Feature extractors that need torchaudio, run with a shape-only stand-in for its spectrogram.

torchaudio must match torch's version exactly, and PyPI has no torchaudio 2.13 (its last release is 2.11.0,
pinned to torch 2.11): memgraph cannot install it beside torch 2.13. Two extractors of transformers 5.23 call it
only for the spectrogram itself:

- ``GraniteSpeechFeatureExtractor`` (Granite Speech, Granite Speech Plus): ``torchaudio.transforms.MelSpectrogram``;
- ``FunAsrNanoFeatureExtractor`` (Fun-ASR-Nano): ``torchaudio.compliance.kaldi.fbank``.

Inputs only need shapes, so the extractor runs as transformers wrote it (frame stacking, low-frame-rate stacking,
padding, masks, audio-token counts) with :data:`STAND_IN` in place of the module ``torchaudio``: it returns ones of
the spectrogram's shape, whose frame count is the one torchaudio documents (below). Everything else, the model's
real step included, is unchanged.
"""

from __future__ import annotations

import importlib
import types

import torch

# extractor class -> the transformers module that defines it (and imports torchaudio as a module global)
EXTRACTOR_MODULES = {
    "GraniteSpeechFeatureExtractor": "transformers.models.granite_speech.feature_extraction_granite_speech",
    "FunAsrNanoFeatureExtractor": "transformers.models.fun_asr_nano.feature_extraction_fun_asr_nano",
}

# torchaudio.transforms.MelSpectrogram's defaults (torchaudio 2.x transforms/_transforms.py): n_fft 400,
# win_length = n_fft, hop_length = win_length // 2, n_mels 128, center True
MEL_N_FFT, MEL_N_MELS = 400, 128
# torchaudio.compliance.kaldi.fbank's defaults (compliance/kaldi.py): 25 ms frames every 10 ms at 16 kHz, 23 mel
# bins, snip_edges True; a frame is int(sample_frequency * ms * 0.001) samples (_get_waveform_and_window_properties)
KALDI_FRAME_MS, KALDI_SHIFT_MS, KALDI_RATE, KALDI_BINS = 25.0, 10.0, 16000.0, 23
MS = 0.001


class MelSpectrogram:
    """``torchaudio.transforms.MelSpectrogram``'s output shape: ``[..., n_mels, frames]``, frames = samples // hop + 1
    (torch.stft with center=True pads n_fft // 2 on both sides: 1 + samples // hop frames)."""

    def __init__(self, sample_rate: int = 16000, n_fft: int = MEL_N_FFT, win_length: int | None = None,
                 hop_length: int | None = None, n_mels: int = MEL_N_MELS, center: bool = True, **_):
        if not center:
            raise NotImplementedError("memgraph's MelSpectrogram stand-in has center=True frames only")
        self.hop = hop_length or (win_length or n_fft) // 2
        self.n_mels = n_mels

    def to(self, device):
        return self

    def __call__(self, waveform: torch.Tensor) -> torch.Tensor:
        return torch.ones(*waveform.shape[:-1], self.n_mels, waveform.shape[-1] // self.hop + 1)


def fbank(waveform: torch.Tensor, num_mel_bins: int = KALDI_BINS, frame_length: float = KALDI_FRAME_MS,
          frame_shift: float = KALDI_SHIFT_MS, sample_frequency: float = KALDI_RATE, snip_edges: bool = True,
          **_) -> torch.Tensor:
    """``torchaudio.compliance.kaldi.fbank``'s output shape ``[frames, num_mel_bins]`` (kaldi.py ``_get_strided``:
    snip_edges: 1 + (samples - window) // shift frames, none when the clip is shorter than a window; else
    (samples + shift // 2) // shift)."""
    samples = waveform.shape[-1]
    window, shift = int(sample_frequency * frame_length * MS), int(sample_frequency * frame_shift * MS)
    if snip_edges:
        frames = 0 if samples < window else 1 + (samples - window) // shift
    else:
        frames = (samples + shift // 2) // shift
    return torch.ones(frames, num_mel_bins)


STAND_IN = types.SimpleNamespace(transforms=types.SimpleNamespace(MelSpectrogram=MelSpectrogram),
                                 compliance=types.SimpleNamespace(kaldi=types.SimpleNamespace(fbank=fbank)))


class StandInExtractor:
    """The real extractor, each call run with :data:`STAND_IN` as its module's torchaudio; attributes are its own."""

    def __init__(self, extractor, module):
        self._extractor, self._module = extractor, module

    def __getattr__(self, name):
        return getattr(self._extractor, name)

    def __call__(self, *args, **kwargs):
        from memgraph.private_api import torchaudio_stand_in

        with torchaudio_stand_in(self._module, STAND_IN):
            return self._extractor(*args, **kwargs)


def stand_in_extractor(class_name: str, kwargs: dict):
    """``class_name`` built with ``kwargs`` under the stand-in, or None for an extractor not in :data:`EXTRACTOR_MODULES`."""
    path = EXTRACTOR_MODULES.get(class_name)
    if path is None:
        return None
    from memgraph.private_api import torchaudio_stand_in

    module = importlib.import_module(path)  # the module itself: transformers' lazy attribute is a placeholder
    cls = getattr(module, class_name)
    with torchaudio_stand_in(module, STAND_IN):
        return StandInExtractor(cls(**kwargs), module)


__all__ = ["stand_in_extractor", "StandInExtractor", "STAND_IN"]
