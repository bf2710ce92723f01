"""Token classification and extractive question answering heads, picked from config.json ``architectures``:
their inputs, the head's logits by hand, and the cpu target against the real CPU allocator."""

from __future__ import annotations

import json

import pytest
import torch

from memgraph.api import analyze, measure
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import resolve
from memgraph.model_spec.tasks import task_for_class
from memgraph.trace.tracer import trace_training

TINY_BERT = {"model_type": "bert", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
             "intermediate_size": 128, "vocab_size": 1000, "max_position_embeddings": 256}
HEADS = {"token-classification": {"architectures": ["BertForTokenClassification"], "num_labels": 5},
         "question-answering": {"architectures": ["BertForQuestionAnswering"]}}
B, S = 4, 32


@pytest.fixture(params=sorted(HEADS))
def config(request, tmp_path):
    path = tmp_path / f"tiny-bert-{request.param}.json"
    path.write_text(json.dumps({**TINY_BERT, **HEADS[request.param]}))
    return request.param, str(path)


def test_class_names_pick_the_tasks():
    assert task_for_class("LlamaForTokenClassification") == "token-classification"
    assert task_for_class("BertForQuestionAnswering") == "question-answering"


def test_inputs(config):
    task, path = config
    spec = resolve(path)
    assert spec.task == task
    batch = spec.batch(TrainingOptions(batch_size=B, seq_len=S), torch.float32)
    shapes = {s.name: (s.shape, s.high) for s in batch.inputs}
    if task == "token-classification":  # one label per token, < num_labels
        assert shapes == {"input_ids": ((B, S), 1000), "labels": ((B, S), 5)}
    else:  # one answer span per sample, positions < seq_len
        assert shapes == {"input_ids": ((B, S), 1000), "start_positions": ((B,), S), "end_positions": ((B,), S)}


def test_head_logits_by_hand(config):
    """The classifier / qa_outputs Linear(64, C) makes [B*S, C] float32 logits: C = num_labels = 5 for tokens
    (4 * 32 * 5 * 4 = 2560 B), C = 2 (start, end) for question answering (4 * 32 * 2 * 4 = 1024 B)."""
    task, path = config
    head, classes = ("classifier", 5) if task == "token-classification" else ("qa_outputs", 2)
    trace = trace_training(resolve(path), TrainingOptions(target="cpu", batch_size=B, seq_len=S))
    made = [s.nbytes for s in trace.log.storages
            if s.iteration == 2 and s.phase == "forward" and s.module == head and s.name == "aten.addmm.default"]
    assert made == [B * S * classes * 4]


@pytest.mark.slow  # runs the step for real on the CPU
def test_cpu_prediction_matches_measurement(config):
    """2%: the cpu target's bound (README); both heads measured exact (0 B apart) when written."""
    _, path = config
    options = TrainingOptions(batch_size=B, seq_len=S, target="cpu")
    measured = max(it["peak_allocated"] for it in measure(path, "cpu", options)["iterations"][1:])
    predicted = analyze(path, options).steady_state_peak.bytes
    assert abs(predicted - measured) <= 0.02 * measured, (predicted, measured)
