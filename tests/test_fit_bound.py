"""fit's lower bound (memgraph/fit/bound.py): parameters + gradients of your trace, and the sets of changes that
keep them, so that a set which cannot fit by it is not analysed."""

from dataclasses import replace

import pytest

from memgraph.fit.analyses import Analyses, trace_key
from memgraph.fit.bound import cannot_fit, keeps_params_and_grads, params_and_grads
from memgraph.fit.candidates import CANDIDATES
from memgraph.fit.outcome import Outcome
from memgraph.fit.plans import find_plans
from memgraph.fit.progress import QUIET
from memgraph.model_spec.options import TrainingOptions
from tests.conftest import TINY_LLAMA_PARAMETERS as PARAMETERS  # by hand there
from tests.conftest import tiny_llama_fit_setup


def _setup(**kw):
    return tiny_llama_fit_setup("a100-40gb", **kw)


def test_params_and_grads_of_a_float32_step_by_hand():
    spec, opts = _setup()
    analyses = Analyses(spec)
    o = analyses.outcome(opts, "yours")
    assert PARAMETERS == 202_048
    # float32 weights and float32 gradients, all alive when the last iteration's optimizer step begins
    assert params_and_grads(analyses.traces[trace_key(opts)]) == 2 * 4 * PARAMETERS == 1_616_384
    assert 1_616_384 <= o.allocated <= o.device_total


def test_gradients_that_die_in_backward_give_no_bound():
    spec, opts = _setup(optimizer_in_backward=True)
    analyses = Analyses(spec)
    analyses.outcome(opts, "in backward")
    assert params_and_grads(analyses.traces[trace_key(opts)]) is None


def test_which_changes_keep_params_and_grads():
    yours = TrainingOptions(seq_len=32)
    keeps = {c.name for c in CANDIDATES if c.applies_to(yours) and keeps_params_and_grads(yours, c.apply(yours))}
    assert keeps == {"SDPA attention", "Trainer loop (outputs dropped after the loss)", "expandable segments",
                     "chunked cross-entropy",
                     "selective checkpointing (every 2nd layer)", "gradient checkpointing", "for-loop optimizer step",
                     "activation offloading", "bf16 autocast", "8-bit AdamW (bitsandbytes)"} - \
        {c.name for c in CANDIDATES if not c.applies_to(yours)}
    # pure bf16 halves the weights, LoRA freezes them, FSDP shards them, optimizer-in-backward frees gradients early
    assert not keeps_params_and_grads(yours, replace(yours, precision="bf16"))
    assert not keeps_params_and_grads(yours, replace(yours, nproc=2, strategy="fsdp"))
    assert not keeps_params_and_grads(yours, replace(yours, optimizer_in_backward=True))
    assert keeps_params_and_grads(replace(yours, precision="bf16-mixed"), replace(yours, precision="fp16-mixed"))
    assert cannot_fit(100, yours, replace(yours, loss="chunked-ce"), 99)
    assert not cannot_fit(100, yours, replace(yours, loss="chunked-ce"), 100)  # 100 B may fit 100 B
    assert not cannot_fit(None, yours, replace(yours, loss="chunked-ce"), 0)


def _traced_changes_keep(analyses, opts, keeps, measure, base: int) -> list[str]:
    """Trace each change that applies to ``opts`` and that ``keeps(opts, changed)`` says keeps the bytes ``measure``
    reads off a trace; assert each has ``base`` of them, at most its allocated peak; the names of the changes."""
    checked = []
    for c in CANDIDATES:
        if not c.applies_to(opts) or not keeps(opts, c.apply(opts)):
            continue
        o = analyses.outcome(c.apply(opts), c.name)
        assert measure(analyses.traces[trace_key(c.apply(opts))]) == base, c.name
        assert base <= o.allocated <= o.device_total, c.name
        checked.append(c.name)
    return checked


