"""Resolve what the user named into a buildable model: zoo name, config.json / folder, or module:function."""

from __future__ import annotations

import contextlib
import importlib
import importlib.machinery
import importlib.util
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from memgraph.errors import MemgraphError
from memgraph.model_spec import hub, zoo
from memgraph.model_spec.config_checks import (
    check_architectures,
    check_config,
    check_family,
    check_field_names,
    check_fields,
    check_huge_integers,
    check_token_ids,
    parse_json_int,
)
from memgraph.model_spec.config_defaults import default_warnings
from memgraph.model_spec.inputs import Batch, parse_input
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.tasks import TASKS, task_for_class
from memgraph.model_spec.user_code import call_failure, import_failure
from memgraph.private_api import model_from_config


@dataclass
class ModelSpec:
    """A model we can build on any device, and the batch it trains on."""

    name: str
    source: str  # "zoo" | "config" | "callable"
    task: str  # a key of tasks.TASKS, or "custom"
    defaults: dict = field(default_factory=dict)
    config: object | None = None  # transformers PretrainedConfig
    model_class: str | None = None
    factory: Callable[[], torch.nn.Module] | None = None  # for callables
    warnings: list[str] = field(default_factory=list)  # sizing fields a user's config left to defaults

    def build(self, opts: TrainingOptions, dtype: torch.dtype) -> torch.nn.Module:
        """Build the model on the current default device (call under ``torch.device(...)``)."""
        if self.factory is not None:
            try:
                model = self.factory()
            except MemgraphError:
                raise
            except Exception as e:  # the user's factory failing is the user's error: say where
                raise call_failure(f"model {self.name!r}: its factory failed", e,
                                   "fix the function, or the module it builds") from e
            if not isinstance(model, torch.nn.Module):
                raise MemgraphError(f"{self.name} returned {type(model).__name__}, not a torch.nn.Module")
            return model.to(dtype=dtype) if dtype != torch.float32 else model
        import transformers

        cls = getattr(transformers, self.model_class, None)
        if cls is None:
            raise MemgraphError(
                f"transformers {transformers.__version__} has no class {self.model_class!r}: "
                "upgrade transformers or fix 'architectures' in the config"
            )
        return model_from_config(cls, self.config, opts.attn_implementation, dtype)

    def batch(self, opts: TrainingOptions, float_dtype: torch.dtype) -> Batch:
        if self.task == "custom":
            if not opts.inputs:
                raise MemgraphError(f"{self.name} is a callable model: describe its inputs with --input name=dtype[dims]")
            return Batch(tuple(parse_input(s) for s in opts.inputs), {}, positional=True)
        if opts.inputs:
            specs = tuple(parse_input(s) for s in opts.inputs)
            self._check_input_names(specs)
            return Batch(specs, {})
        return TASKS[self.task](self.config, opts, self.defaults, float_dtype)


    def _check_input_names(self, specs) -> None:
        """A transformers model takes its inputs by name: each ``--input`` must name a forward() parameter."""
        import inspect

        import transformers

        cls = getattr(transformers, self.model_class or "", None)
        if cls is None:
            return
        params = inspect.signature(cls.forward).parameters
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            named = [n for n, p in params.items() if n != "self" and p.kind is not inspect.Parameter.VAR_KEYWORD]
        else:
            named = [n for n in params if n != "self"]
        for spec in specs:
            if spec.name not in params:
                raise MemgraphError(f"--input {spec.name[:40]!r}: {self.model_class}.forward takes no such input; "
                                    f"its inputs are {', '.join(named[:12])}")


def resolve(ref: str) -> ModelSpec:
    """Turn a zoo name, a config.json path / model folder, or ``module:function`` into a ModelSpec."""
    path = Path(ref)
    if _exists(path):
        return _from_config_path(path)
    if ":" in ref and not ref.endswith(".json"):
        return _from_callable(ref)
    if hub.is_hub_id(ref):  # org/name: the zoo entry of that source, else the local Hugging Face cache (hub.py)
        return _from_hub_id(ref)
    if ref.endswith(".json") or "/" in ref:
        raise MemgraphError(f"config file {ref!r} not found: pass an existing config.json or model folder")
    return _from_zoo(zoo.get(ref))


def _from_zoo(entry) -> ModelSpec:
    return ModelSpec(
        name=entry.name, source="zoo", task=entry.task, defaults=dict(entry.defaults),
        config=_make_config(dict(entry.config), entry.name), model_class=entry.model_class,
    )


def _from_hub_id(ref: str) -> ModelSpec:
    entry = hub.zoo_entry(ref)
    if entry is not None:
        return _from_zoo(entry)
    folder = hub.cached_snapshot(ref)
    if folder is None:
        raise hub.not_fetched(ref)
    spec = _from_config_path(folder)
    spec.name = ref
    size = hub.processor_image_size(folder)
    if size is not None:
        spec.defaults["image_size"] = size
    return spec


def _exists(path: Path) -> bool:
    """``path.exists()``, False for a name the file system cannot hold (ENAMETOOLONG): not a file, then."""
    try:
        return path.exists()
    except OSError:
        return False


