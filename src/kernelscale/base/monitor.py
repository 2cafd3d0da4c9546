"""Progress and per-iteration callbacks, shared by every iterative solver.

``verbose >= 1`` shows a tqdm progress bar with the latest objective (or error); ``callback``
receives a dict of per-iteration information after every iteration and stops the solver early by
returning True. Solvers use one :class:`IterationMonitor` as a context manager.
"""

from __future__ import annotations

import logging
import numbers

from tqdm.auto import tqdm

logger = logging.getLogger(__name__)


def check_callback(callback):
    """Return ``callback`` if it is None or callable, else raise a TypeError naming it."""
    if callback is not None and not callable(callback):
        raise TypeError(
            f"callback must be None or a function taking one dict of iteration info, got {callback!r}."
        )
    return callback


class IterationMonitor:
    """Reports iterations to a progress bar (``verbose``) and to ``callback``.

    ``update(**info)`` returns True when the callback asked to stop; the solver then breaks
    out of its loop and records ``stopped_by_callback``.
    """

    def __init__(self, verbose=0, callback=None, total=None, desc=None, show=("objective",)):
        if not isinstance(verbose, numbers.Integral) and not isinstance(verbose, bool):
            raise TypeError(f"verbose must be an integer (0 = silent, 1 = progress bar), got {verbose!r}.")
        self.callback = check_callback(callback)
        self.show = show
        self.iteration = 0
        self.stopped_by_callback = False
        self._bar = tqdm(total=total, desc=desc, leave=True) if verbose else None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def update(self, **info):
        """Record one iteration with its info (objective, error, ...); True means stop now."""
        self.iteration += 1
        info.setdefault("iteration", self.iteration)
        if self._bar is not None:
            shown = {k: f"{info[k]:.6g}" for k in self.show if isinstance(info.get(k), numbers.Real)}
            if shown:
                self._bar.set_postfix(shown, refresh=False)
            self._bar.update(1)
        if self.callback is not None and self.callback(info) is True:
            self.stopped_by_callback = True
            logger.info("stopped by callback at iteration %d", self.iteration)
            return True
        return False

    def close(self):
        if self._bar is not None:
            self._bar.refresh()  # show the final objective even if the last update was throttled
            self._bar.close()
            self._bar = None


def problem_callbacks(callback, n_problems):
    """One callback per problem of a fit that solves ``n_problems`` problems in turn (the
    classes of one-vs-rest, the columns of a multi-output y): each adds ``"problem": j`` to the
    info when there are several, and once ``callback`` has returned True the others stop at
    their first iteration without calling it again, so True stops the whole fit."""
    if callback is None:
        return [None] * n_problems
    stopped = []

    def make(j):
        def report(info):
            if stopped:
                return True
            if callback({**info, "problem": j} if n_problems > 1 else info) is True:
                stopped.append(j)
                return True
            return False

        return report

    return [make(j) for j in range(n_problems)]
