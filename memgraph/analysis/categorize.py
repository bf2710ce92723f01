"""The categorize pass: one :class:`~memgraph.trace.record.event_log.Category` on every storage record."""

from __future__ import annotations

from memgraph.trace.record.event_log import Category, EventLog, Origin, Role, StorageRecord

ORDER = tuple(Category)

_BY_ORIGIN = {Origin.PARAMETER: Category.PARAMETER, Origin.BUFFER: Category.BUFFER, Origin.INPUT: Category.INPUT,
              Origin.WORKSPACE: Category.WORKSPACE}
# Role before saved_for_backward: autograd saves most of autocast's cast weights, and they are still the cache.
_BY_ROLE = {Role.GRADIENT: Category.GRADIENT, Role.OPTIMIZER_STATE: Category.OPTIMIZER_STATE,
            Role.AUTOCAST_CACHE: Category.AUTOCAST_CACHE}


def category_of(s: StorageRecord) -> Category:
    """The category of one storage, from where it came from and what it became."""
    by_origin = _BY_ORIGIN.get(s.origin)
    if by_origin is not None:
        return by_origin
    if s.role is not None:
        return _BY_ROLE[s.role]
    return Category.ACTIVATION if s.saved_for_backward else Category.TEMPORARY


def categorize(log: EventLog) -> None:
    """Write ``category`` on every record of ``log``."""
    for s in log.storages:
        s.category = category_of(s)