@pytest.mark.slow  # a trace of tiny-llama per change (about ten)
def test_each_change_that_keeps_them_has_your_params_and_grads():
    """Measured, not assumed: each change the bound trusts, traced, has your P + G at its optimizer step, and its
    allocated peak is at least that."""
    spec, opts = _setup()
    analyses = Analyses(spec)
    analyses.outcome(opts, "yours")
    yours = params_and_grads(analyses.traces[trace_key(opts)])
    checked = _traced_changes_keep(analyses, opts, keeps_params_and_grads, params_and_grads, yours)
    assert checked == ["expandable segments", "chunked cross-entropy", "selective checkpointing (every 2nd layer)",
                       "gradient checkpointing", "for-loop optimizer step", "activation offloading", "bf16 autocast",
                       "8-bit AdamW (bitsandbytes)"]


class _Analyses:
    """Outcomes written here (device totals: your 10 GiB less 1 GiB per change) and a trace whose P + G is given."""

    def __init__(self, yours: TrainingOptions, trace):
        self.traces, self.analysed = {trace_key(yours): trace}, []

    def outcome(self, opts, label, cost="", changes=()):
        self.analysed.append(label)
        return _outcome(label, (10 - len(changes)) * GiB, opts, tuple(changes))

    def prefetch(self, jobs):
        pass


GiB = 1 << 30


def _outcome(label, total, opts, changes) -> Outcome:
    fits = total <= 4 * GiB
    return Outcome(label, opts, total, total, total, 4 * GiB, fits, fits, 0.0, "", None, changes)


def _log_with_state(p: int, g: int, s: int):
    """A trace of parameters ``p`` (setup to the end), optimizer state ``s`` made by iteration 1's step and
    gradients ``g`` of iteration 2, all alive when iteration 2's optimizer step begins."""
    from types import SimpleNamespace

    from memgraph.trace.record.event_log import EventLog, Origin, Role, StorageRecord

    return SimpleNamespace(log=EventLog(
        storages=[StorageRecord(0, p, "float32", (1,), Origin.PARAMETER, "w", "", "setup", 0, -1, 0),
                  StorageRecord(1, s, "float32", (1,), Origin.OP, "exp_avg", "", "optimizer", 1, 0, 1,
                                role=Role.OPTIMIZER_STATE),
                  StorageRecord(2, g, "float32", (1,), Origin.OP, "g", "", "backward", 2, 0, 3, role=Role.GRADIENT)],
        events=[("alloc", 0), ("alloc", 1), ("alloc", 2)],
        phase_marks=[(0, 0, "setup"), (1, 1, "optimizer"), (2, 2, "backward"), (4, 2, "optimizer")]))


def test_plans_do_not_analyse_sets_the_bound_rules_out():
    """P + G = 5 GiB on a 4 GiB card: sets of checkpointing and chunked cross-entropy (which keep them) are not
    analysed; sets with pure bf16 (which halves them) are."""
    from types import SimpleNamespace

    from memgraph.trace.record.event_log import EventLog, Origin, Role, StorageRecord

    yours_opts = TrainingOptions(seq_len=32)
    log = EventLog(storages=[StorageRecord(0, 3 * GiB, "float32", (1,), Origin.PARAMETER, "w", "", "setup", 0, -1, 0),
                             StorageRecord(1, 2 * GiB, "float32", (1,), Origin.OP, "g", "", "backward", 1, 0, 1,
                                           role=Role.GRADIENT)],
                   events=[("alloc", 0), ("alloc", 1)], phase_marks=[(0, 0, "setup"), (1, 1, "backward"),
                                                                      (2, 1, "optimizer")])
    analyses = _Analyses(yours_opts, SimpleNamespace(log=log))
    names = ["chunked cross-entropy", "gradient checkpointing", "pure bf16 training"]
    singles = [_outcome(n, 6 * GiB, next(c for c in CANDIDATES if c.name == n).apply(yours_opts),
                        next(c for c in CANDIDATES if c.name == n).changes) for n in names]
    assert params_and_grads(SimpleNamespace(log=log)) == 5 * GiB
    find_plans(analyses, _outcome("your settings", 10 * GiB, yours_opts, ()), singles, QUIET)
    assert analyses.analysed == ["chunked cross-entropy + pure bf16 training",
                                 "gradient checkpointing + pure bf16 training",
                                 "chunked cross-entropy + gradient checkpointing + pure bf16 training"]


