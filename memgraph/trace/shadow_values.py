"""Real values for the small integer tensors of a meta-device run ("shadows").

A training step on ``meta`` has shapes but no values. That is enough for the floating-point
work, but multimodal forward code reads its integer inputs: LLaVA counts the image tokens in
``input_ids`` (``.sum()`` then ``bool(...)``), Qwen2-VL walks ``input_ids``, ``mm_token_type_ids``
and ``image_grid_thw`` with ``.tolist()``, ``.item()`` and boolean indexing, and its vision
tower splits attention by ``cu_seqlens``. On meta all of these end in ops that have no meta
kernel (``aten._local_scalar_dense``, ``aten.nonzero``, ``aten.masked_select``, ...).

:class:`ShadowValues` keeps, next to such a meta tensor, a *shadow*: a real CPU tensor with its
values. It is a ``TorchDispatchMode`` placed *below* the :class:`~memgraph.trace.record.recorder.Recorder`
(entered before it), so the recorder sees every op once, with the outputs this mode returns,
and never sees the CPU work done on shadows.

How values flow:

* **Seeds.** Inputs made with known values get a shadow (:meth:`ShadowValues.attach_batch`:
  any input spec with a ``value()`` method, e.g. token ids with the image tokens placed, masks,
  ``image_grid_thw``). Integer/bool factory ops (``arange``, ``zeros``, ``full``, ...) and copies
  of real CPU tensors to meta get one too, and so does ``torch.tensor(data, device="meta")``
  (which never reaches the dispatcher: a companion ``TorchFunctionMode`` handles it).
* **Propagation.** An op whose meta tensor inputs all have shadows runs on the meta tensors
  (as before, for the recorder) *and* on their shadows; each meta output gets the matching CPU
  output as its shadow. Views get views of the shadow and in-place ops update the shadow in
  place, so aliases stay consistent. Outputs whose storage exceeds ``max_elements`` get none.
  An op that writes into a shadowed tensor from a value without a shadow (e.g. a float result
  copied in) drops the shadows of every tensor on that storage: a shadow is never stale.
* **Answers.** Ops whose output shape or Python result depends on values are answered from
  the shadows instead of the meta kernel: ``.item()`` (``_local_scalar_dense``), ``.tolist()`` /
  ``.cpu()`` (``_to_copy`` off meta), ``nonzero``, ``masked_select``, ``repeat_interleave`` with
  tensor repeats, the ``unique`` family, ``bincount``, ``equal``, and ``index``/``index_put``
  with boolean masks (turned into the long indices they stand for). The result is a meta tensor
  of the right shape (plus its shadow) or the Python value.

Floating-point tensors derived from parameters or from float inputs never get shadows, so
the model's real work stays on meta. When a value-dependent op meets a meta tensor without a
shadow, the meta kernel's error propagates and the recorder reports the op and the module.

Every integer or boolean input is a seed (:meth:`ShadowValues.attach_batch`): with a known value
(a fill such as ``attention_mask=int64[8,512]=1``, a processor-like layout) or drawn as the real run
draws it. So text-only models that read their masks back (BigBird's block layout, BioGPT's and other
SDPA models' ``padding_mask.all()``, Megatron-BERT's extended mask) trace.

Routing. Integer tensors computed from floats have no values to know: the router of a mixture of
experts picks experts with ``topk`` / ``argmax`` / ``max(dim)`` of logits made from weights the trace
does not have. Models that only *shape* their work by the routing (Switch Transformers' ``nonzero`` of
the expert mask, JetMoE's ``expert_size.tolist()`` split sizes) need values there, so those integer
results get a *balanced* shadow (:func:`balanced_routing`: token t's j-th choice is expert
``(t * k + j) mod E``), an assumption stated in the trace notes: every expert gets the same number of
tokens (+-1). The total routed rows, hence every saved activation, do not depend on the assignment;
only a per-expert loop's largest transient does, by the difference between the most loaded expert's
rows and the mean.

Guessed reads. A one-element *bool* tensor without a shadow read back by Python (``if x.min() > eps``,
``assert not x.isnan().any()``: I-BERT's activation range tracking) is answered ``True`` and counted
(:attr:`ShadowValues.guessed`, in the trace notes): such tests on float activations pick between branches
that allocate alike (a few scalars), and no value can be known on meta. Any other value-dependent read of
a valueless tensor still fails with the op and module named.

Declared facts. A floating-point input has no values on meta, but memgraph chose it, so some of its
properties are known. An input spec with a ``value_facts()`` method naming :data:`NO_ZERO` declares that no
element of the input is exactly 0.0: the image recipe's pixel values are a real image, 8-bit pixels normalised
as the processor does (model_spec/multimodal_inputs.py ``ImageInput``), and ``(k / 255 - 0.5) / 0.5`` is never
0. Idefics 2/3 and SmolVLM drop the all-padding images in ``get_image_features`` (modeling_idefics3.py:
``real_images_inds = (pixel_values == 0.0).sum(dim=(-1, -2, -3)) != nb_values_per_image``), so the fact answers
``x == 0`` (all False) and ``x != 0`` (all True) exactly, as zero-stride shadows of one element (no memory, no
cap); the counts, the boolean index and ``.tolist()`` of the per-sample image counts then follow by propagation.
The fact travels through ops that keep every element's value or select some of them (views, copies, casts
between floating dtypes, indexing; :data:`_KEEPS_VALUES`), and a note names the input and what was assumed
(:meth:`ShadowValues.assumption_notes`): every image is a real image, none is padding.

Limits: values exist only for what the seeds determine; ``torch.tensor`` of non-shadowed meta data
stays valueless; integer buffers made at build time (the model is built outside this mode) have no shadow.
"""

