"""Memory categories, one enum used from analysis to report."""

from __future__ import annotations

from enum import Enum

from ..trace.recorder import StorageRecord


class Category(str, Enum):
    PARAMETER = "parameters"
    BUFFER = "buffers"
    INPUT = "inputs"
    GRADIENT = "gradients"
    OPTIMIZER_STATE = "optimizer_state"
    AUTOCAST_CACHE = "autocast_cache"  # autocast's low-precision copies of the weights (cached_cast)
    ACTIVATION = "activations"  # saved for backward by autograd
    TEMPORARY = "temporaries"  # everything else: outputs, intermediates, backward scratch
    WORKSPACE = "workspaces"  # kernel scratch buffers and library workspaces (cuBLAS), not tensors


ORDER = tuple(Category)


def categorize(s: StorageRecord) -> Category:
    """The category of one storage, from where it came from and what it became."""
    if s.origin == "parameter":
        return Category.PARAMETER
    if s.origin == "buffer":
        return Category.BUFFER
    if s.origin == "input":
        return Category.INPUT
    if s.origin == "workspace":
        return Category.WORKSPACE
    if s.role == "gradient":
        return Category.GRADIENT
    if s.role == "optimizer_state":
        return Category.OPTIMIZER_STATE
    if s.role == "autocast_cache":  # before activations: autograd saves most of these copies
        return Category.AUTOCAST_CACHE
    if s.saved_for_backward:
        return Category.ACTIVATION
    return Category.TEMPORARY
