"""What a config reader produces: options for :class:`TrainingOptions`, and the lines that say where each came from."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path

from memgraph.errors import MemgraphError


@dataclass
class JobConfig:
    format: str = ""
    path: str = ""
    model: str | None = None  # the model the file names (a Hub id, a folder, a zoo name)
    model_key: str = ""  # the field that named it
    options: dict = field(default_factory=dict)  # TrainingOptions field -> value
    taken: list[str] = field(default_factory=list)  # "micro_batch_size 2 -> --batch-size 2"
    ignored: list[str] = field(default_factory=list)  # "torch_compile true: not modelled (...)"

    def take(self, key: str, value, option: str, to, note: str = "") -> None:
        """The file's ``key`` = ``value`` sets the TrainingOptions field ``option`` to ``to``."""
        self.options[option] = to
        flag = _flag(option)
        shown = "" if isinstance(to, bool) and to else f" {_text(to)}"
        if isinstance(to, bool) and not to:
            shown = " off"
        self.taken.append(f"{key} {_text(value)} -> {flag}{shown}" + (f" ({note})" if note else ""))

    def ignore(self, key: str, value, why: str) -> None:
        self.ignored.append(f"{key} {_text(value)}: {why}")

    def untake(self, options: tuple[str, ...], key: str, value, why: str) -> None:
        """The file's ``options`` taken earlier are dropped (the options the command line adds make them
        unmodelled): their lines go, and ``key`` = ``value`` is listed as ignored for ``why``."""
        sets = tuple(f"-> {_flag(o)} " for o in options)  # a taken line: "key value -> --flag[ value][ (note)]"
        self.taken = [t for t in self.taken if not any(f in t + " " for f in sets)]
        for o in options:
            self.options.pop(o, None)
        self.ignore(key, value, why)

    def lines(self) -> list[str]:
        """The report's ``config:`` lines."""
        head = f"{self.path} read as {self.format}"
        out = [head]
        if self.model:
            out.append(f"{self.model_key} {self.model} -> the model")
        out += self.taken
        out += [f"ignored: {i}" for i in self.ignored]
        return out


def _flag(option: str) -> str:
    from memgraph.model_spec.options import TrainingOptions, flag_of

    for f in fields(TrainingOptions):
        if f.name == option:
            return flag_of(f).name
    return f"--{option.replace('_', '-')}"


def _text(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_text(v) for v in value) + "]"
    return str(value)


def has_option(name: str) -> bool:
    """Whether this memgraph's TrainingOptions has the field ``name`` (e.g. ``deepspeed``, which another part adds)."""
    from memgraph.model_spec.options import TrainingOptions

    return any(f.name == name for f in fields(TrainingOptions))


def load_document(file: Path) -> tuple[dict, str]:
    """The config file as a mapping (JSON, or YAML with PyYAML's safe loader), and its text."""
    if not file.is_file():
        raise MemgraphError(f"--config {str(file)!r} not found: pass an existing training config file")
    try:
        text = file.read_text()
    except (UnicodeDecodeError, OSError) as e:
        raise MemgraphError(f"--config {str(file)!r} cannot be read as text ({e})") from None
    if file.suffix.lower() == ".json":
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise MemgraphError(f"--config {str(file)!r} is not valid JSON ({e})") from None
    else:
        import yaml

        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError as e:
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise MemgraphError(f"--config {str(file)!r} is not valid YAML ({first})") from None
    if not isinstance(doc, dict):
        raise MemgraphError(f"--config {str(file)!r} is not a mapping of settings: pass a training config file")
    return doc, text


def positive(doc: dict, key: str, where: str):
    """``doc[key]`` if it is a positive integer, None if absent or null; otherwise a one-line error."""
    value = doc.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise MemgraphError(f"--config {where}: {key} {value!r} is not a positive integer: fix the file")
    return value