from __future__ import annotations

import math
from contextlib import ExitStack

import torch
from torch.overrides import TorchFunctionMode

from memgraph.model_spec.multimodal_inputs import NO_ZERO  # declared fact: no element is exactly 0.0
from memgraph.notes import Note
from memgraph.private_api import (
    TorchDispatchMode,
    WeakIdKeyDictionary,
    op_schema,
    storage_key,
    tree_map,
)
from memgraph.private_api import disable_current_modes as _disable_current_modes
from memgraph.trace.record.recorder import without_dynamo_wrapper
from memgraph.trace.slice_shadows import SliceShadows

aten = torch.ops.aten

DEFAULT_MAX_ELEMENTS = 1 << 20  # shadows for storages of at most this many elements (at least)
# Integer tensors that model code derives from the inputs and reads back are the size of an input or a
# few times it: LLaVA's [b, s] image-token mask, Qwen2-VL's [3, b, s] rope position ids, cumulative
# sums and token-type ids. The cap grows with the seeded inputs so that every input size can be
# analysed, while [b, 1, s, s] masks (s times an input) stay without values.
DERIVED_ELEMENTS_PER_INPUT_ELEMENT = 4

DRAWN_VALUES_SEED = 0  # generator seed of drawn integer input values (plus the input's position)

# Ops whose output shape (or Python result) depends on values: answered from the shadows.
_FROM_VALUES = {
    aten.nonzero, aten.masked_select, aten._unique, aten._unique2, aten.unique_dim,
    aten.unique_consecutive, aten.unique_dim_consecutive, aten.bincount, aten.equal,
}


# Uninitialised results have no values to know; a later full overwrite (fill_, zero_, copy_,
# out=) gives them some.
_UNINITIALISED = {aten.empty, aten.empty_like, aten.empty_strided, aten.new_empty, aten.new_empty_strided}
_OVERWRITE = {aten.fill_, aten.zero_, aten.copy_}


class _Missing(Exception):
    """A meta tensor that has no shadow."""


def _is_meta(t) -> bool:
    return isinstance(t, torch.Tensor) and t.device.type == "meta"


def _storage_elements(t: torch.Tensor) -> int:
    return t.untyped_storage().nbytes() // max(t.element_size(), 1)


def _cpu_device(x):
    if isinstance(x, torch.device) and x.type == "meta":
        return torch.device("cpu")
    return x


