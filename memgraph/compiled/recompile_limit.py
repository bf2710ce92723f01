"""Dynamo's recompile limit in the traced step: which function hit it, why, and what the user can change.

Dynamo compiles a code object at most ``torch._dynamo.config.recompile_limit`` times (8, torch 2.13.0
torch/_dynamo/config.py); at the next guard failure it logs ``torch._dynamo hit config.recompile_limit (8)``, with the
function and the last guard that failed, and from then on runs that function eagerly
(torch/_dynamo/convert_frame.py, the ``exceeds_recompile_limit`` branch: ``FrameAction.RUN_ONLY``). It is not a graph
break (``counters["graph_break"]`` does not count it), so the compiled note's "N graphs, M graph breaks" alone hides
it. The trace runs the real Dynamo, so the prediction already has those calls eager, as the real run has; this module
says so in the report.

The common case: transformers' decoder layers compiled one by one (FSDP2's per-block compile, torchtune's recipe). With
the config's ``use_cache=True`` a training forward builds a ``DynamicCache`` and each layer indexes it by its
``layer_idx``, which Dynamo guards on: every layer past the eighth runs eagerly (measured, torch 2.13.0 and
transformers 5.23, a 12-layer tiny Llama under ``--compile --strategy fsdp``: 8 graphs, and 1 graph with
``use_cache=False``).
"""

from __future__ import annotations

import contextlib
import logging
import re
from dataclasses import dataclass

DYNAMO_LOGGER = "torch._dynamo.convert_frame"  # the module that logs the hit (torch 2.13.0, convert_frame.py)
HIT_PREFIX = "torch._dynamo hit config."  # the warning's format string starts so (torch 2.11.0 to 2.13.0)
REASON_CHARS = 200  # the last guard failure, with Dynamo's source comment, cut here
_INSTALLED = re.compile(r"\((?:[^()]*/)?(?:site|dist)-packages/")  # an installed file's path from its package on


@dataclass(frozen=True)
class LimitHit:
    limit_type: str  # "recompile_limit" or "accumulated_recompile_limit"
    limit: int
    function: str  # 'forward' (path:line), as Dynamo names it
    last_reason: str  # the guard that failed last, e.g. "0/7: self._modules['self_attn'].layer_idx == 7"

    def note(self, blocks: str | None = None) -> str:
        """The report's line; ``blocks`` names the blocks of a per-block compile when the function Dynamo names is
        the trace's own block forward (memgraph/compiled/eager_fallback.py)."""
        reason = self.last_reason.split("#")[0].strip()  # Dynamo appends the guard's source line as a comment
        reason = reason if len(reason) <= REASON_CHARS else reason[:REASON_CHARS] + "..."
        function = _INSTALLED.sub("(", self.function)
        if blocks and "eager_fallback.py" in function:
            function = f"the forward of {blocks}, each compiled on its own"
        line = (f"compile: Dynamo hit its {self.limit_type} ({self.limit}) on {function}; its later calls run "
                f"eagerly, in this prediction as in the real run, with eager activations and no fusion (last guard "
                f"that failed: {reason})")
        if "layer_idx" in reason or "past_key_values" in reason:
            line += ("; here each decoder layer's layer_idx indexes transformers' KV cache, which a training forward "
                     "builds when the model's config has use_cache=True: --no-kv-cache (use_cache false, as torchtune's "
                     "models have no cache) compiles one graph for every layer")
        else:
            line += f"; torch._dynamo.config.{self.limit_type} above the number of variants compiles them all"
        return line


class _Capture(logging.Filter):
    """On Dynamo's logger: each hit recorded and not printed (the report's note says it, with the user's function in
    place of the trace's own block forward); every other record passes."""

    def __init__(self):
        super().__init__()
        self.hits: list[LimitHit] = []

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        if isinstance(record.msg, str) and record.msg.startswith(HIT_PREFIX) and len(args) >= 4:
            self.hits.append(LimitHit(str(args[0]), int(args[1]), str(args[2]), str(args[3])))
            return False
        return True


@contextlib.contextmanager
def recompile_limit_hits():
    """Within: the list of :class:`LimitHit` Dynamo logged, filled as they happen (one per function, as Dynamo
    logs once and then skips the frame)."""
    capture = _Capture()
    logger = logging.getLogger(DYNAMO_LOGGER)
    logger.addFilter(capture)
    try:
        yield capture.hits
    finally:
        logger.removeFilter(capture)
