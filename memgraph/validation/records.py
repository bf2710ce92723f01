"""Reading a ground-truth folder: every ``*.json`` file checked before anything is predicted.

A file that is not JSON (binary, truncated, nested too deeply), or a ``memgraph.measurement`` record that lacks
``model``, ``device``, ``options`` or ``iterations``, names an option ``TrainingOptions`` does not have, or holds
iterations that are not measurements, is one line naming the file and the field: fix or remove the file.
Files of another kind (a JSON list, a record without ``kind``) are not measurements and are passed over, as before.
"""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

from memgraph.errors import MemgraphError

KIND = "memgraph.measurement"
DEVICES = ("cpu", "cuda")
# each metric's key in a record's iterations (what 'memgraph measure' writes)
MEASURED_KEY = {"allocated": "peak_allocated", "reserved": "peak_reserved", "device_total": "device_used"}


def read_record(path: Path, root: Path) -> dict | None:
    """The measurement record in ``path``, checked; None for a JSON file of another kind."""
    name = _name(path, root)
    try:
        data = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as e:  # json.JSONDecodeError is a ValueError
        raise _refuse(name, f"is not valid JSON ({str(e)[:120]})") from None
    except RecursionError:
        raise _refuse(name, "is nested too deeply to be a measurement record") from None
    except OSError as e:
        raise _refuse(name, f"cannot be read ({e.strerror})") from None
    if not isinstance(data, dict) or data.get("kind") != KIND:
        return None
    check_record(data, name)
    return data


def check_record(data: dict, name: str) -> None:
    """Refuse the first field of a measurement record that ``validate`` cannot use."""
    for key in ("model", "device", "options", "iterations"):
        if key not in data:
            raise _refuse(name, f"has no {key!r} (a record that 'memgraph measure' wrote has it)")
    if not isinstance(data["model"], str) or not data["model"]:
        raise _refuse(name, f"field 'model' is {_shown(data['model'])}, not a model name")
    if data["device"] not in DEVICES:
        raise _refuse(name, f"field 'device' is {_shown(data['device'])}; it is one of {', '.join(DEVICES)}")
    _check_options(data["options"], name)
    _check_iterations(data["iterations"], name)


def _check_options(options, name: str) -> None:
    from memgraph.model_spec.options import TrainingOptions

    if not isinstance(options, dict):
        raise _refuse(name, f"field 'options' is {_shown(options)}, not an object of options")
    known = {f.name for f in fields(TrainingOptions)}
    unknown = next((k for k in options if k not in known), None)
    if unknown is not None:
        raise _refuse(name, f"field 'options' has {_shown(unknown)}, which is no option of this memgraph")


def _check_iterations(iterations, name: str) -> None:
    if not isinstance(iterations, list) or not iterations:
        raise _refuse(name, f"field 'iterations' is {_shown(iterations)}, not a list of measured iterations")
    for i, it in enumerate(iterations):
        if not isinstance(it, dict):
            raise _refuse(name, f"iterations[{i}] is {_shown(it)}, not an object of measured bytes")
        for key in MEASURED_KEY.values():
            value = it.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise _refuse(name, f"iterations[{i}].{key} is {_shown(value)}, not a byte count")


def _refuse(name: str, what: str) -> MemgraphError:
    return MemgraphError(f"ground-truth file {name!r} {what}: fix or remove it")


def _name(path: Path, root: Path) -> str:
    return str(path)  # under the folder as the user gave it: gt/cpu/x.json


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
