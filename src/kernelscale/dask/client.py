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
    of its ``memory_limit``; the workers without a limit count the host's available memory once)."""
    workers = current_client().scheduler_info()["workers"].values()
    limits = [w.get("memory_limit") or 0 for w in workers]
    # workers without a limit share the host's memory: counted once
    return int(DEFAULT_MEMORY_FRACTION * (sum(limits) + (available_memory() if 0 in limits else 0)))
