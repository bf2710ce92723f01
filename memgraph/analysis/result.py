"""The analysis result: plain data that every renderer (table, markdown, HTML, JSON) reads."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

SCHEMA_VERSION = 1


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


@dataclass
class ModuleRow:
    """Per-module totals, modules aggregated to the report depth."""

    module: str
    parameters: int  # number of parameter elements
    trainable_parameters: int
    parameter_bytes: int
    saved_activation_bytes: int  # saved for backward in the module's forward, one iteration
    peak_bytes: int  # bytes alive at the steady-state peak attributed to the module


@dataclass
class TimelinePoint:
    event: int
    bytes: int
    iteration: int
    phase: str


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
    modules: list[ModuleRow]
    timeline: list[TimelinePoint]
    iteration_starts: list[int]  # event index where each iteration starts
    ops: dict  # {"count": int, "graph_nodes": int, "unknown": {op: count}}
    trace_seconds: float
    analysis_seconds: float
    versions: dict[str, str]
    notes: list[str] = field(default_factory=list)
    device: dict | None = None  # cuda target: reserved and device-total peaks, fit (analysis/device.py)
    modalities: list = field(default_factory=list)  # ModalityRow per modality group (analysis/modality_table.py)
    peak_modality: str = ""  # modality of the module running at the steady-state peak
    phase_peaks: list = field(default_factory=list)  # Peak of each phase of the last iteration, in order

    def to_dict(self) -> dict:
        return asdict(self)
