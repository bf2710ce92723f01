"""Private PyTorch / transformers touch points: every guard holds on the installed versions and fails
loudly (PrivateApiError, one line with the version found and the supported range) when the thing it
guards is missing or changed; the patches memgraph makes while tracing are undone afterwards."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import transformers
from packaging.specifiers import SpecifierSet
from packaging.version import Version

import memgraph.private_api as api
from memgraph import analyze
from memgraph.model_spec.sources import import_from_folder, resolve
from memgraph.private_api import PrivateApiError

REPO = Path(__file__).resolve().parent.parent
MLP_INPUT = "x=float32[4,16]"  # tests/fixtures/nets.py: mlp() takes x[B=4, D0=16]


# -- every guard holds here ------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(api.GUARDS))
def test_guard_passes_on_the_installed_versions(name):
    if api.unavailable(name):  # a touch point newer than the installed library: refused, tested below
        with pytest.raises(PrivateApiError, match=r"needs (torch|transformers|deepspeed)>="):
            api.GUARDS[name]()
        return
    api.GUARDS[name]()


def test_a_feature_newer_than_the_installed_transformers_is_refused_with_the_version_to_install(monkeypatch):
    """Audio-language inputs use processors' _process_audio, new in transformers 5.16 (checked in the 5.15.0 and
    5.16.0 wheels): under it, one line naming the installed version and the range to install."""
    from memgraph.model_spec.audio_text_inputs import NoAudioTextLayout, audio_clip

    monkeypatch.setattr(api, "_installed", lambda library: "5.6.0")
    with pytest.raises(NoAudioTextLayout) as info:
        audio_clip(resolve(str(REPO / "tests" / "configs" / "tiny-qwen2-audio.json")).config, 10)
    upper = api.TRANSFORMERS_RANGE.split(",")[1]
    assert str(info.value) == (
        f"transformers 5.6.0: audio-language inputs (task audio-text-to-text, --audio-seconds) needs "
        f"transformers>=5.16: install 'transformers>=5.16,{upper}', or describe the inputs with --input")
    with pytest.raises(PrivateApiError, match=r"^transformers 5\.6\.0: audio-language inputs .* needs transformers>=5\.16"):
        api.GUARDS["transformers_audio_processors"]()


def test_installed_versions_are_in_the_supported_ranges():
    assert Version(torch.__version__.split("+")[0]) in SpecifierSet(api.TORCH_RANGE)
    assert Version(transformers.__version__) in SpecifierSet(api.TRANSFORMERS_RANGE)


def test_pyproject_states_the_same_ranges():
    pyproject = (REPO / "pyproject.toml").read_text()  # [project] dependencies
    assert f'"torch{api.TORCH_RANGE}"' in pyproject
    assert f'"transformers{api.TRANSFORMERS_RANGE}"' in pyproject


# -- each guard fails loudly when its thing is missing or changed ----------------------------------
def _without_nbytes():
    return type("_KinetoEvent", (), {"name": 0, "start_ns": 0, "device_type": 0})


def softmax(x, dim):
    """A torch Python function that no longer checks has_torch_function*."""
    return x


def _old_maybe_autocast(device_type, dtype=None, enabled=True, cache_enabled=None):
    """transformers 5.0-5.3: no meta check, so torch.autocast('meta') is asked and refuses."""
    return torch.autocast(device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


BREAKS = {  # guard -> (owner, attribute, replacement or None to delete, text the error names)
    "python_dispatch": ("torch.utils._python_dispatch", "_disable_current_modes", None, "_disable_current_modes"),
    "pytree": ("torch.utils._pytree", "tree_flatten", lambda tree: ([], None), "tree_flatten"),
    "weak_id_dict": ("torch.utils.weak", "WeakIdKeyDictionary", None, "WeakIdKeyDictionary"),
    "bindings": ("torch.nn.functional", "scaled_dot_product_attention", lambda *a, **k: None,
                 "F.scaled_dot_product_attention"),
    "has_torch_function": ("torch.nn.functional", "softmax", softmax, "softmax"),
    "tensor_internals": ("torch.UntypedStorage", "_cdata", property(lambda self: 0), "_cdata"),
    "aten_schemas": ("memgraph.private_api.ASSUMED_SCHEMAS", "native_dropout", ("input", "train", "p"),
                     "aten::native_dropout"),
    "sdp_choice": ("torch._C", "_get_sdp_priority_order", lambda: [7], "_get_sdp_priority_order"),
    "graph_task_id": ("torch._C", "_current_graph_task_id", None, "_current_graph_task_id"),
    "use_counts": ("torch._C", "_storage_Use_Count", None, "_storage_Use_Count"),
    "mod_tracker": ("torch.distributed._tools.mod_tracker.ModTracker", "_fw_pre_hook",
                    lambda self, mod, input: None, "ModTracker._fw_pre_hook"),
    "fused_devices": ("torch.optim.optimizer", "_get_fused_kernels_supported_devices", None,
                      "_get_fused_kernels_supported_devices"),
    "foreach_devices": ("torch.optim.optimizer", "_get_foreach_kernels_supported_devices", None,
                        "_get_foreach_kernels_supported_devices"),
    "meta_kernel_registration": ("torch.library.Library", "_destroy", None, "_destroy"),
    "grad_scaler": ("torch.amp.grad_scaler.GradScaler", "_maybe_opt_step", lambda self, *a, **k: None,
                    "GradScaler._maybe_opt_step"),
    "conv_backend": ("torch._C", "_select_conv_backend", lambda *a: None, "_select_conv_backend"),
    "suggest_memory_format": ("torch._prims_common", "suggest_memory_format",
                              lambda x: torch.contiguous_format, "suggest_memory_format"),
    "kineto": ("torch._C._autograd", "_KinetoEvent", _without_nbytes(), "_KinetoEvent.nbytes"),
    "allocation_events": ("torch._C._profiler", "_ExtraFields_Allocation",
                          type("_ExtraFields_Allocation", (), {"alloc_size": 0}), "_ExtraFields_Allocation.ptr"),
    "cuda_memory": ("torch.cuda.memory", "_record_memory_history", lambda enabled="all": None,
                    "_record_memory_history"),
    "transformers_from_config": ("transformers.PreTrainedModel", "_from_config",
                                 classmethod(lambda cls, config: None), "_from_config"),
    "transformers_meta_autocast": ("transformers.utils.generic", "maybe_autocast", _old_maybe_autocast,
                                   "maybe_autocast"),
    "transformers_default_attention": ("transformers.PreTrainedModel", "get_correct_attn_implementation",
                                       lambda self, requested, is_init_check=False: requested or "eager",
                                       "get_correct_attn_implementation"),
    # transformers 5.23 calls it from the forward __init_subclass__ wraps, 5.6 from __call__: break the one there is
    "transformers_checkpoint_function": (
        ("transformers.modeling_layers.GradientCheckpointingLayer", "__call__", lambda self, *a, **k: None,
         "_gradient_checkpointing_func")
        if "__call__" in vars(__import__("transformers.modeling_layers", fromlist=["x"]).GradientCheckpointingLayer)
        else ("transformers.modeling_layers.GradientCheckpointingLayer", "__init_subclass__",
              classmethod(lambda cls, **kwargs: None), "_gradient_checkpointing_func")),
    "fake_distributed": ("torch.distributed.fsdp._fully_shard._fsdp_param", "free_storage", None, "free_storage"),
    "fsdp1_on_meta": ("torch.distributed.fsdp._flat_param", "_free_storage", None, "_free_storage"),
    "deepspeed_on_meta": ("deepspeed.runtime.zero.stage3", "defragment", None, "defragment"),
    "deepspeed_cpu_adam_on_meta": ("deepspeed.ops.adam.cpu_adam.DeepSpeedCPUAdam", "step",
                                   lambda self, closure=None: None, "DeepSpeedCPUAdam.step"),
    "deepspeed_offload_on_host": ("deepspeed.runtime.zero.stage_1_and_2.DeepSpeedZeroOptimizer", "__init__",
                                  lambda self, *a, **k: None, "DeepSpeedZeroOptimizer"),
    "dtensor_sharding_cache": ("torch.distributed.tensor.debug", "_clear_fast_path_sharding_prop_cache", None,
                               "_clear_fast_path_sharding_prop_cache"),
    "compile_internals": ("torch._inductor.async_compile.AsyncCompile", "cpp_pybinding", None,
                          "AsyncCompile.cpp_pybinding"),
    "compiled_optimizer": ("torch._dynamo.variables.optimizer.OptimizerVariable", "call_method",
                           lambda self, tx, name, args, kwargs: None, "_init_group"),
    "transformers_audio_processors": ("transformers.Qwen2AudioProcessor", "_process_audio",
                                      lambda self, audios, **kw: None, "_process_audio"),
    "transformers_torchaudio_backend": ("transformers.utils.import_utils.BACKENDS_MAPPING", "torchaudio", None,
                                        "BACKENDS_MAPPING['torchaudio']"),
    "transformers_config_attention_reset": ("transformers.PretrainedConfig", "_attn_implementation",
                                            property(lambda self: None), "_attn_implementation"),
    "dynamo_guard_keys": ("torch._C", "_IncludeDispatchKeyGuard", None, "_IncludeDispatchKeyGuard"),
    "composite_meta_kernels": ("torch._C", "_dispatch_has_kernel_for_dispatch_key", None,
                               "_dispatch_has_kernel_for_dispatch_key"),
    "inductor_cuda": ("torch._inductor.scheduler", "has_triton", None, "has_triton"),
    "compile_log_text": ("torch._dynamo.repro.after_aot", "save_graph_repro", None, "save_graph_repro"),
    "fake_mode_key": ("torch._C", "_get_dispatch_mode", None, "_get_dispatch_mode"),
    "module_compiled_call": ("torch.nn.Module", "compile", lambda self, *a, **k: None, "nn.Module.compile"),
    "rng_state_hops": ("torch._prims.rng_prims", "run_and_save_rng_state", None, "run_and_save_rng_state"),
    "fakify_first_call": ("torch._functorch._aot_autograd.runtime_wrappers", "FakifiedOutWrapper", None,
                          "FakifiedOutWrapper"),
    "op_schema_aliasing": ("torch.ops.aten.add_.Tensor", "_schema", torch.ops.aten.add.Tensor._schema,
                           "aten::add_.Tensor"),
}


def test_every_guard_has_a_break_test():
    assert set(BREAKS) == set(api.GUARDS)


def test_compile_log_text_is_skipped_only_while_open():
    """AOTAutograd's graph texts and Inductor's repro are not made inside the context (a speed-up only), and are
    again after it."""
    from torch._dynamo.repro import after_aot
    from torch._functorch._aot_autograd import graph_compile

    originals = (graph_compile._log_joint_graph, graph_compile._log_fw_bw_graphs, after_aot.save_graph_repro)
    with api.compile_log_text_skipped():
        assert graph_compile._log_joint_graph(None, None) is None
        assert graph_compile._log_fw_bw_graphs(None, None, None, None, None) == (None, None)
        assert after_aot.save_graph_repro(None, None, None, "inductor") is None
    assert (graph_compile._log_joint_graph, graph_compile._log_fw_bw_graphs, after_aot.save_graph_repro) == originals


def _resolve_owner(dotted: str):
    import importlib

    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise LookupError(dotted)


def _break(monkeypatch, name):
    owner_name, attr, replacement, named = BREAKS[name]
    owner = _resolve_owner(owner_name)
    if isinstance(owner, dict):
        monkeypatch.setitem(owner, attr, replacement)
    elif replacement is None:
        monkeypatch.delattr(owner, attr)
    else:
        monkeypatch.setattr(owner, attr, replacement)
    return named


@pytest.mark.parametrize("name", sorted(BREAKS))
def test_guard_fails_loudly_when_its_thing_changes(monkeypatch, name):
    if api.unavailable(name):
        pytest.skip(api.unavailable(name))  # nothing installed to break: refused by version (test above)
    named = _break(monkeypatch, name)
    with pytest.raises(PrivateApiError) as info:
        api.GUARDS[name]()
    message = str(info.value)
    if name.startswith("transformers"):
        library, version, supported = "transformers", transformers.__version__, api.TRANSFORMERS_RANGE
    elif name.startswith("deepspeed"):
        import deepspeed

        library, version, supported = "deepspeed", deepspeed.__version__, api.DEEPSPEED_RANGE
    else:
        library, version, supported = "torch", torch.__version__, api.TORCH_RANGE
    assert message.startswith(f"{library} {version}: ")  # the version found
    assert f"supports {library}{supported}" in message  # the supported range
    assert named in message  # what changed
    assert "\n" not in message


def test_a_changed_copy_is_caught_by_its_source_hash(monkeypatch):
    """The copied ModTracker._fw_pre_hook: a hash not in the known table is a change."""
    monkeypatch.setattr(api, "MOD_TRACKER_FW_PRE_HOOK_HASHES", {"0" * 16: "torch 0.0"})
    with pytest.raises(PrivateApiError, match=r"source of ModTracker._fw_pre_hook changed \(hash [0-9a-f]{16}"):
        api.GUARDS["mod_tracker"]()


def test_first_use_runs_the_guard(monkeypatch):
    """Guards not run at import run when the touch point is first used."""
    monkeypatch.setattr(api, "_PASSED", set())
    _break(monkeypatch, "grad_scaler")
    with pytest.raises(PrivateApiError, match="GradScaler._maybe_opt_step"):
        api.GradScalerAssumingFiniteGrads("meta")
    _break(monkeypatch, "fused_devices")
    with pytest.raises(PrivateApiError, match="_get_fused_kernels_supported_devices"):
        with api.fused_kernels_also_on("meta"):
            pass


def test_body_without_checks_only_for_torch_python_functions():
    softmax = torch.nn.functional.softmax
    body = api.body_without_torch_function_checks(softmax)
    assert body is not None and body.__code__ is softmax.__code__
    assert all(body.__globals__[n] is api._answer_false for n in api.HAS_TORCH_FUNCTION if n in body.__globals__)
    assert api.body_without_torch_function_checks(torch._C._nn.linear) is None  # a C++ binding
    assert api.body_without_torch_function_checks(_old_maybe_autocast) is None  # not torch's


# -- patches are scoped: undone after a trace ------------------------------------------------------
def _fused_sgd_on_meta() -> str:
    p = [torch.empty(3, device="meta")]
    try:
        torch.ops.aten._fused_sgd_(p, p, [], weight_decay=0.0, momentum=0.0, lr=0.1, dampening=0.0,
                                   nesterov=False, maximize=False, is_first_step=True)
    except Exception as e:  # noqa: BLE001 - the error is what is compared
        return f"{type(e).__name__}: {e}"
    return "ran"


def _fused_state():
    import torch.library
    import torch.optim.optimizer as optimizer_module

    return (_fused_sgd_on_meta(),
            torch._C._dispatch_has_kernel_for_dispatch_key("aten::_fused_sgd_", "Meta"),
            {k for k in torch.library._impls if "_fused_sgd_" in k},
            optimizer_module._get_fused_kernels_supported_devices)


def test_fused_sgd_trace_leaves_torch_as_it_was():
    before = _fused_state()
    assert before[0].startswith("NotImplementedError")  # torch 2.13: no Meta kernel for _fused_sgd_
    result = analyze("tests.fixtures.nets:mlp", inputs=(MLP_INPUT,), optimizer="sgd-momentum",
                     optimizer_impl="fused", target="cuda")
    assert result.optimizer_impl == "fused"  # the fused kernel ran on meta while tracing
    after = _fused_state()
    assert after == before
    import torch.utils._foreach_utils as foreach_utils

    assert after[3] is foreach_utils._get_fused_kernels_supported_devices
    assert "meta" not in after[3]()


def test_noop_meta_kernels_are_removed_after_an_error():
    with pytest.raises(RuntimeError, match="inside"):
        with api.noop_meta_kernels():
            assert _fused_sgd_on_meta() == "ran"
            raise RuntimeError("inside")
    assert _fused_sgd_on_meta().startswith("NotImplementedError")


# -- module:function imports: from the folder named, sys.path untouched ---------------------------
NET = "import torch\nimport tabulate\nTABULATE = tabulate.__file__\n\ndef build():\n    return torch.nn.Linear(2, 2)\n"
STRAY = "raise ImportError('the stray tabulate.py in the current folder was imported')\n"


@pytest.fixture
def user_folder(tmp_path, monkeypatch):
    """A folder with the user's module and a stray tabulate.py; tabulate not imported yet."""
    (tmp_path / "usernet_cwd.py").write_text(NET)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "usernet_sub.py").write_text(NET)
    (tmp_path / "tabulate.py").write_text(STRAY)
    (tmp_path / "sub" / "tabulate.py").write_text(STRAY)
    for name in ("tabulate", "usernet_cwd", "usernet_sub"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_bare_module_name_comes_from_the_current_folder(user_folder):
    before = list(sys.path)
    spec = resolve("usernet_cwd:build")
    assert sys.path == before
    assert isinstance(spec.factory(), torch.nn.Linear)
    module = sys.modules["usernet_cwd"]
    assert Path(module.__file__).parent == user_folder
    assert Path(module.TABULATE).parent != user_folder  # the real package, not the stray file


def test_module_path_comes_from_the_folder_it_names(user_folder):
    before = list(sys.path)
    for ref in ("sub/usernet_sub:build", "sub/usernet_sub.py:build"):
        sys.modules.pop("usernet_sub", None)
        spec = resolve(ref)
        assert sys.path == before
        assert Path(sys.modules["usernet_sub"].__file__).parent == user_folder / "sub"
        assert "sub" not in Path(sys.modules["usernet_sub"].TABULATE).parts
        assert isinstance(spec.factory(), torch.nn.Linear)


def test_a_failed_import_leaves_sys_path_as_it_was(user_folder):
    before = list(sys.path)
    (user_folder / "broken.py").write_text("import no_such_package_anywhere\n")
    with pytest.raises(ImportError):
        import_from_folder("broken", user_folder)
    assert sys.path == before
    assert "broken" not in sys.modules