@without_dynamo_wrapper  # a per-op cost otherwise (trace/record/recorder.py)
class ShadowValues(TorchDispatchMode):
    """Dispatch mode that keeps real CPU values (shadows) for small integer meta tensors.

    Use :meth:`attach` / :meth:`attach_batch` to seed values, then run the step inside
    ``with shadows:`` (entered before the recorder, so the recorder sits on top of it).
    """

    def __init__(self, max_elements: int = DEFAULT_MAX_ELEMENTS):
        super().__init__()
        self.max_elements = max_elements
        self._values = WeakIdKeyDictionary()  # meta tensor -> CPU tensor with its values
        self._written: dict = {}  # op -> indices/names of the arguments it writes
        self._stack: ExitStack | None = None
        self.answered = 0  # value-dependent ops answered from shadows (for tests and notes)
        self.routed = 0  # router top-k/argmax results given balanced values (notes)
        self.guessed = 0  # one-element bool reads without values, answered True (notes)
        self.codes = 0  # VQ nearest-code argmin results given spread values (notes)
        self._no_zero = WeakIdKeyDictionary()  # meta float tensor -> name of the input declared to have no 0.0
        self.declared: dict[str, int] = {}  # input name -> comparisons with 0 answered from its declared fact
        self._slices = SliceShadows()  # a cat of shadowed and valueless parts: the shadowed ones (slice_shadows.py)

    # -- seeds ------------------------------------------------------------------------------
    def attach(self, t: torch.Tensor, value: torch.Tensor) -> None:
        """Give meta tensor ``t`` the values ``value`` (same shape; copied to the CPU)."""
        if not _is_meta(t):
            raise ValueError("shadows are for meta tensors")
        if tuple(value.shape) != tuple(t.shape):
            raise ValueError(f"shadow shape {tuple(value.shape)} != tensor shape {tuple(t.shape)}")
        self._values[t] = value.detach().to("cpu", t.dtype)
        self.max_elements = max(self.max_elements, DERIVED_ELEMENTS_PER_INPUT_ELEMENT * t.numel())

    def attach_batch(self, batch_spec, batch: tuple[tuple, dict]) -> int:
        """Attach values to every integer or boolean input of a made batch, and declared facts to floating inputs
        (a spec's ``value_facts()``, e.g. :data:`NO_ZERO`); returns how many inputs got either.

        Known values come from the spec's ``value()`` (processor-like layouts, ``--input ...=FILL``);
        other integer/bool inputs get values drawn as the real run draws them (``spec.make("cpu", ...)``:
        ``[0, high)``, all true for bool) from a generator of their own (seeded with
        :data:`DRAWN_VALUES_SEED` plus the input's position), so they are the same on every trace but not
        the real run's draws: code that reads them back (masks, ``.item()`` on positions) runs, and sizes that
        depend on random token ids (none in the supported tasks) could differ."""
        args, kwargs = batch
        if getattr(batch_spec, "positional", False):
            tensors = list(args)
        else:
            tensors = [kwargs.get(s.name) for s in batch_spec.inputs]
        n = 0
        for i, (spec, t) in enumerate(zip(batch_spec.inputs, tensors)):
            if not _is_meta(t):
                continue
            value = getattr(spec, "value", None)
            v = value() if callable(value) else None
            if v is None and not (t.dtype.is_floating_point or t.dtype.is_complex) and callable(getattr(spec, "make", None)):
                v = spec.make("cpu", torch.Generator().manual_seed(DRAWN_VALUES_SEED + i))
            if v is not None:
                self.attach(t, v)
                n += 1
            facts = getattr(spec, "value_facts", None)
            if callable(facts) and NO_ZERO in facts() and t.dtype.is_floating_point:
                self.declare_no_zero(t, spec.name)
                n += 1
        return n

    def declare_no_zero(self, t: torch.Tensor, name: str) -> None:
        """Declare that no element of meta tensor ``t`` (the input ``name``) is exactly 0.0: ``t == 0`` and ``t != 0``
        and the same tests of its views, copies and selections are answered from that."""
        if not _is_meta(t) or not t.dtype.is_floating_point:
            raise ValueError("the no-zero fact is for floating-point meta tensors")
        self._no_zero[t] = name

    def has_no_zero(self, t: torch.Tensor) -> bool:
        """Whether meta tensor ``t`` carries the declared fact that none of its elements is 0.0."""
        return _is_meta(t) and t in self._no_zero

    def value(self, t: torch.Tensor) -> torch.Tensor | None:
        """The shadow of meta tensor ``t`` (None when it has none)."""
        return self._values.get(t) if _is_meta(t) else None

    def notes(self) -> list[str]:
        """Trace notes: how many value-dependent ops were answered from shadows, and what was assumed."""
        answered = [Note("input values: {answered} value-dependent ops (.item(), .tolist(), nonzero, boolean "
                         "indexing, ...) answered from the known values of the integer inputs (trace/shadow_values.py)",
                         per_layer=("answered",), answered=self.answered)]
        return (answered if self.answered else []) + self.assumption_notes()

    def assumption_notes(self) -> list[str]:
        """Trace notes for the values this mode assumed rather than knew."""
        notes = []
        if self.routed:
            notes.append(Note("routing: {routed} router top-k/argmax results without values given a balanced "
                              "assignment (every expert the same number of tokens); the real routing depends on the "
                              "weights (trace/shadow_values.py balanced_routing)", per_layer=("routed",),
                              routed=self.routed))
        if self.codes:
            notes.append(Note("image codes: {codes} VQ nearest-codebook argmin results without values given a spread "
                              "of valid codes (the real codes depend on the image and the codebook; only the count "
                              "of codes sizes the step) (trace/shadow_values.py balanced_routing)",
                              per_layer=("codes",), codes=self.codes))
        if self.guessed:
            notes.append(Note("guessed reads: {guessed} one-element bool tests of values the trace does not have "
                              "answered True (e.g. activation-range checks); branches that allocate differently "
                              "could differ (trace/shadow_values.py)", per_layer=("guessed",), guessed=self.guessed))
        for name, count in self.declared.items():
            notes.append(Note("assumed: every image is a real image, none is padding: {count} comparisons of {name} "
                              "with 0 answered from the recipe's fact that no element of {name} is 0.0 (a normalised "
                              "real image; a processor's all-zero padding image would be dropped from the vision "
                              "tower) (trace/shadow_values.py NO_ZERO)", per_layer=("count",), count=count, name=name))
        return notes

    def __len__(self) -> int:
        return len(self._values)

    # -- entering: the dispatch mode plus the torch.tensor(...) companion ---------------------
    def __enter__(self):
        self._stack = ExitStack()
        self._stack.enter_context(_TensorFromData(self))
        try:
            return super().__enter__()
        except BaseException:
            self._stack.close()
            raise

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            stack, self._stack = self._stack, None
            if stack is not None:
                stack.close()

    # -- dispatch ---------------------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        packet = func.overloadpacket
        if packet is aten._local_scalar_dense:
            v = self.value(args[0])
            if v is None and _is_meta(args[0]) and args[0].dtype == torch.bool and args[0].numel() == 1:
                self.guessed += 1
                return True
            if v is None:
                return func(*args, **kwargs)  # the meta kernel's error, reported by the recorder
            self.answered += 1
            return v.item()
        if packet is aten._to_copy and _is_meta(args[0]) and not _is_meta_target(kwargs):
            return self._off_meta(func, args, kwargs)
        if packet is aten.copy_ and not _is_meta(args[0]) and _is_meta(args[1]):
            return self._off_meta(func, args, kwargs)
        if packet in _FROM_VALUES:
            return self._from_values(func, args, kwargs)
        if packet is aten.repeat_interleave and func is aten.repeat_interleave.Tensor \
                and kwargs.get("output_size") is None:
            return self._from_values(func, args, kwargs)
        if packet in (aten.index, aten.index_put, aten.index_put_, aten._index_put_impl_):
            args = self._long_indices(args)
        out = func(*args, **kwargs)
        if func in _ROUTING and _is_meta(args[0]) and args[0].dtype.is_floating_point \
                and args[0] not in self._values:
            self._route(func, args, kwargs, out)
            return out
        if packet in _UNINITIALISED:
            return out
        if self._no_zero and args and self.has_no_zero(args[0]) and self._from_no_zero(func, args, kwargs, out):
            return out
        if self._values or _makes_values(func, args, kwargs, out):
            self._propagate(func, args, kwargs, out)
        if packet is aten.cat and self._values and _is_meta(out) and out not in self._values:
            self._slices.record_cat(args[0], args[1] if len(args) > 1 else kwargs.get("dim", 0), out, self.value)
        elif self._slices and packet in (aten.select, aten.slice, aten.split, aten.split_with_sizes):
            for m, v in self._slices.derive(func, args, kwargs, out):
                self._values.setdefault(m, v)
        return out

    # -- helpers ----------------------------------------------------------------------------
    def _route(self, func, args, kwargs, out) -> None:
        """Balanced values for the integer result of a router's ``topk`` / ``argmax`` / ``max(dim)``."""
        x = args[0]
        names = [a.name for a in op_schema(func).arguments]
        bound = dict(zip(names, args))
        bound.update(kwargs)
        dim = bound.get("dim", -1)
        if dim is None or x.dim() == 0:
            return  # argmax over everything: not a routing decision
        indices = out[1] if isinstance(out, (tuple, list)) else out
        if not _is_meta(indices) or indices.numel() > self.max_elements:
            return
        dim = dim % x.dim()
        k = int(bound.get("k", 1))
        keep = func is aten.topk.default or bool(bound.get("keepdim", False))
        value = balanced_routing(tuple(x.shape), dim, k, keep)
        if tuple(value.shape) == tuple(indices.shape):
            self._values[indices] = value
            if func is aten.argmin.default:
                self.codes += 1
            else:
                self.routed += 1

    def _from_no_zero(self, func, args, kwargs, out) -> bool:
        """Ops on a tensor declared to have no 0.0: a comparison with 0 gets its exact value as a shadow (True: the
        op is answered), a value-keeping op passes the fact to its outputs (False: shadows propagate as usual)."""
        x = args[0]
        other = args[1] if len(args) > 1 else kwargs.get("other")
        if func in (aten.eq.Scalar, aten.ne.Scalar) and isinstance(other, (int, float)) and other == 0 \
                and _is_meta(out) and out.dtype == torch.bool:
            with _disable_current_modes():
                # one element broadcast to the output's shape: exact, whatever the size (no max_elements cap)
                self._values[out] = torch.full((), func is aten.ne.Scalar, dtype=torch.bool).expand(out.shape)
            name = self._no_zero[x]
            self.declared[name] = self.declared.get(name, 0) + 1
            return True
        if func.overloadpacket in _KEEPS_VALUES:
            if func.overloadpacket is aten._to_copy and not out.dtype.is_floating_point:
                return False  # a cast to an integer type can make 0 (0.3 -> 0): the fact ends here
            for t in _flat(out):
                if _is_meta(t) and t.dtype.is_floating_point:
                    self._no_zero[t] = self._no_zero[x]
        return False

    def _cpu(self, x):
        """``x`` with meta tensors replaced by their shadows (raises _Missing) and meta devices by cpu."""
        def one(a):
            if _is_meta(a):
                v = self._values.get(a)
                if v is None:
                    raise _Missing
                return v
            return _cpu_device(a)

        return tree_map(one, x)

    def _run_cpu(self, func, args, kwargs):
        # One intra-op thread: shadows are small, and some CPU kernels split even a 16 x 16 tensor across the
        # threads (aten tril/triu: at::parallel_for with grain size 0, TriangularOps.cpp, torch 2.13), where
        # waking the second OpenMP thread costs ~8 ms of CPU on a busy 2-core machine against 1 us alone.
        threads = torch.get_num_threads()
        with _disable_current_modes():
            if threads == 1:
                return func(*args, **kwargs)
            torch.set_num_threads(1)
            try:
                return func(*args, **kwargs)
            finally:
                torch.set_num_threads(threads)

    def _off_meta(self, func, args, kwargs):
        """``.cpu()`` / ``.tolist()`` of a meta tensor: a real tensor made from its shadow."""
        try:
            cargs, ckwargs = self._cpu((args, kwargs))
        except _Missing:
            return func(*args, **kwargs)  # "Cannot copy out of meta tensor", reported by the recorder
        self.answered += 1
        return self._run_cpu(func, cargs, ckwargs)

    def _meta_like(self, r):
        """A meta tensor shaped like CPU tensor ``r``, with ``r`` as its shadow when small."""
        with _disable_current_modes():
            m = torch.empty_strided(r.shape, r.stride(), dtype=r.dtype, device="meta")
        if r.numel() <= self.max_elements:
            self._values[m] = r
        return m

    def _from_values(self, func, args, kwargs):
        """A value-dependent op: run on the shadows, return meta tensors of the result's shape. An op on real
        (CPU) tensors only runs as it is: its values are real (Inkling 2 repeats on the host grid it read back,
        modeling_inkling2.py ``image_grid_thw.cpu() * torch.tensor([1, merge, merge])``)."""
        if not any(_is_meta(x) for x in _flat((args, kwargs))):
            return func(*args, **kwargs)
        try:
            cargs, ckwargs = self._cpu((args, kwargs))
        except _Missing:
            if func.overloadpacket is aten.masked_select:
                return self._masked_select_shape(func, args, kwargs)
            return func(*args, **kwargs)  # the meta kernel's data-dependence error
        self.answered += 1
        r = self._run_cpu(func, cargs, ckwargs)
        return tree_map(lambda x: self._meta_like(x) if isinstance(x, torch.Tensor) else x, r)

    def _masked_select_shape(self, func, args, kwargs):
        """``x.masked_select(mask)`` with a shadowed mask and a valueless ``x``: only the count is needed."""
        x, mask = args[0], args[1] if len(args) > 1 else kwargs["mask"]
        m = self.value(mask) if _is_meta(mask) else mask
        if m is None:
            return func(*args, **kwargs)
        shape = torch.broadcast_shapes(x.shape, mask.shape)
        count = int(m.expand(shape).sum()) if m.shape != shape else int(m.sum())
        self.answered += 1
        with _disable_current_modes():
            return torch.empty((count,), dtype=x.dtype, device="meta")

    def _long_indices(self, args):
        """Replace shadowed boolean index masks by the long indices they select (what CUDA does too)."""
        indices = args[1]
        if not any(_is_meta(i) and i.dtype in (torch.bool, torch.uint8) for i in indices if i is not None):
            return args
        new = []
        for i in indices:
            if _is_meta(i) and i.dtype in (torch.bool, torch.uint8):
                v = self._values.get(i)
                if v is None:
                    return args  # let the meta kernel fail (or cope) as before
                self.answered += 1
                for col in v.nonzero().unbind(1):
                    new.append(self._meta_like(col.contiguous()))
            else:
                new.append(i)
        return (args[0], new, *args[2:])

    def _written_args(self, func, args, kwargs) -> list[torch.Tensor]:
        spec = self._written.get(func)
        if spec is None:
            spec = [(i, a.name) for i, a in enumerate(op_schema(func).arguments)
                    if a.alias_info is not None and a.alias_info.is_write]
            self._written[func] = spec
        out = []
        for i, name in spec:
            v = args[i] if i < len(args) else kwargs.get(name)
            out.extend(t for t in _flat(v) if _is_meta(t))
        return out

    def _forget(self, t: torch.Tensor) -> None:
        """Drop the shadows of every tensor that shares ``t``'s storage (their values are unknown now)."""
        key = storage_key(t)
        for other in list(self._values.keys()):
            if storage_key(other) == key:
                del self._values[other]

    def _fresh_targets(self, func, args, kwargs, written) -> list[torch.Tensor]:
        """Valueless tensors that ``func`` overwrites completely get a blank shadow to be written into."""
        if not written or (func.overloadpacket not in _OVERWRITE and "out" not in kwargs):
            return []
        fresh = []
        for t in written:
            if t in self._values:
                continue
            key = storage_key(t)
            whole = t.is_contiguous() and t.storage_offset() == 0 and _storage_elements(t) == t.numel()
            if not whole or any(storage_key(o) == key for o in list(self._values.keys())):
                continue
            with _disable_current_modes():
                self._values[t] = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype)
            fresh.append(t)
        return fresh

    def _propagate(self, func, args, kwargs, out) -> None:
        values = self._values
        if func.overloadpacket in _LIKE_FILLS and _is_meta(out):
            self._like_fill(func, args, kwargs, out)
            return
        meta_in = _meta_tensors(args, kwargs)
        if not meta_in and not _makes_values(func, args, kwargs, out):
            return  # a floating-point factory op: no values wanted
        written = self._written_args(func, args, kwargs) if op_schema(func).is_mutable else []
        if meta_in and any(t not in values for t in meta_in):  # the usual case: valueless float work
            fresh = self._fresh_targets(func, args, kwargs, written) if written else []
            if not fresh or any(t not in values for t in meta_in):
                self._give_up(fresh, written)
                return
        else:
            fresh = []
        flat_out = [t for t in _flat(out) if _is_meta(t)]
        if not flat_out:
            return
        if any(_storage_elements(t) > self.max_elements for t in flat_out):
            self._give_up(fresh, written)
            return
        try:
            cargs, ckwargs = self._cpu((args, kwargs))
            r = self._run_cpu(func, cargs, ckwargs)
        except Exception:  # _Missing, or e.g. an index into garbage: no value, nothing stale
            self._give_up(fresh, written)
            return
        metas, cpus = _flat(out), _flat(r)
        if len(metas) != len(cpus):
            return
        for m, c in zip(metas, cpus):
            if _is_meta(m) and isinstance(c, torch.Tensor) and tuple(c.shape) == tuple(m.shape):
                values[m] = c

    def _like_fill(self, func, args, kwargs, out) -> None:
        """``full_like(x, v)`` and the like: a constant whatever ``x`` holds (UDOP's
        ``torch.full_like(image_embeddings[:, :, 0], True).bool()``, modeling_udop.py, a mask later indexed with)."""
        if _storage_elements(out) > self.max_elements:
            return
        with _disable_current_modes():
            template = torch.empty_strided(args[0].shape, args[0].stride(), dtype=args[0].dtype)
            r = func(template, *args[1:], **{**kwargs, "device": "cpu"})
        if tuple(r.shape) == tuple(out.shape):
            self._values[out] = r

    def _give_up(self, fresh, written) -> None:
        """The op ran on meta only: blank shadows go, and what it wrote has no known value any more."""
        for t in fresh:
            self._values.pop(t, None)
        for t in written:
            if t in self._values:
                self._forget(t)


