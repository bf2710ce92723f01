"""The loss the step trains on (``--loss``), and the inputs the model is called with.

Transformers models compute their loss from their labels (``outputs.loss``). ``module:function``
models return what they return, so ``--loss`` says what the step does with it:

- ``auto`` (default): a scalar output, or an output's ``.loss``, is the loss as it is; otherwise
  ``out.sum()`` (:func:`memgraph.model_spec.tasks.loss_from_outputs`).
- ``sum``: ``out.sum()``, what ``logits.sum().backward()`` benchmark scripts do; for a transformers
  model the labels are not passed (so its head computes no loss) and ``out`` is its first output, the logits.
- ``cross-entropy``: ``F.cross_entropy(out, target)``. ``target`` is the ``--input`` named
  ``target`` (int64 class indices, e.g. ``--input target=int64[32]<10``); it is made with the batch
  but not passed to the model. ``out`` has the shape ``F.cross_entropy`` takes: ``[N, C]`` or
  ``[N, C, d1, ...]`` with the target ``[N]`` or ``[N, d1, ...]``. For a transformers causal LM it is a
  hand-written loop's ``F.cross_entropy(logits.flatten(0, 1), labels.flatten())`` in the logits' dtype
  (:func:`script_causal_ce_loss_and_batch`).

``out`` is the model's output tensor, or the first element of a tuple or list it returns.

For transformers causal-LM models, ``--loss chunked-ce`` replaces the head's loss with torchtune's chunked
output loss (:func:`chunked_ce_loss`).
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

from memgraph.errors import MemgraphError
from memgraph.model_spec.inputs import IGNORE_INDEX, Batch
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import ModelSpec
from memgraph.model_spec.tasks import loss_from_outputs

TARGET_INPUT = "target"  # the --input that --loss cross-entropy takes as the class indices
# torchtune (github pytorch/torchtune @ bd2a0fc, torchtune/modules/loss/ce_chunked_output_loss.py)
# CEWithChunkedOutputLoss(num_output_chunks=8, ignore_index=-100): its defaults.
NUM_OUTPUT_CHUNKS = 8


def loss_and_model_batch(spec: ModelSpec, opts: TrainingOptions, batch_spec: Batch,
                         batch: tuple[tuple, dict], model: torch.nn.Module | None = None,
                         ) -> tuple[Callable[[object], torch.Tensor], tuple[tuple, dict]]:
    """(compute_loss for ``train_iteration``, the (args, kwargs) the model is called with).

    ``model``: the built model, which ``--loss chunked-ce`` needs (its decoder's output and its ``lm_head``).
    A loss that cannot be backpropagated (the model's output detached, or an integer tensor) is refused when
    it is taken, before ``backward`` fails in autograd."""
    compute_loss, model_batch = _loss_and_model_batch(spec, opts, batch_spec, batch, model)
    if spec.source == "callable" and model is not None:
        _check_arguments(model, model_batch[0], [s.name for s in batch_spec.inputs if s.name != TARGET_INPUT]
                         if opts.loss == "cross-entropy" else [s.name for s in batch_spec.inputs])
    return _differentiable(compute_loss, spec.name), model_batch


def _check_arguments(model: torch.nn.Module, args: tuple, names: list[str]) -> None:
    """A module:function model gets its ``--input``s positionally: as many as its forward takes."""
    import inspect

    try:
        signature = inspect.signature(model.forward)
        signature.bind(*args)
    except (TypeError, ValueError) as e:
        if isinstance(e, ValueError):  # no signature to read (a builtin): the call itself will say
            return
        takes = [n for n, p in signature.parameters.items()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]
        raise MemgraphError(f"--input {', '.join(names)}: {type(model).__name__}.forward({', '.join(takes)}) does not "
                            f"take {len(args)} positional input(s) ({e}): pass one --input per argument of forward")


def _differentiable(compute_loss: Callable[[object], torch.Tensor], model: str) -> Callable[[object], torch.Tensor]:
    def checked(outputs) -> torch.Tensor:
        loss = compute_loss(outputs)
        if isinstance(loss, torch.Tensor) and not loss.requires_grad:
            if not (loss.is_floating_point() or loss.is_complex()):
                why = (f"its loss is a {str(loss.dtype).removeprefix('torch.')} tensor, and an integer tensor carries "
                       "no gradient: return the floating-point output of the model's layers")
            else:
                why = ("its loss does not depend on any trainable parameter (an output detached, made under "
                       "torch.no_grad(), or every parameter frozen): return an output computed from the parameters")
            raise MemgraphError(f"{model} cannot be trained: {why}")
        return loss

    checked.parts = getattr(compute_loss, "parts", None)  # the parts --compile-loss compiles (compiled/scope.py)
    return checked


def _loss_and_model_batch(spec: ModelSpec, opts: TrainingOptions, batch_spec: Batch,
                          batch: tuple[tuple, dict], model: torch.nn.Module | None = None,
                          ) -> tuple[Callable[[object], torch.Tensor], tuple[tuple, dict]]:
    if opts.loss == "auto":
        return loss_from_outputs, batch
    if opts.loss == "chunked-ce":
        return chunked_ce_loss_and_batch(spec, model, batch)
    if spec.source != "callable":
        if opts.loss == "sum":  # logits.sum().backward(), as benchmark scripts do: the head computes no loss
            args, kwargs = batch
            return sum_loss, (args, {k: v for k, v in kwargs.items() if k != "labels"})
        if opts.loss == "cross-entropy" and spec.task == "causal-lm" and "labels" in batch[1]:
            return script_causal_ce_loss_and_batch(batch)
        raise MemgraphError(f"--loss {opts.loss} applies to module:function models (cross-entropy also to causal "
                            f"LMs); {spec.name} computes its own cross-entropy from its labels: drop --loss (or use "
                            "--loss sum for logits.sum())")
    if opts.loss == "sum":
        return sum_loss, batch
    names = [s.name for s in batch_spec.inputs]
    if TARGET_INPUT not in names:
        raise MemgraphError(f"--loss cross-entropy takes its class indices from an input named {TARGET_INPUT!r}, "
                            f"and none of {', '.join(names)} is: add e.g. --input {TARGET_INPUT}=int64[N]<CLASSES")
    index = names.index(TARGET_INPUT)
    if batch_spec.inputs[index].dtype != torch.int64:
        raise MemgraphError(f"--input {batch_spec.inputs[index].describe()}: the cross-entropy target holds class "
                            f"indices and must be int64: write {TARGET_INPUT}=int64[...]")
    args, kwargs = batch
    target = args[index]
    return (lambda outputs: cross_entropy_loss(outputs, target)), (args[:index] + args[index + 1:], kwargs)


def script_causal_ce_loss_and_batch(batch: tuple[tuple, dict]) -> tuple[Callable[[object], torch.Tensor],
                                                                       tuple[tuple, dict]]:
    """``--loss cross-entropy`` for a transformers causal LM: a hand-written loop's loss on the model's logits.

    ``logits = model(x).logits; F.cross_entropy(logits.flatten(0, 1), y.flatten())``, as training loops outside
    transformers write it (rasbt/LLMs-from-scratch ``calc_loss_batch``; nanoGPT's ``GPT.forward``): the model is
    called without ``labels``, so its head computes no loss, and the cross-entropy runs in the logits' own dtype.
    transformers' ``ForCausalLMLoss`` (transformers 5.23 ``loss/loss_utils.py``) upcasts the logits with
    ``logits.float()`` first, so with bfloat16 logits its log_softmax output and the two gradients of the loss's
    backward are float32: twice the bytes of each logits-sized storage. The targets are the batch's ``labels`` as
    they are (a script's data loader yields targets already shifted by one token; no shifted copy is made).
    """
    args, kwargs = batch
    targets = kwargs["labels"]
    model_kwargs = {k: v for k, v in kwargs.items() if k != "labels"}

    def compute_loss(outputs) -> torch.Tensor:
        logits = output_tensor(outputs)
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())

    return compute_loss, (args, model_kwargs)


def output_tensor(outputs) -> torch.Tensor:
    """The model's output tensor: the output itself, or the first element of a tuple/list."""
    if hasattr(outputs, "to_tuple"):  # a transformers ModelOutput: its first field that is set (the logits)
        outputs = outputs.to_tuple()
    if isinstance(outputs, (tuple, list)) and outputs:
        outputs = outputs[0]
    if not isinstance(outputs, torch.Tensor):
        raise MemgraphError(f"--loss needs a tensor output, the model returned {type(outputs).__name__}: "
                            "return a tensor (or a tuple whose first element is one), or use --loss auto")
    return outputs


def sum_loss(outputs) -> torch.Tensor:
    return output_tensor(outputs).sum()


def cross_entropy_loss(outputs, target: torch.Tensor) -> torch.Tensor:
    out = output_tensor(outputs)
    if out.dim() < 2 or out.shape[:1] + out.shape[2:] != target.shape:
        raise MemgraphError(f"--loss cross-entropy: output {list(out.shape)} and target {list(target.shape)} do not "
                            "match: F.cross_entropy takes an output [N, C, d1, ...] and a target [N, d1, ...]")
    return F.cross_entropy(out, target)


def chunked_ce_loss_and_batch(spec: ModelSpec, model: torch.nn.Module | None,
                              batch: tuple[tuple, dict]) -> tuple[Callable[[object], torch.Tensor], tuple[tuple, dict]]:
    """``--loss chunked-ce`` for a transformers causal LM: the model runs its decoder only, and the loss applies
    the output projection and cross-entropy chunk by chunk, as torchtune does.

    torchtune's decoder with ``set_num_output_chunks(8)`` (torchtune/modules/transformer.py
    ``TransformerDecoder.chunked_output``) returns ``[self.output(chunk) for chunk in
    last_hidden_state.tensor_split(8, dim=1)]``: all eight logit chunks, in the model's dtype, live until
    the loss is done. ``CEWithChunkedOutputLoss.forward`` then loops over the chunks:
    ``F.cross_entropy(chunk.float(), labels_chunk, ignore_index=-100, reduction="sum")``, so only one float32
    copy of a chunk exists at a time (a float32 model has no copy: ``.float()`` returns the tensor itself), and
    divides the sum by the number of labelled tokens.

    Here the transformers model is called without ``labels`` and with ``logits_to_keep=slice(0, 0)``
    (transformers' ``slice_logits_to_keep``: ``hidden_states[:, slice(0, 0), :]``), so its own ``lm_head``
    runs on no position and allocates nothing; a forward hook on its decoder (``model.base_model``) takes the
    final hidden state, and the loss applies ``model.get_output_embeddings()`` to its chunks. Labels are shifted
    as transformers' ``ForCausalLMLoss`` does (pad with -100 on the right, drop the first), since torchtune's
    datasets hand it labels already shifted.
    """
    if spec.task != "causal-lm" or model is None:
        raise MemgraphError(f"--loss chunked-ce computes a causal LM's output projection in chunks; {spec.name} is a "
                            f"{spec.task} model: drop --loss")
    import inspect

    if "logits_to_keep" not in inspect.signature(type(model).forward).parameters:
        raise MemgraphError(f"--loss chunked-ce: {type(model).__name__}.forward takes no logits_to_keep, so its head "
                            "cannot be skipped: drop --loss")
    args, kwargs = batch
    labels = kwargs["labels"]
    decoder_output = {}

    def keep_hidden(module, inputs, output):
        decoder_output["hidden"] = output[0] if isinstance(output, tuple) else output.last_hidden_state

    model.base_model.register_forward_hook(keep_hidden)
    head = model.get_output_embeddings()
    model_kwargs = {k: v for k, v in kwargs.items() if k != "labels"}
    model_kwargs["logits_to_keep"] = slice(0, 0)

    def compute_loss(outputs) -> torch.Tensor:
        hidden = decoder_output.pop("hidden")
        shifted = F.pad(labels, (0, 1), value=IGNORE_INDEX)[..., 1:]  # ForCausalLMLoss's shift_labels
        return chunked_ce_loss([head(chunk) for chunk in hidden.tensor_split(NUM_OUTPUT_CHUNKS, dim=1)], shifted,
                               parts["cross_entropy"])

    parts = {"cross_entropy": chunk_cross_entropy}  # what --compile-loss compiles, as torchtune's compile_loss does
    compute_loss.parts = parts
    return compute_loss, (args, model_kwargs)


def chunk_cross_entropy(logits_chunk: torch.Tensor, labels_chunk: torch.Tensor) -> torch.Tensor:
    """torchtune's ``CEWithChunkedOutputLoss.compute_cross_entropy``: one chunk upcast and its summed cross-entropy
    (the part torchtune's ``compile: True`` compiles, memgraph/compiled/scope.py)."""
    return F.cross_entropy(logits_chunk.float(), labels_chunk, ignore_index=IGNORE_INDEX, reduction="sum")


def chunked_ce_loss(logits: list[torch.Tensor], labels: torch.Tensor, cross_entropy=chunk_cross_entropy) -> torch.Tensor:
    """torchtune's ``CEWithChunkedOutputLoss.forward`` (docstring of :func:`chunked_ce_loss_and_batch`)."""
    total_elements = (labels != IGNORE_INDEX).sum()
    label_chunks = [chunk.reshape(-1) for chunk in labels.tensor_split(NUM_OUTPUT_CHUNKS, dim=1)]
    logit_chunks = [chunk.reshape(-1, chunk.size(-1)) for chunk in logits]
    total_loss = 0.0
    for logits_chunk, labels_chunk in zip(logit_chunks, label_chunks):
        total_loss += cross_entropy(logits_chunk, labels_chunk)
    return total_loss / total_elements
