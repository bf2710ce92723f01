"""bitsandbytes' 8-bit blockwise Adam, emulated on meta: the allocations bitsandbytes makes, no arithmetic.

Source: bitsandbytes 0.50.2.dev0 (github bitsandbytes-foundation/bitsandbytes, commit 95f9af3),
bitsandbytes/optim/optimizer.py:

- ``Optimizer2State.init_state`` (on a parameter's first step): ``state1`` and ``state2`` are
  ``uint8`` tensors of the parameter's shape (``get_state_buffer(p, dtype=torch.uint8)``), with
  ``absmax1`` and ``absmax2``, ``float32`` tensors of ``ceil(numel / 256)`` elements (``blocksize = 256``);
  a parameter of fewer than ``min_8bit_size = 4096`` elements keeps ``float32`` ``state1``/``state2``
  (the 32-bit update) and no absmax. ``max_unorm = 0.0`` by default, so no ``unorm_vec``.
- ``Optimizer8bit.fill_qmap`` / ``init_state``: the quantisation maps ``create_dynamic_map(signed=True)`` and
  ``(signed=False)`` (bitsandbytes/functional.py, 2**8 = 256 float32 values each) are made once per optimizer
  and moved to the parameters' device; every parameter's ``qmap1``/``qmap2`` is the same two tensors.
- ``Optimizer2State.update_step``: ``F.optimizer_update_8bit_blockwise`` / ``optimizer_update_32bit`` update
  the parameter and state in place (bitsandbytes/backends/cuda/ops.py allocates nothing there), so the
  emulated step allocates nothing.
- Paged optimizers (``PagedAdamW8bit``: ``is_paged=True``): ``get_state_buffer`` takes a state buffer of a
  parameter of at least 1e5 elements from ``F.get_paged`` (``cudaMallocManaged`` through
  ``lib.cget_managed_ptr``, wrapped with ``torch.frombuffer``): unified memory outside PyTorch's CUDA caching
  allocator, so ``torch.cuda.memory_allocated``/``max_memory_allocated`` and ``memory_reserved`` never count
  it; it occupies device memory while its pages are resident (nvidia-smi counts it) and the driver can
  evict it to host memory under pressure. The emulation allocates nothing for it and adds its bytes to
  :attr:`EmulatedAdam8bit.paged_bytes`. The absmax tensors are ``torch.zeros`` on the device: counted.
"""

from __future__ import annotations

import torch

# bitsandbytes/optim/adam.py, adamw.py: the classes memgraph's names stand for
BNB_CLASSES = {"adam8bit": "Adam8bit", "adamw8bit": "AdamW8bit", "paged-adamw8bit": "PagedAdamW8bit"}
BLOCKSIZE = 256  # Optimizer2State.init_state: blocksize = 256
MIN_8BIT_SIZE = 4096  # Optimizer2State.__init__ min_8bit_size default
PAGED_MIN_NUMEL = 100_000  # Optimizer8bit.get_state_buffer: not paged when p.numel() < 1e5
QMAP_VALUES = 2**8  # functional.py create_dynamic_map(total_bits=8): assert len(data) == 2**total_bits


def state_bytes(numel: int) -> int:
    """Bytes of one parameter's 8-bit Adam state (state1, state2, absmax1, absmax2), qmaps excluded."""
    if numel < MIN_8BIT_SIZE:
        return 2 * 4 * numel
    blocks = -(-numel // BLOCKSIZE)
    return 2 * numel + 2 * 4 * blocks


class EmulatedAdam8bit(torch.optim.Optimizer):
    """Allocates what bitsandbytes' ``Adam8bit``/``AdamW8bit``/``PagedAdamW8bit`` allocate (module docstring)."""

    def __init__(self, params, name: str, lr: float):
        super().__init__(params, dict(lr=lr))
        self.name = name
        self.is_paged = name.startswith("paged-")
        self.paged_bytes = 0  # unified memory (cudaMallocManaged) outside the caching allocator
        self._qmaps: tuple[torch.Tensor, torch.Tensor] | None = None

    def _buffer(self, p: torch.Tensor, dtype: torch.dtype):
        if self.is_paged and p.numel() >= PAGED_MIN_NUMEL:
            self.paged_bytes += p.numel() * dtype.itemsize
            return None  # F.get_paged: not a device tensor PyTorch's allocator sees
        return torch.zeros_like(p, dtype=dtype)

    def _init_state(self, p: torch.Tensor) -> None:
        state = self.state[p]
        state["step"] = 0
        if p.numel() < MIN_8BIT_SIZE:
            state["state1"] = self._buffer(p, torch.float32)
            state["state2"] = self._buffer(p, torch.float32)
            return
        if self._qmaps is None:  # fill_qmap, then .to(p.device): two 256-value float32 maps
            self._qmaps = tuple(torch.zeros(QMAP_VALUES, dtype=torch.float32, device=p.device) for _ in range(2))
        state["state1"], state["qmap1"] = self._buffer(p, torch.uint8), self._qmaps[0]
        state["state2"], state["qmap2"] = self._buffer(p, torch.uint8), self._qmaps[1]
        blocks = -(-p.numel() // BLOCKSIZE)
        state["absmax1"] = torch.zeros((blocks,), dtype=torch.float32, device=p.device)
        state["absmax2"] = torch.zeros((blocks,), dtype=torch.float32, device=p.device)

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if len(self.state[p]) == 0:
                    self._init_state(p)
                self.state[p]["step"] += 1  # the update kernels work in place: nothing allocated
        return None

    def describe(self) -> str:
        text = (f"{self.name}: bitsandbytes' 8-bit blockwise Adam emulated (uint8 state1/state2 + float32 absmax "
                f"per {BLOCKSIZE}-element block; parameters under {MIN_8BIT_SIZE} elements keep float32 state)")
        if self.is_paged:
            text += (f"; {self.paged_bytes:,} B of paged state (parameters of >= {PAGED_MIN_NUMEL:,} elements) live "
                     "in CUDA unified memory (cudaMallocManaged), outside PyTorch's allocator: not in "
                     "max_memory_allocated nor reserved, in nvidia-smi while resident")
        return text