# Ops whose outputs hold some of their first argument's elements unchanged (views, copies, selections) or
# converted between floating dtypes (an image normalised to |x| >= 1/255 stays far above bf16's / fp16's
# underflow): a declared no-zero fact carries over to their outputs.
_KEEPS_VALUES = {
    aten.view, aten._unsafe_view, aten.reshape, aten.alias, aten.detach, aten.clone, aten.contiguous,
    aten._to_copy, aten.expand, aten.permute, aten.transpose, aten.t, aten.select, aten.slice, aten.unsqueeze,
    aten.squeeze, aten.unfold, aten.index, aten.split, aten.split_with_sizes, aten.chunk, aten.unbind,
    aten.narrow, aten.movedim, aten.flatten, aten.unflatten, aten.lift_fresh,
}

# Router decisions on float logits: topk (MoE top-k gating), argmax and max(dim) (top-1 routers, e.g. Switch);
# argmin: a VQ-GAN's nearest codebook entry (Chameleon's quantizer, modeling_chameleon.py, whose codes are read back
# on the CPU to map them to token ids): a spread of valid codes, as balanced as the routers'.
_ROUTING = {aten.topk.default, aten.argmax.default, aten.max.dim, aten.argmin.default}


def balanced_routing(shape: tuple[int, ...], dim: int, k: int, keepdim: bool = True) -> torch.Tensor:
    """int64 indices for choosing ``k`` of the ``shape[dim]`` experts per token (every other position of
    ``shape`` is a token, in row-major order): token t's j-th choice is ``(t * k + j) mod E``, so the experts
    are filled round robin and each gets the same number of choices (+-1); a token's k choices are distinct
    while k <= E. ``keepdim`` False (argmax, max without keepdim): the k == 1 dimension is dropped."""
    experts = shape[dim]
    others = [s for i, s in enumerate(shape) if i != dim]
    tokens = math.prod(others)
    with _disable_current_modes():
        v = (torch.arange(tokens).unsqueeze(1) * k + torch.arange(k).unsqueeze(0)) % experts
        v = v.reshape(*others, k).movedim(-1, dim).contiguous()
        return v if keepdim else v.squeeze(dim)


