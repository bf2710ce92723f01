"""``--config FILE``: the training configuration a user already has, read into :class:`TrainingOptions`.

One module per format, each mapping every field that changes the step's memory and recording what it took
(:class:`~memgraph.job_config.mapping.Mapping`): Hugging Face ``TrainingArguments`` / TRL ``SFTConfig`` with TRL's
``ModelConfig`` (JSON or YAML, trainer_args.py), accelerate's config YAML (accelerate.py), axolotl (axolotl.py),
LLaMA-Factory (llamafactory.py), torchtune recipes (torchtune.py) and LitGPT (litgpt.py). The format is told from
the keys each one requires (:func:`detect`). Options given on the command line win over the file; a model given
beside the file names the model, the file the rest.
"""

from __future__ import annotations

from pathlib import Path

from memgraph.errors import MemgraphError
from memgraph.job_config.mapping import JobConfig, load_document

FORMATS = ("accelerate", "torchtune", "litgpt", "axolotl", "llamafactory", "trainer")


def detect(doc: dict) -> str | None:
    """Which format ``doc`` is, from the keys only that format has."""
    if "distributed_type" in doc or "compute_environment" in doc:
        return "accelerate"
    if isinstance(doc.get("model"), dict) and "_component_" in doc["model"]:
        return "torchtune"
    if "checkpoint_dir" in doc and (isinstance(doc.get("train"), dict) or "precision" in doc):
        return "litgpt"
    if any(k in doc for k in ("base_model", "micro_batch_size", "sequence_len")):
        return "axolotl"
    if any(k in doc for k in ("finetuning_type", "cutoff_len", "template")):
        return "llamafactory"
    if any(k in doc for k in ("per_device_train_batch_size", "model_name_or_path", "output_dir",
                              "gradient_accumulation_steps", "max_seq_length", "max_length")):
        return "trainer"
    return None


def read_job_config(path: str) -> JobConfig:
    """The options ``path`` asks for, with every value taken and every ignored field that could matter."""
    file = Path(path)
    doc, text = load_document(file)
    kind = detect(doc)
    if kind is None:
        raise MemgraphError(f"--config {path!r}: not a training config memgraph reads (Trainer/TRL arguments, "
                            "accelerate, axolotl, LLaMA-Factory, torchtune or LitGPT): none of their keys is there")
    from importlib import import_module

    reader = import_module(f"memgraph.job_config.{kind}")
    job = reader.read(doc, text, file)
    job.format = reader.FORMAT
    job.path = str(file)
    return job
