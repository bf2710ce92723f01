"""Imports follow the data flow, and there are no import cycles.

The package is layered in the order the data flows (memgraph/__init__.py draws it). A module may
import memgraph modules of its own layer or of a lower one, never of a later stage; imports inside
functions count too (a lazy import is still a dependency). Within the package no two modules may
import each other, directly or through others.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "memgraph"

# Lowest first. A name is the first part of the module path below memgraph/.
LAYERS = [
    {"errors", "units", "version", "cpu_profiler", "private_api", "collector", "frame_stack", "notes"},  # foundation
    {"facts"},  # what PyTorch, CUDA and the GPUs do, as data
    {"model_spec", "job_config"},  # what to build and how to train it (job_config: read from a user's config file)
    {"step"},  # the training step built and run: shared by the trace, the real run and each rank
    {"trace", "ds_engine", "compiled"},  # the step on meta -> the storage event log (ds_engine: DeepSpeed's engine in it; compiled: the step under torch.compile)
    {"analysis"},  # passes over the log -> Result
    {"allocator"},  # the caching allocator replayed over the log
    {"render"},  # Result -> table, markdown, JSON, HTML
    {"api", "measure", "validation", "output", "watch", "stall", "sweep", "fit", "cli", "__main__", "__init__", "script_run"},  # entry points
]
LAYER_OF = {name: i for i, names in enumerate(LAYERS) for name in names}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """memgraph modules ``path`` imports (absolute names), anywhere in the file."""
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found = set()
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "memgraph")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.split(".")[0] != "memgraph":
                continue
            for alias in node.names:  # "from memgraph.x import y" may name the module memgraph.x.y
                sub = f"{mod}.{alias.name}"
                found.add(sub if _exists(sub) else mod)
    return found


@functools.lru_cache(maxsize=None)
def parsed(path: Path) -> ast.Module:
    """The syntax tree of ``path``, parsed once per session (every check here walks the same files)."""
    return ast.parse(path.read_text())


def _exists(module: str) -> bool:
    rel = Path(*module.split(".")[1:])
    return (PACKAGE / rel).with_suffix(".py").exists() or (PACKAGE / rel / "__init__.py").exists()


def layer(module: str) -> int:
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else "__init__"
    assert top in LAYER_OF, f"{module}: put memgraph/{top} in a layer of tests/test_layers.py"
    return LAYER_OF[top]


@functools.lru_cache(maxsize=1)
def graph() -> dict[str, set[str]]:
    """Module -> the memgraph modules it imports (parsed once per session; callers copy before changing it)."""
    return {module_name(p): imports(p) - {module_name(p)} for p in sorted(PACKAGE.rglob("*.py"))}


def backwards(g: dict[str, set[str]]) -> list[str]:
    return sorted(f"{m} imports {d} (layer {layer(d)} > {layer(m)})" for m, deps in g.items() for d in deps
                  if layer(d) > layer(m))


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in g:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def test_every_import_points_down_the_data_flow():
    assert backwards(graph()) == []


def test_no_import_cycles():
    g = dict(graph())
    # the package's own __init__ re-exports the API, which imports everything: it is not a module cycle
    g.pop("memgraph", None)
    assert cycles(g) == []


def test_the_checks_catch_a_backward_import_and_a_cycle():
    g = {"memgraph.trace.record.recorder": {"memgraph.analysis.liveness"}, "memgraph.analysis.liveness": {"memgraph.trace.record.recorder"}}
    assert backwards(g) == ["memgraph.trace.record.recorder imports memgraph.analysis.liveness (layer 5 > 4)"]
    assert cycles(g) == [["memgraph.analysis.liveness", "memgraph.trace.record.recorder"]]


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_every_module_is_in_a_layer(path):
    layer(module_name(path))


def test_step_sits_between_what_to_build_and_recording():
    """step/ imports nothing of trace/ or measure/ (which record it and run it), and both import step/."""
    g = graph()
    assert not [d for m, deps in g.items() if m.startswith("memgraph.step") for d in deps
                if d.split(".")[1] in ("trace", "measure", "analysis", "allocator", "render")]
    assert "memgraph.step" in g["memgraph.trace.tracer"] | g["memgraph.trace.parallel.ranks"]
    assert "memgraph.step" in g["memgraph.measure.real_step"]


def test_trace_and_measure_build_their_step_through_one_function(monkeypatch):
    """The trace (meta), each rank's layout (meta) and ``memgraph measure`` (cpu) all get their step from
    step.build_step: a spy on the builder it dispatches to sees all three, and the real run's step is the one
    whose peak the trace predicts (the MLP of tests/test_mlp_by_hand.py: SGD_PEAK bytes, computed there)."""
    from memgraph.api import _spec, analyze, measure
    from memgraph.model_spec.options import TrainingOptions
    from memgraph.step import kinds
    from memgraph.trace.parallel.ranks import rank_groups
    from tests.test_mlp_by_hand import MLP, SGD_PEAK, X

    built = []
    real = kinds.STEP_BUILDERS["model"]

    def spy(spec, opts, device, distributed=None, **setup):
        built.append((device, "seed" in setup))
        return real(spec, opts, device, distributed, **setup)

    monkeypatch.setitem(kinds.STEP_BUILDERS, "model", spy)
    predicted = analyze(MLP, inputs=(X,), optimizer="sgd", target="cpu", iterations=2)
    measured = measure(MLP, device="cpu", inputs=(X,), optimizer="sgd", iterations=2)
    assert built == [("meta", False), ("cpu", True)]  # the trace on meta; the real run, seeded, on the cpu
    assert predicted.steady_state_peak.bytes == SGD_PEAK == measured["iterations"][1]["peak_allocated"]
    built.clear()
    opts = TrainingOptions(target="cpu", inputs=(X,), strategy="ddp", nproc=2)
    assert rank_groups(_spec(MLP), opts) == [[0, 1]]  # DDP: every rank holds the whole model
    assert built == [("meta", False), ("meta", False)]  # each rank's step, built as the trace builds it


def _names_imported(path: Path) -> dict[str, set[str]]:
    """memgraph module -> the names the file ``path`` imports from it (``from memgraph.x import a, b``)."""
    found: dict[str, set[str]] = {}
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("memgraph"):
            found.setdefault(node.module, set()).update(a.name for a in node.names)
    return found


def test_memgraph_run_records_through_the_tracers_public_hooks():
    """``memgraph run`` (script_run/runner.py) and the tracer hand the recorder and autograd the same pieces,
    from trace/record/step_hooks.py, and nothing imports the tracer's private names."""
    hooks = {"host_type", "saved_tensor_hooks", "workspace_of"}
    for module in ("trace/tracer.py", "script_run/runner.py"):
        assert hooks <= _names_imported(PACKAGE / module).get("memgraph.trace.record.step_hooks", set()), module
    for path in sorted(PACKAGE.rglob("*.py")):
        private = {n for n in _names_imported(path).get("memgraph.trace.tracer", ()) if n.startswith("_")}
        assert not private, f"{module_name(path)} imports {sorted(private)} from memgraph.trace.tracer"


