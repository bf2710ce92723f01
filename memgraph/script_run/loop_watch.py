"""The script's training loop, seen from outside: phases, optimizer steps, the model, and the stop.

Nothing in the script is edited; global hooks tell where it is:

* forward: a global module forward pre-hook (outside backward: a checkpoint's recompute is backward). The
  first module with parameters called from the top level is the model: its module paths name the ops
  (:class:`memgraph.trace.record.module_tracking.ModuleStack`), its parameters and buffers are named as such in the
  event log, and the tensors it is called with are the inputs;
* backward: ``Tensor.backward`` / ``torch.autograd.backward`` (:mod:`.device_mode`), or the first op the
  autograd engine runs (a backward called from inside another torch-function mode);
* optimizer: the global optimizer step pre- and post-hooks
  (``torch.optim.optimizer.register_optimizer_step_pre_hook`` / ``_post_hook``), which also fire inside the
  Hugging Face Trainer, TRL and accelerate, whose loops call ``optimizer.step()`` of a torch optimizer. After
  the ``steps``-th step the script is stopped (:class:`StopScript`, a ``BaseException`` so that a script's
  ``except Exception`` does not swallow it). What runs after a step and before the next forward (zero_grad,
  logging, loading the next batch) is the ``zero_grad`` phase.

Iteration k runs from the first forward after step k-1 (the first forward of the script for k = 1) to the
first forward after step k; the last one ends at the end of step ``steps``.
"""

from __future__ import annotations

import contextlib

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

from memgraph.private_api import current_graph_task_id
from memgraph.trace.record.event_log import Origin, Role
from memgraph.trace.record.module_tracking import ModuleStack
from memgraph.trace.record.recorder import Recorder


class StopScript(BaseException):
    """Raised from the optimizer-step hook once the script has made the steps asked for."""