def test_optimizer_state_joins_the_bound_where_the_optimizer_stays():
    """P + G = 5 GiB as above, plus 3 GiB of state made by iteration 1's step: 8 GiB. On a 6 GiB card the P + G bound
    rules nothing out, P + G + S rules out the sets that keep the optimizer; the 8-bit AdamW one is analysed. A
    single change's own trace is a base too: pure bf16's (P + G + S = 7 GiB here) rules out pure bf16 + checkpointing."""
    from memgraph.fit.bound import keeps_state, params_grads_state

    log = _log_with_state
    yours_opts = TrainingOptions(seq_len=32)
    assert params_and_grads(log(3 * GiB, 2 * GiB, 3 * GiB)) == 5 * GiB
    assert params_grads_state(log(3 * GiB, 2 * GiB, 3 * GiB)) == 8 * GiB  # 3 + 2 + 3
    assert keeps_state(yours_opts, replace(yours_opts, gradient_checkpointing=True))
    assert not keeps_state(yours_opts, replace(yours_opts, optimizer="adamw8bit"))
    assert not keeps_state(yours_opts, replace(yours_opts, optimizer_impl="for-loop"))

    class _Six(_Analyses):
        def outcome(self, opts, label, cost="", changes=()):
            self.analysed.append(label)
            return _outcome6(label, (10 - len(changes)) * GiB, opts, tuple(changes))

    def _outcome6(label, total, opts, changes):
        return Outcome(label, opts, total, total, total, 6 * GiB, False, False, 0.0, "", None, changes)

    names = ["chunked cross-entropy", "gradient checkpointing", "8-bit AdamW (bitsandbytes)", "pure bf16 training"]
    singles = [_outcome6(n, 7 * GiB, next(c for c in CANDIDATES if c.name == n).apply(yours_opts),
                         next(c for c in CANDIDATES if c.name == n).changes) for n in names]
    analyses = _Six(yours_opts, log(3 * GiB, 2 * GiB, 3 * GiB))
    bf16 = singles[3].options  # pure bf16's own trace, written here: P + G + S = 2 + 2 + 3 = 7 GiB
    analyses.traces[trace_key(bf16)] = log(2 * GiB, 2 * GiB, 3 * GiB)
    find_plans(analyses, _outcome6("your settings", 10 * GiB, yours_opts, ()), singles, QUIET)
    pairs = [a for a in analyses.analysed if a.count(" + ") == 1]
    # ruled out: chunked + checkpointing (yours: 8 GiB), checkpointing/chunked + pure bf16 (pure bf16's: 7 GiB)
    assert pairs == ["chunked cross-entropy + 8-bit AdamW (bitsandbytes)",
                     "gradient checkpointing + 8-bit AdamW (bitsandbytes)",
                     "8-bit AdamW (bitsandbytes) + pure bf16 training"]


@pytest.mark.slow  # a trace of tiny-llama per change, in fp32 and in pure bf16
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_each_change_that_keeps_the_state_has_your_params_grads_and_state(precision):
    """Measured: each change the P + G + S bound trusts, traced, has the base's P + G + S at its optimizer step, at
    most its allocated peak; by hand for fp32: 4 B weights and gradients, Adam's two 4 B moments and a 4 B step for
    each of the 21 parameters."""
    from memgraph.fit.bound import keeps_state, params_grads_state

    spec, opts = _setup(precision=precision)
    analyses = Analyses(spec)
    analyses.outcome(opts, "yours")
    base = params_grads_state(analyses.traces[trace_key(opts)])
    if precision == "fp32":
        assert base == 4 * 4 * PARAMETERS + 21 * 4 == 3_232_852
    checked = _traced_changes_keep(analyses, opts, keeps_state, params_grads_state, base)
    assert {"gradient checkpointing", "activation offloading", "chunked cross-entropy"} <= set(checked)


