"""PEFT's ``prepare_model_for_kbit_training`` on a quantised model (PEFT 0.21.2, peft/utils/other.py).

What it does to memory, and where memgraph does it:

- every parameter frozen (``_mark_only_adapters_as_trainable`` of ``get_peft_model`` freezes the same);
- ``param.data = param.data.to(torch.float32)`` for each float16/bfloat16 parameter whose class is not
  ``Params4bit``: the norms, the embeddings, ``lm_head`` and the quantised layers' biases (an 8-bit weight is
  int8 and keeps its dtype): :func:`upcast_unquantised`. The forward then runs in float32 from the embedding
  on (bitsandbytes' ``Linear4bit.forward`` casts its input to the compute dtype and its output back to the
  input's dtype), as it does on a GPU;
- gradient checkpointing on (``use_gradient_checkpointing=True``) and the input embeddings' output requiring
  grad: options resolved in memgraph/model_spec/framework_defaults.py and run by checkpointing.py.

PEFT runs it before ``get_peft_model``, so the adapters (already float32 unless ``--lora-dtype model``) are not
touched: they are skipped by name here.
"""

from __future__ import annotations

import torch

UPCAST_DTYPES = (torch.float16, torch.bfloat16)


def upcast_unquantised(model: torch.nn.Module) -> int:
    """Cast the non-adapter float16/bfloat16 parameters of ``model`` to float32 in place; the count cast."""
    count = 0
    for name, param in model.named_parameters():
        if param.dtype in UPCAST_DTYPES and ".lora_" not in name:
            param.data = param.data.to(torch.float32)
            count += param.numel()
    return count