class LoopWatch:
    """Phases and steps of the script's loop, written into the recorder; stops after ``steps`` steps."""

    def __init__(self, rec: Recorder, steps: int):
        self.rec = rec
        self.steps = steps
        self.done = 0  # optimizer steps made
        self.starts: list[int] = []  # first event of each iteration
        self.end: int | None = None  # event where the last iteration ends
        self.model: torch.nn.Module | None = None
        self.modules: ModuleStack | None = None
        self.owners: dict[int, str] = {}  # id(parameter) -> owning module path
        self.optimizers: dict[int, torch.optim.Optimizer] = {}
        self.inputs: list[str] = []  # the model's first inputs, described
        self._in_step = 0
        self._handles: list = []

    # -- hooks --------------------------------------------------------------------------------
    @contextlib.contextmanager
    def hooks(self):
        handles = [torch.nn.modules.module.register_module_forward_pre_hook(self._forward_pre),
                   register_optimizer_step_pre_hook(self._step_pre),
                   register_optimizer_step_post_hook(self._step_post)]
        try:
            yield self
        finally:
            for h in handles + self._handles:
                h.remove()
            if self.modules is not None:
                self.modules.__exit__(None, None, None)

    def _forward_pre(self, module, args, kwargs=None):
        if current_graph_task_id() != -1:  # a checkpoint recomputing forward inside backward
            return
        if self.model is None and next(module.parameters(), None) is not None:
            self._adopt_model(module, args, kwargs or {})
        if self.rec.phase != "forward":
            if len(self.starts) == self.done:  # the first forward after step `done`: a new iteration
                self.starts.append(len(self.rec.log.events))
            self.rec.enter(len(self.starts), "forward")

    def on_backward(self) -> None:
        if self.rec.phase != "backward" and self.starts:
            self.rec.enter(self.rec.iteration, "backward")
            if self.modules is not None:
                self.modules.reset()

    def on_op(self, _rec, _info) -> None:
        """The recorder's per-op hook: an op run by the autograd engine means backward began."""
        if self.rec.phase == "forward" and current_graph_task_id() != -1:
            self.on_backward()

    def _step_pre(self, optimizer, _args, _kwargs):
        self._in_step += 1
        if self._in_step > 1:  # an optimizer stepping another (a wrapper): one step
            return
        self.optimizers.setdefault(id(optimizer), optimizer)
        self._mark_gradients(optimizer)
        if self.starts:
            self.rec.enter(self.rec.iteration, "optimizer")

    def _step_post(self, optimizer, _args, _kwargs):
        self._in_step -= 1
        if self._in_step:
            return
        self._mark_state(optimizer)
        if not self.starts:  # a step before any forward (a warm-up of the scheduler): not an iteration
            return
        self.done += 1
        if self.done >= self.steps:
            self.end = len(self.rec.log.events)
            self.rec.close()  # what unwinding the script frees is not part of the run
            raise StopScript
        self.rec.enter(self.rec.iteration, "zero_grad")

    # -- naming -------------------------------------------------------------------------------
    def _adopt_model(self, module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        """``module`` is the model: name its parameters, buffers and inputs, and track its submodules."""
        self.model = module
        for name, mod in module.named_modules():
            for p in mod.parameters(recurse=False):
                self.owners.setdefault(id(p), name)
        for name, p in module.named_parameters():
            self._name(p, Origin.PARAMETER, name, self.owners.get(id(p), ""))
        for name, b in module.named_buffers():
            if self.rec.tracks(b):
                self._name(b, Origin.BUFFER, name, name.rpartition(".")[0])
        self._name_inputs(module, args, kwargs)
        # a global pre-hook gets no keyword arguments (model(**batch)): the model's own hook sees them from its
        # next call on (the Trainer's first batch is then named by its first op, e.g. aten._to_copy)
        self._handles.append(module.register_forward_pre_hook(self._name_inputs, with_kwargs=True))
        self.modules = ModuleStack(module).enter_from_forward_pre_hook(module, args)
        self.rec.module_of = lambda: self.modules.current

    def _name_inputs(self, _module, args: tuple, kwargs: dict) -> None:
        """The tensors the model is called with are its inputs (the batch), described once."""
        if current_graph_task_id() != -1:
            return
        described = []
        for name, t in [(f"input {i}", a) for i, a in enumerate(args)] + list(kwargs.items()):
            if isinstance(t, torch.Tensor):
                described.append(f"{name}={str(t.dtype).removeprefix('torch.')}{list(t.shape)}")
                if self.rec.tracks(t) and not t.requires_grad:
                    self._name(t, Origin.INPUT, name, "")
        if described and not self.inputs:
            self.inputs = described

    def _name(self, t: torch.Tensor, origin: Origin, name: str, module: str) -> None:
        sid = self.rec.register(t, origin, name, module)
        record = self.rec.log.storages[sid]
        if record.origin in (Origin.OP, Origin.UNTRACKED):  # made by .cuda() / the initializers: it is this
            record.origin, record.name, record.module = origin, name, module

    def _mark_gradients(self, optimizer) -> None:
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    self.rec.mark_role(p.grad, Role.GRADIENT, self.owners.get(id(p)))

    def _mark_state(self, optimizer) -> None:
        for p, state in optimizer.state.items():
            for value in state.values():
                if isinstance(value, torch.Tensor):
                    self.rec.mark_role(value, Role.OPTIMIZER_STATE, self.owners.get(id(p)))

    # -- results ------------------------------------------------------------------------------
    def bounds(self) -> list[tuple[int, int]]:
        ends = self.starts[1:] + [self.end if self.end is not None else len(self.rec.log.events)]
        return list(zip(self.starts, ends))

    def trainable(self) -> list[torch.Tensor]:
        seen, out = set(), []
        for opt in self.optimizers.values():
            for group in opt.param_groups:
                for p in group["params"]:
                    if id(p) not in seen:
                        seen.add(id(p))
                        out.append(p)
        return out


__all__ = ["LoopWatch", "StopScript"]
