"""The distributed client, when there is one: never imports ``distributed`` itself."""

from __future__ import annotations

import sys

from ..ops.memory import DEFAULT_MEMORY_FRACTION, available_memory

__all__ = ["current_client", "cluster_budget"]


def current_client():
    """The distributed client that is dask's scheduler now, or None (never imports distributed)."""
    distributed = sys.modules.get("distributed")
    if distributed is None:
        return None
    try:
        return distributed.get_client()
    except ValueError:
        return None


def cluster_budget():
    """The memory budgets of the current client's workers added up (each: DEFAULT_MEMORY_FRACTION
    of its ``memory_limit``; the workers without a limit count the host's available memory once).
    The limits are asked of the workers (one message each): the client's copy of the scheduler's
    information may list none (distributed refreshes it in the background without them)."""
    limits = [int(limit or 0) for limit in current_client().run(_memory_limit).values()]
    # workers without a limit share the host's memory: counted once
    return int(DEFAULT_MEMORY_FRACTION * (sum(limits) + (available_memory() if 0 in limits else 0)))


def _memory_limit(dask_worker):
    return dask_worker.memory_manager.memory_limit