def _flat(x) -> list:
    """Leaves of an op's arguments or result: tensors, lists/tuples of tensors, scalars."""
    if isinstance(x, (list, tuple)):
        out = []
        for a in x:
            out.extend(_flat(a)) if isinstance(a, (list, tuple)) else out.append(a)
        return out
    return [x]


def _meta_tensors(args, kwargs) -> list[torch.Tensor]:
    out = []
    for a in (*args, *kwargs.values()):
        if isinstance(a, torch.Tensor):
            if a.is_meta:
                out.append(a)
        elif isinstance(a, (list, tuple)):
            out.extend(b for b in a if isinstance(b, torch.Tensor) and b.is_meta)
    return out


def _is_meta_target(kwargs) -> bool:
    device = kwargs.get("device")
    return device is None or torch.device(device).type == "meta"


def _makes_values(func, args, kwargs, out) -> bool:
    """Factory ops with integer/bool results, and copies of real CPU tensors onto meta."""
    flat_in = [a for a in _flat((*args, *kwargs.values())) if isinstance(a, torch.Tensor)]
    if any(_is_meta(a) for a in flat_in):
        return False
    if flat_in:  # real tensors only: their values are known
        return True
    if func.overloadpacket in _CONSTANT_FILLS:  # e.g. BioGPT's float all-ones attention mask, read by .all()
        return True
    return any(_is_meta(t) and not t.dtype.is_floating_point and not t.dtype.is_complex for t in _flat(out))