def test_a_single_change_the_bound_rules_out_is_not_analysed():
    """P + G = 3 + 2 = 5 GiB, P + G + S = 8 GiB on a 4 GiB card: checkpointing and chunked cross-entropy (which keep
    the state) read as at least 8 GiB, not analysed; 8-bit AdamW (keeps P + G, not the state: P + G alone is no
    single change's stand-in, fit/candidates.py _SharedBound says why), pure bf16 and LoRA (which change P + G) are
    analysed, and expandable segments (replayed on your trace: no trace to save) too."""
    from memgraph.fit.candidates import try_changes
    from memgraph.fit.outcome import BOUND_HOW

    yours_opts = TrainingOptions(seq_len=32)
    analyses = _Analyses(yours_opts, _log_with_state(3 * GiB, 2 * GiB, 3 * GiB))
    yours = _outcome("your settings", 10 * GiB, yours_opts, ())
    tried = {o.label: o for o in try_changes(analyses, yours_opts, yours, QUIET, max_gpus=1)}
    assert (tried["gradient checkpointing"].how, tried["gradient checkpointing"].device_total) == (BOUND_HOW, 8 * GiB)
    assert {"8-bit AdamW (bitsandbytes)", "pure bf16 training", "LoRA rank 16 on all linear layers",
            "expandable segments"} <= set(analyses.analysed)
    assert not {"gradient checkpointing", "chunked cross-entropy"} & set(analyses.analysed)


def test_a_set_with_a_ruled_out_change_analyses_that_change_alone_first():
    """Checkpointing, ruled out alone at 8 GiB (P + G + S), beside LoRA (7 GiB; nothing rules LoRA's sets out): the
    pair is analysed only after checkpointing alone is, and only where checkpointing alone saves."""
    from memgraph.fit.outcome import ruled_out

    yours_opts = TrainingOptions(seq_len=32)
    ckpt, lora = (next(c for c in CANDIDATES if c.name == n) for n in ("gradient checkpointing",
                                                                      "LoRA rank 16 on all linear layers"))
    for alone, analysed in ((10 * GiB, ["gradient checkpointing"]),  # saves nothing alone: no pair
                            (9 * GiB, ["gradient checkpointing", "gradient checkpointing + LoRA rank 16 on all "
                                                                 "linear layers"])):
        class _Alone(_Analyses):
            def outcome(self, opts, label, cost="", changes=()):
                self.analysed.append(label)
                total = alone if label == ckpt.name else 10 * GiB - len(changes) * GiB
                return _outcome(label, total, opts, tuple(changes))

        analyses = _Alone(yours_opts, _log_with_state(3 * GiB, 2 * GiB, 3 * GiB))
        singles = [ruled_out(ckpt.name, ckpt.apply(yours_opts), 8 * GiB, 4 * GiB, "", ckpt.changes),
                   _outcome(lora.name, 7 * GiB, lora.apply(yours_opts), lora.changes)]
        find_plans(analyses, _outcome("your settings", 10 * GiB, yours_opts, ()), singles, QUIET)
        assert analyses.analysed[:len(analysed)] == analysed and \
            analyses.analysed.count("gradient checkpointing + LoRA rank 16 on all linear layers") == len(analysed) - 1


def test_the_table_shows_the_figure_of_a_bounded_change_the_plans_analysed():
    """Checkpointing ruled out at 8 GiB, then analysed for a plan set (9 GiB): the table shows 9 GiB, ranked among
    the analysed changes (before the 8 GiB bound of chunked cross-entropy, which stays a bound)."""
    from memgraph.fit.candidates import analysed_where_known
    from memgraph.fit.outcome import BOUND_HOW, ruled_out

    yours_opts = TrainingOptions(seq_len=32)
    ckpt, chunked = (next(c for c in CANDIDATES if c.name == n) for n in ("gradient checkpointing",
                                                                         "chunked cross-entropy"))
    analyses = _Analyses(yours_opts, _log_with_state(3 * GiB, 2 * GiB, 3 * GiB))
    analyses.analysed = lambda opts: opts == ckpt.apply(yours_opts)  # noqa: E731 - only checkpointing was analysed
    analyses.outcome = lambda opts, label, cost="", changes=(): _outcome(label, 9 * GiB, opts, tuple(changes))
    tried = [ruled_out(n.name, n.apply(yours_opts), 8 * GiB, 4 * GiB, "", n.changes) for n in (chunked, ckpt)]
    shown = analysed_where_known(analyses, tried)
    assert [(o.label, o.device_total, o.how == BOUND_HOW) for o in shown] == [
        ("gradient checkpointing", 9 * GiB, False), ("chunked cross-entropy", 8 * GiB, True)]
