"""Memory the prediction cannot pin down exactly, each bounded: the upper end of a prediction.

A :class:`BoundedUnknown` is one mechanism whose bytes depend on something memgraph cannot see on
the CPU (which cuDNN algorithm the heuristics pick, the CUDA context size of the exact driver and
architecture, ...). ``expected_bytes`` is what the prediction already counts; ``upper_bytes`` is the
most the mechanism can take, from its source. A prediction's upper end adds, for every unknown,
``upper_bytes - expected_bytes`` to the expected device total, and the report names each one.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BoundedUnknown:
    name: str  # what it is, in a user's words, e.g. "cuDNN convolution workspace (backward-filter)"
    expected_bytes: int  # already in the expected prediction
    upper_bytes: int  # the most it can be; >= expected_bytes
    source: str  # where the bound comes from (file/function/document, with version)
    counter: str = "allocated"  # the first counter it adds to: "allocated" (so also reserved and total) or "total"

    def __post_init__(self):
        if self.upper_bytes < self.expected_bytes or self.expected_bytes < 0:
            raise ValueError(f"bounded unknown {self.name!r}: need 0 <= expected <= upper, "
                             f"got {self.expected_bytes} and {self.upper_bytes}")

    @property
    def slack_bytes(self) -> int:
        """What the upper end adds beyond the expected value."""
        return self.upper_bytes - self.expected_bytes
