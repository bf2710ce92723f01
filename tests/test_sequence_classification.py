"""``*ForSequenceClassification`` configs (the published BERT / DistilBERT rows): token ids and one class index
per sample, trained on the head's cross-entropy."""

from __future__ import annotations

import json

import pytest
import torch

import memgraph
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import resolve

TINY_BERT_SEQCLS = {"architectures": ["BertForSequenceClassification"], "model_type": "bert", "hidden_size": 64,
                    "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 1000,
                    "max_position_embeddings": 256, "num_labels": 3}


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "tiny-bert-seqcls.json"
    path.write_text(json.dumps(TINY_BERT_SEQCLS))
    return str(path)


def test_inputs_are_ids_and_one_label_per_sample(config):
    spec = resolve(config)
    assert spec.task == "sequence-classification"
    batch = spec.batch(TrainingOptions(batch_size=4, seq_len=32), torch.float32)
    shapes = {s.name: (s.shape, s.dtype, s.high) for s in batch.inputs}
    assert shapes == {"input_ids": ((4, 32), torch.int64, 1000), "labels": ((4,), torch.int64, 3)}


@pytest.mark.slow  # runs the step for real on the CPU
def test_cpu_prediction_matches_measurement(config):
    """The cpu target predicts the CPU allocator's steady-state peak; 2% is the cpu target's bound (README)."""
    options = TrainingOptions(batch_size=4, seq_len=32, target="cpu")
    measured = max(it["peak_allocated"] for it in memgraph.measure(config, "cpu", options)["iterations"][1:])
    predicted = memgraph.analyze(config, options).steady_state_peak.bytes
    assert abs(predicted - measured) / measured <= 0.02