def _make_config(data: dict, where: str):
    from transformers import AutoConfig

    model_type = data.pop("model_type", None)
    if not model_type:
        raise MemgraphError(f"{where}: config has no 'model_type': it is not a transformers config.json")
    if not isinstance(model_type, str):
        raise MemgraphError(f"{where}: 'model_type' is {model_type!r}, not a name: fix the config")
    from transformers import CONFIG_MAPPING

    if model_type not in CONFIG_MAPPING:
        raise MemgraphError(f"{where}: model_type {model_type!r} is not known to transformers "
                            f"{_transformers_version()}: fix the config or upgrade transformers")
    check_fields(data, where)
    check_field_names(data, where)
    check_token_ids(data, where, model_type=model_type)
    for key, value in data.items():  # raw sub-configs (text_config, vision_config, ...)
        if isinstance(value, dict):
            check_fields(value, f"{where} ({key})")
            check_field_names(value, f"{where} ({key})")
            check_token_ids(value, f"{where} ({key})")
    try:
        from huggingface_hub.errors import StrictDataclassError  # transformers' config field validators
    except ImportError:
        StrictDataclassError = ValueError
    try:
        config = AutoConfig.for_model(model_type, **data)
    except (StrictDataclassError, ValueError, TypeError, AttributeError, OverflowError, RecursionError,
            ZeroDivisionError) as e:
        # transformers' strict dataclass validators and config __init__ arithmetic on bad values; the
        # cause's own last line names the field
        cause = e.__cause__ or e
        detail = str(cause).strip().splitlines()[-1] if str(cause).strip() else type(cause).__name__
        raise MemgraphError(f"{where}: transformers refuses this {model_type} config: {detail}") from None
    check_config(config, where)
    return config


def _transformers_version() -> str:
    import transformers

    return transformers.__version__


def _from_config_path(path: Path) -> ModelSpec:
    file = path / "config.json" if path.is_dir() else path
    if not file.is_file():
        raise MemgraphError(f"model folder {str(path)!r} has no config.json: pass the config file itself")
    try:
        data = json.loads(file.read_text(), parse_int=parse_json_int)
    except (ValueError, UnicodeDecodeError) as e:  # json.JSONDecodeError is a ValueError
        raise MemgraphError(f"config {str(file)!r} is not valid JSON ({e}): fix or re-download it") from None
    except RecursionError:
        raise MemgraphError(f"config {str(file)!r} is nested too deeply to be a config.json: fix or re-download it") from None
    if not isinstance(data, dict):
        raise MemgraphError(f"config {str(file)!r} is not a JSON object: pass a transformers config.json")
    check_huge_integers(data, str(file))
    cls = check_architectures(data.get("architectures"), str(file))
    check_family(cls, data.get("model_type"), str(file))
    task = task_for_class(cls)
    if task is None:
        raise MemgraphError(
            f"config {str(file)!r}: no training task known for {cls!r}; supported heads: *ForCausalLM, "
            "*LMHeadModel, *ForMaskedLM, *ForSequenceClassification, *ForTokenClassification, *ForQuestionAnswering, "
            "*ForImageClassification, T5/Bart/Whisper, "
            "CLIP/SigLIP, image-text-to-text and speech-seq2seq classes of transformers' auto mappings"
        )
    config = _make_config(dict(data), str(file))
    return ModelSpec(name=str(file), source="config", task=task, config=config, model_class=cls,
                     warnings=default_warnings(data, config, str(file)))


def _from_callable(ref: str) -> ModelSpec:
    module_ref, _, func_name = ref.partition(":")
    if not module_ref or not func_name.isidentifier():
        raise MemgraphError(f"model {ref!r} is not module:function, a zoo name, or an existing config path")
    if module_ref.startswith("."):
        raise MemgraphError(f"model {ref!r}: {module_ref!r} is a relative module reference, and memgraph imports from "
                            "the current folder: name the module (pkg.mod:function) or its file (path/mod.py:function)")
    folder, module_name = _module_location(module_ref)
    if not all(part.isidentifier() for part in module_name.split(".")):
        raise MemgraphError(f"model {ref!r}: {module_name[:80]!r} is not a Python module name: name a module "
                            "(pkg.mod:function) or a file (path/mod.py:function)")
    try:
        module = import_from_folder(module_name, folder)
    except ImportError as e:
        raise MemgraphError(f"cannot import module {module_name!r} for {ref!r}: {e}") from None
    except MemgraphError:  # --timeout while the module was being imported
        raise
    except Exception as e:  # the user's module failing at import (SyntaxError, a bad encoding, a raise)
        raise import_failure(module_name, ref, e) from None
    factory = getattr(module, func_name, None)
    if not callable(factory):
        raise MemgraphError(f"module {module_name!r} has no callable {func_name!r}")
    return ModelSpec(name=ref, source="callable", task="custom", factory=factory)


def _module_location(module_ref: str) -> tuple[Path, str]:
    """(folder, dotted module name): ``dir/sub/net.py`` or ``dir/sub/net`` -> (dir/sub, "net");
    a dotted name such as ``pkg.net`` -> (the current folder, "pkg.net")."""
    if "/" in module_ref or module_ref.endswith(".py"):
        path = Path(module_ref)
        return path.parent.resolve(), path.name.removesuffix(".py")
    return Path.cwd(), module_ref


def import_from_folder(module_name: str, folder: Path):
    """Import ``module_name`` (dotted) with its top-level package or module found in ``folder`` first.

    ``folder`` is searched for that one name only, without putting it first on ``sys.path``: a file
    there named like an installed package (``tabulate.py``) never shadows it. While the module runs,
    ``folder`` is *appended* to ``sys.path`` so that it can import its sibling modules; ``sys.path``
    is restored exactly afterwards. A name not found in ``folder`` is imported as usual (installed
    packages). Raises ImportError.
    """
    top = module_name.partition(".")[0]
    spec = None if top in sys.modules else importlib.machinery.PathFinder.find_spec(top, [str(folder)])
    with _path_appended(folder):
        if spec is not None:
            _load_top_level(spec)
        return importlib.import_module(module_name)


def _load_top_level(spec) -> None:
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(spec.name, None)
        raise


@contextlib.contextmanager
def _path_appended(folder: Path):
    saved = list(sys.path)
    sys.path.append(str(folder))
    try:
        yield
    finally:
        sys.path[:] = saved
