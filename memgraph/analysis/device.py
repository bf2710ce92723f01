"""The cuda target's device record (``Result.device``): one typed object from the allocator's replay to the
renderers, the fit search and the validation; its JSON form is :meth:`DevicePeaks.to_dict`."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields

_NOT_IN_RECORD = ("unknowns", "reserved_after")
_BAND = ("allocated_validated_upper", "reserved_validated_upper", "steady_state_device_total_validated_upper",
         "validated_band", "margin_basis")


@dataclass
class DevicePeaks(Mapping):
    """The cuda target's device figures: the caching allocator's replay (allocator/replay.py ``device_peaks``), the
    device total, the fit, the upper ends, where the capped replay ran out, and the validated band's figures
    (validation/band.py ``add_validated_band``). ``Result.device`` holds one; :meth:`to_dict` is the JSON report's
    ``device`` record."""

    gpu: str
    gpu_name: str
    capacity_bytes: int
    allocator_options: str
    first_iteration_reserved: int
    steady_state_reserved: int
    context_bytes: int  # expected CUDA context + kernel images (an estimate, or --context-bytes)
    steady_state_device_total: int
    headroom_bytes: int  # capacity - device total (negative: does not fit)
    fits: bool
    oom_event: int | None  # first event the allocator could not serve within capacity
    segments: int
    cuda_malloc_calls: int
    # -- the upper end: every bounded unknown at its upper size (allocator/upper_bound.py) --
    steady_state_allocated: int = 0  # the expected allocated peak the upper end starts from
    allocated_upper: int = 0
    reserved_upper: int = 0  # the replay with the unknowns' slack held in a block of its own (phantom_bytes)
    unknowns_block_bytes: int = 0  # that block: the allocated slack rounded up to the segment granularity
    context_upper_bytes: int = 0
    steady_state_device_total_upper: int = 0
    fits_with_margin: bool = False  # the upper end fits too: device total upper <= capacity, and no OOM
    context_estimated: bool = True  # False: --context-bytes gave it
    context_assumption: str = ""  # "sm90, CUDA 13, lazy module loading (...)" or "given by --context-bytes"
    cuda_version: int = 0
    module_loading: str = "lazy"
    unknowns: list = field(default_factory=list)  # [{name, expected_bytes, upper_bytes, source, counter}]
    # -- where the replay capped at the card ran out (oom_event not None): the request that failed --
    oom_iteration: int | None = None
    oom_phase: str = ""
    oom_module: str = ""  # innermost module running ("" outside any module)
    oom_op: str = ""  # the ATen op whose allocation failed
    oom_request_bytes: int = 0  # the storage it asked for
    oom_allocated_bytes: int = 0  # allocated (live blocks) when it asked
    oom_reserved_bytes: int = 0  # reserved (segments) when it asked, after releasing cached blocks
    allocator_budget_bytes: int = 0  # what the caching allocator may reserve: capacity - expected context
    # reserved bytes after every event of the replay the peaks come from (uncapped if the capped one ran out):
    # the HTML timeline's reserved line (analysis/timeline.py add_reserved); not part of the JSON device record
    reserved_after: list[int] = field(default_factory=list, repr=False)
    # -- the validated error band (validation/band.py add_validated_band; None until it runs) --
    allocated_validated_upper: int | None = None
    reserved_validated_upper: int | None = None
    steady_state_device_total_validated_upper: int | None = None
    validated_band: dict | None = None  # {kind, definition, bands}
    margin_basis: str | None = None  # which upper end fits_with_margin compares

    def to_dict(self) -> dict:
        """The JSON report's ``device`` record: every figure but ``unknowns`` (the report's top level carries them)
        and ``reserved_after`` (the timeline's points do); the band's fields once add_validated_band has run."""
        return {k: copy.deepcopy(getattr(self, k)) for k in self._keys()}

    def _keys(self) -> list[str]:
        band = self.margin_basis is not None
        return [f.name for f in fields(self) if f.name not in _NOT_IN_RECORD and (band or f.name not in _BAND)]

    # Read-only Mapping access (device["fits"], device.get(...), {**device}) to the record's keys: code written
    # against the dict Result.device was before it was typed (other branches of this round) keeps working.
    def __getitem__(self, key: str):
        if key not in self._keys():
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys())

    def __len__(self) -> int:
        return len(self._keys())


__all__ = ["DevicePeaks"]