def private_touches(tree: ast.Module) -> list[str]:
    """``from memgraph.x import _y`` and ``x._y`` (x a memgraph module imported by name) in ``tree``: a private
    name of one module used by another."""
    modules, found = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("memgraph"):
            for a in node.names:
                if a.name.startswith("_") and not a.name.startswith("__"):
                    found.append(f"from {node.module} import {a.name}")
                elif _exists(f"{node.module}.{a.name}"):
                    modules.add(a.asname or a.name)
        elif isinstance(node, ast.Import):
            modules.update(a.asname or a.name for a in node.names if a.name.startswith("memgraph"))
    found += [f"{n.value.id}.{n.attr}" for n in ast.walk(tree) if isinstance(n, ast.Attribute)
              and isinstance(n.value, ast.Name) and n.value.id in modules
              and n.attr.startswith("_") and not n.attr.startswith("__")]
    return found


def test_no_module_uses_another_modules_private_names():
    """What one module (or a developer tool) needs of another has a public name: the package and tools/ import
    no ``_name`` of a memgraph module and read no ``module._name`` (tests may: they test the parts)."""
    tools = PACKAGE.parent / "tools"
    used = {str(p.relative_to(PACKAGE.parent)): private_touches(parsed(p))
            for p in sorted([*PACKAGE.rglob("*.py"), *tools.rglob("*.py")])}
    assert {path: names for path, names in used.items() if names} == {}


def test_the_private_name_check_catches_both_forms():
    source = ("from memgraph.measure.cpu import _per_iteration, peaks\n"
              "from memgraph.trace.record import progress\nprogress._state['log']\n")
    assert private_touches(ast.parse(source)) == ["from memgraph.measure.cpu import _per_iteration", "progress._state"]


def _readme_layout() -> str:
    """The README's layout section (from its heading to the next ``## `` heading)."""
    text = (PACKAGE.parent / "README.md").read_text()
    start = text.index("## Layout: the data flow")
    return text[start:text.index("\n## ", start + 1)]


def test_readme_layout_names_every_package_and_tool():
    """The README's layout section names each package of memgraph/ (as ``memgraph/NAME`` or ``NAME/``) and
    each developer tool in tools/; its layers are the ones this file checks."""
    layout = _readme_layout()
    packages = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))
    assert [n for n in packages if f"memgraph/{n}" not in layout and f" {n}/" not in layout] == []
    tools = sorted(p.name for p in (PACKAGE.parent / "tools").iterdir() if not p.name.startswith((".", "_")))
    assert [n for n in tools if n not in layout] == []
    assert {n for layer in LAYERS for n in layer} >= set(packages)
