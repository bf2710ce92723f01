"""The analysis result: plain data that every renderer (table, markdown, HTML, JSON) reads."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from memgraph.analysis.device import DevicePeaks

# 2: module rows at every path with all Totals fields; ops without graph_nodes.
# 3: top-level required_bytes, required_bytes_upper, fits, fits_with_margin, gpu, unknowns (cuda target);
#    device carries each peak's upper end and the context's assumption.
# 4: each Peak's top_tensor_groups (identical tensors of repeated layers grouped); modules_folded (identical
#    sibling layers folded); warnings (inputs the model cannot take as given); device's oom_* fields (where the
#    caching allocator runs out). Every field of 3 is kept unchanged.
# 5: required_bytes_validated_upper, margin_basis; device's *_validated_upper, validated_band, margin_basis
#    (the validated error band, validation/band.py). Every field of 4 is kept.
SCHEMA_VERSION = 5


@dataclass
class TensorRow:
    """One storage alive at a peak."""

    name: str  # parameter/input name, or the op that created it
    category: str
    module: str
    phase: str  # phase in which it was created
    iteration: int
    shape: list[int]
    dtype: str
    bytes: int
    held_past_last_use: bool  # alive at the peak although no op reads it any more


@dataclass
class TensorGroup:
    """Identical storages alive at a peak: same category, name and module up to their layer indices
    (``model.layers.*.mlp``), shape, dtype, size and phase/iteration of making (analysis/group_by.py)."""

    name: str  # the name pattern: numeric path parts replaced by ``*``
    category: str
    module: str  # the module pattern, likewise
    phase: str
    iteration: int
    shape: list[int]
    dtype: str
    bytes: int  # each
    count: int
    total_bytes: int  # count x bytes
    held_past_last_use_bytes: int  # of total_bytes, the storages alive although no later op reads them


@dataclass
class Peak:
    """A peak of allocated memory and what is alive at it."""

    bytes: int
    iteration: int
    phase: str
    module: str
    op: str
    event: int
    by_category: dict[str, int]
    held_past_last_use_bytes: int
    top_tensors: list[TensorRow]
    top_tensor_groups: list[TensorGroup] = field(default_factory=list)  # largest groups by total bytes


@dataclass
class Totals:
    """Bytes and counts of one group of storages (the whole model, a module, a modality)."""

    parameters: int = 0  # number of parameter elements
    trainable_parameters: int = 0
    parameter_bytes: int = 0
    buffer_bytes: int = 0
    gradient_bytes: int = 0  # one iteration's gradients
    optimizer_state_bytes: int = 0  # held at the end of the run
    saved_activation_bytes: int = 0  # saved for backward in the group's forward, one iteration
    peak_bytes: int = 0  # alive at the steady-state peak


@dataclass
class ModuleRow(Totals):
    """Totals of one module path (every path in the result; renderers sum them to ``--depth``)."""

    module: str = ""


@dataclass
class ModalityRow(Totals):
    """Totals of one modality group (model_spec/modality.py); the rows add up to the totals."""

    modality: str = ""


@dataclass
class TimelinePoint:
    event: int
    bytes: int
    iteration: int
    phase: str
    by_category: dict[str, int] = field(default_factory=dict)  # ``bytes`` split by category (the non-zero ones)
    reserved: int | None = None  # cuda target: the allocator replay's reserved bytes, the maximum over the bucket


@dataclass
class Result:
    schema_version: int
    model: str
    target: str  # "cuda" | "cpu"
    metric: str  # which counter the peaks predict, e.g. "torch.cuda.max_memory_allocated"
    options: dict
    batch: list[str]
    optimizer_impl: str
    parameters: int
    trainable_parameters: int
    static: dict[str, int]  # steady-state bytes of parameters, buffers, gradients, optimizer state
    first_iteration_peak: Peak
    steady_state_peak: Peak
    modules: list[ModuleRow]  # every module path; renderers sum them to --depth
    timeline: list[TimelinePoint]
    iteration_starts: list[int]  # event index where each iteration starts
    ops: dict  # {"count": int, "unknown": {op: count}}
    trace_seconds: float
    analysis_seconds: float
    versions: dict[str, str]
    notes: list[str] = field(default_factory=list)
    device: DevicePeaks | None = None  # cuda target: reserved and device-total peaks, fit (allocator/replay.py)
    modalities: list[ModalityRow] = field(default_factory=list)  # one row per modality group
    peak_modality: str = ""  # modality of the module running at the steady-state peak
    phase_peaks: list = field(default_factory=list)  # Peak of each phase of the last iteration, in order
    assumptions: list[str] = field(default_factory=list)  # the loop's defaults, resolved (model_spec/defaults.py)
    # -- for schedulers (cuda target; None / empty on the cpu target, whose prediction has no interval) --
    required_bytes: int | None = None  # expected device total (what nvidia-smi shows at the steady-state peak)
    required_bytes_upper: int | None = None  # its upper end: every bounded unknown at its upper size
    fits: bool | None = None  # required_bytes <= gpu capacity and the allocator replay never ran out
    fits_with_margin: bool | None = None  # fits, and the upper end (margin_basis says which) <= gpu capacity too
    # the device total's upper figure from the validated error band (validation/band.py); None where none exists
    required_bytes_validated_upper: int | None = None
    margin_basis: str | None = None  # which upper end fits_with_margin compares: validated band and/or unknowns
    gpu: dict | None = None  # {key, name, capacity_bytes}
    unknowns: list = field(default_factory=list)  # [{name, expected_bytes, upper_bytes, source, counter}]
    # inputs the model cannot take as given (sequence past its positions, image size its processor would not make)
    warnings: list[str] = field(default_factory=list)
    # --strategy runs: one entry per group of ranks with equal figures (api.add_rank_figures), rank 0's first:
    # {ranks, first_iteration_peak, steady_state_peak, steady_state_reserved, steady_state_device_total}
    ranks: list[dict] = field(default_factory=list)
    # --config FILE: each value taken from the user's training config, and each ignored field that could matter
    job_config: list[str] = field(default_factory=list)

    def __post_init__(self):
        # a device record given as the dict it was before it was typed (tests and other branches of this round
        # build Results that way): made the typed record, so every reader can use its fields
        if self.device is not None and not isinstance(self.device, DevicePeaks):
            self.device = DevicePeaks(**self.device)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["device"] = None if self.device is None else self.device.to_dict()
        return d
