"""Peak-memory checking for tests: numpy allocations are visible to tracemalloc."""

import tracemalloc


def peak_bytes(fn):
    """Peak traced allocation of fn() above what was allocated before, and fn's result.

    fn runs once untraced first, so one-time import work is not counted.
    """
    fn()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        result = fn()
        return tracemalloc.get_traced_memory()[1] - before, result
    finally:
        tracemalloc.stop()