# Factory ops whose every element is a constant, floating outputs included: a model that makes its own
# default attention mask (``torch.ones(b, s)``, float32 in BioGPT and Megatron-BERT) reads it back.
_CONSTANT_FILLS = {aten.ones, aten.zeros, aten.full, aten.new_ones, aten.new_zeros, aten.new_full, aten.ones_like,
                   aten.zeros_like, aten.full_like, aten.scalar_tensor}

# Of those, the ones that take a tensor only for its shape (and dtype, device), never its values.
_LIKE_FILLS = {aten.new_ones, aten.new_zeros, aten.new_full, aten.ones_like, aten.zeros_like, aten.full_like}


class _TensorFromData(TorchFunctionMode):
    """``torch.tensor(data, device="meta")`` / ``torch.as_tensor``: shadow the result with the data."""

    def __init__(self, shadows: ShadowValues):
        super().__init__()
        self.shadows = shadows

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.Tensor.__getitem__:
            return self._getitem(func, args, kwargs)
        if func is torch.Tensor.__format__:
            return self._format(func, args, kwargs)
        if func is torch.Tensor.__setitem__:
            return func(*self._stacked_index(args), **kwargs)
        if func is not torch.tensor and func is not torch.as_tensor:
            return func(*args, **kwargs)
        out = func(*args, **kwargs)
        if not _is_meta(out) or out.numel() > self.shadows.max_elements or not args:
            return out
        data = args[0]
        if isinstance(data, torch.Tensor) and _is_meta(data):
            return out  # as_tensor of a meta tensor: an op the dispatcher saw (or the same tensor)
        if out in self.shadows._values:
            return out
        try:
            cdata = self.shadows._cpu(data)
        except _Missing:
            return out
        with _disable_current_modes():
            try:
                ref = torch.tensor(cdata, dtype=out.dtype, device="cpu") if not isinstance(cdata, torch.Tensor) \
                    else cdata.to("cpu", out.dtype)
            except Exception:
                return out
        if tuple(ref.shape) == tuple(out.shape):
            self.shadows._values[out] = ref
        return out

    def _stacked_index(self, args):
        """``mask[rows, cols] = False`` with ``rows`` a tuple of shadowed 0-d meta tensors (UDOP's
        ``rows, cols = zip(*ind)``, modeling_udop.py): Python turns each tuple into an index tensor in C++ that no
        dispatch mode sees, so the write would drop ``mask``'s shadow. The same index as a ``torch.stack`` of the
        0-d tensors (equal values, made through the dispatcher, so shadowed) keeps it."""
        if len(args) < 2 or not isinstance(args[1], tuple) or self.shadows.value(args[0]) is None:
            return args
        def one(i):
            if isinstance(i, (list, tuple)) and i and all(isinstance(t, torch.Tensor) and _is_meta(t) and t.dim() == 0
                                                           and self.shadows.value(t) is not None for t in i):
                return torch.stack(list(i))
            return i
        return (args[0], tuple(one(i) for i in args[1]), *args[2:])

    def _format(self, func, args, kwargs):
        """``f"expert_{idx}"`` of a shadowed 0-d meta tensor: its value, as ``Tensor.__format__`` gives for a real
        0-d tensor (torch/_tensor.py formats meta tensors as their repr instead; Switch Transformers names its
        expert modules so)."""
        v = self.shadows.value(args[0]) if args and isinstance(args[0], torch.Tensor) else None
        if v is None or v.dim() != 0:
            return func(*args, **kwargs)
        return v.item().__format__(*args[1:])

    def _getitem(self, func, args, kwargs):
        """``x[:, [-1, 0]]`` on a shadowed ``x``: Python turns the list into an index tensor made on meta in
        C++ (``indexing_tensor_from_data``) that no dispatch mode sees, so the ``aten.index`` below has a
        valueless index; the same indexing of the shadow gives the result's values
        (``PreTrainedModel.warn_if_padding_and_no_attention_mask`` reads ``input_ids[:, [-1, 0]]``)."""
        out = func(*args, **kwargs)
        if not _is_meta(out) or out in self.shadows._values or not args or self.shadows.value(args[0]) is None:
            return out
        try:
            cself, cindex = self.shadows._cpu((args[0], args[1]))
        except _Missing:
            return out
        with _disable_current_modes():
            try:
                ref = cself[cindex]
            except Exception:
                return out
        if isinstance(ref, torch.Tensor) and tuple(ref.shape) == tuple(out.shape) \
                and ref.numel() <= self.shadows.max_elements:
            self.shadows._values[out] = ref
        return out


__all__ = ["ShadowValues", "DEFAULT_MAX_ELEMENTS", "NO_ZERO", "balanced_routing"]
