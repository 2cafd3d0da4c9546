"""The front door's rules: which method fits the data within the time budget, and how the time
is shared between the search and the final fit.

The rules (measured in docs/auto.md, on training data only):

1. **Exact kernel ridge / LS-SVM** (one Cholesky of the n x n kernel matrix) when the matrix
   fits in ``max_memory`` and its predicted cost, n^3 / 3 + 2 n^2 d flops at the rate this
   machine showed on a GEMM probe (or at SLOWEST_RATE, without a probe, where that suffices:
   :func:`exact_flop_rate`), is at most ``EXACT_SHARE`` of the budget. With the bandwidth
   and ridge of the leave-one-out search this is the best least-squares kernel model there is;
   nothing approximate beats it where it is affordable.
2. Otherwise **stagewise regression on random features** (paper 5, Algorithm 3, calibrated
   updates): it is anytime (each stage adds a block of features to a model that is usable after
   every stage), so the budget decides its capacity, which therefore grows with the time given
   and, at equal time per row, with n. ``SEARCH_SHARE`` of the budget goes to the search, the
   rest to the stages; a held-out slice of the training rows (``holdout_rows``) picks the number
   of stages to keep.
"""

from __future__ import annotations

import math
import time

import numpy as np

__all__ = ["ALPHA_GROWTH", "BANDWIDTH_GROWTH", "EXACT_SHARE", "SEARCH_SHARE", "decision_threshold", "exact_flop_rate", "exact_seconds", "flop_rate", "holdout_rows", "single_precision_suffices", "smallest_ridge", "stages_to_keep", "use_exact"]

#: the exact solver is chosen when its predicted cost is at most this share of the budget
EXACT_SHARE = 0.4
#: the largest n for the exact solver whatever the budget (8 n^2 bytes: 3.2 GB at 20000)
EXACT_MAX_ROWS = 20000
#: the exact solver's ridge on n rows is the search's ridge on m rows times (n / m) ** this
ALPHA_GROWTH = 0.5
#: the final model's bandwidth on n rows is the search's on m rows times (m / n) ** this (0: as
#: the search found it; benchmarks/studies/auto_rules.py, part bandwidth)
BANDWIDTH_GROWTH = 0.0
#: share of the budget the search may use before a stagewise fit (the bandwidth is flat near its
#: optimum: benchmarks/studies/least_squares.md)
SEARCH_SHARE = 0.1
#: held-out rows that choose the number of stages: this fraction of n, at most HOLDOUT_MAX
HOLDOUT_FRACTION = 0.1
HOLDOUT_MAX = 2000
#: a classifier's exact fit runs in single precision when its ridge is at least this many times
#: the smallest single precision allows (:func:`single_precision_suffices`)
SINGLE_PRECISION_MARGIN = 100.0


#: floating-point operations per second any machine the library runs on reaches at least
SLOWEST_RATE = 1e9


def exact_flop_rate(n, d, time_budget, dtype=np.float64, budget=None):
    """The flop rate the exact rule and the search's deadline use: SLOWEST_RATE when the exact fit
    is affordable even at that rate (small n: no probe), else :func:`flop_rate`'s probe."""
    if exact_seconds(n, d, SLOWEST_RATE) <= EXACT_SHARE * time_budget:
        return SLOWEST_RATE
    return flop_rate(dtype, budget)


def flop_rate(dtype=np.float64, budget=None, size=512):
    """Floating-point operations per second of one GEMM of ``size`` (smaller where its three
    matrices would take more than half of ``budget`` bytes) on this machine: the faster of two
    runs after a first that starts the threads, measured once per process, dtype and size (the
    machine does not change between fits; a probe takes tens of ms, a few percent of a small
    fit)."""
    if budget is not None:
        size = max(16, min(size, math.isqrt(int(budget) // (6 * np.dtype(dtype).itemsize))))
    key = (np.dtype(dtype).str, size)
    if key not in _RATES:
        rng = np.random.default_rng(0)
        A, B = rng.random((2, size, size)).astype(dtype)
        A @ B
        seconds = np.inf
        for _ in range(2):
            start = time.perf_counter()
            A @ B
            seconds = min(seconds, time.perf_counter() - start)
        _RATES[key] = 2.0 * size**3 / max(seconds, 1e-6)
    return _RATES[key]


_RATES = {}  # flop_rate's measurements, by dtype and size


def exact_seconds(n, d, flops):
    """Predicted seconds of an exact fit on n rows of d features: the kernel matrix and one
    Cholesky factorisation with its solves (LAPACK runs them at about half the GEMM rate)."""
    return (2.0 * n * n * d + 2.0 * (n**3 / 3.0 + 2.0 * n * n)) / flops


def use_exact(n, d, exact_bytes, time_budget, flops, memory_budget):
    """Rule 1 of the module docstring; ``exact_bytes``: what the exact fit allocates (the n x n
    kernel matrix and its right-hand sides, :func:`kernelscale.lssvm.memory.lssvm_fit_memory`)."""
    return (n <= EXACT_MAX_ROWS and exact_bytes <= memory_budget
            and exact_seconds(n, d, flops) <= EXACT_SHARE * time_budget)


def stages_to_keep(losses, best_rows, last_rows):
    """How many stages to keep, from the held-out loss after each (``losses[t]`` the mean loss
    after t + 1 stages; ``best_rows`` and ``last_rows`` the per-row losses of the best and of the
    last stage on the same held-out rows): all of them unless the last is worse than the best by
    more than two standard errors of their paired difference, in which case the best one.
    Stagewise fits on large data keep improving, and picking the minimum of a noisy curve that
    is still falling would cut them short; on noisy data (adult) they overfit after a few stages.
    The two stages are scored on the same rows, so their difference is far less noisy than
    either loss: only the rows where they disagree count."""
    if not len(losses):
        return 0
    best = int(np.argmin(losses))
    diff = np.asarray(last_rows, dtype=np.float64) - np.asarray(best_rows, dtype=np.float64)
    error = np.std(diff) / np.sqrt(max(diff.size, 1))
    return best + 1 if np.mean(diff) > 2 * error else len(losses)


def decision_threshold(decision, positive):
    """The threshold t of a two-class model (the second class where its decision value exceeds t)
    that rows the model did not fit support: ``decision`` (m,) their decision values (leave-one-
    out or held out), ``positive`` (m,) whether each is of the second class.

    Platt's scaling (Platt 1999): P(second class | f) = 1 / (1 + exp(-(a f + b))) fitted by
    maximum likelihood to the rows, with Platt's targets (N+ + 1) / (N+ + 2) and 1 / (N- + 2) in
    place of 1 and 0 (so that the fit exists when the values separate the classes); t = -b / a is
    where that probability is 1/2. It is kept only when it is more than two standard errors (the
    delta method on the fit's inverse Hessian) from 0, else 0: a least-squares fit of 0/1 codes
    shrinks towards the class frequencies, so that on imbalanced classes the rare one needs a
    threshold below 0, and on balanced ones a threshold fitted to noise costs errors. The rows
    are those that also chose the model (its stages, or the search's winner), so the fit is a
    little optimistic; on the exact route they are the search's m rows and its ridge, while the
    final model has n rows and a ridge grown by (n / m)^ALPHA_GROWTH, which shrinks a little
    less: the cut is then, if anything, a little too far from 0."""
    f = np.asarray(decision, dtype=np.float64)
    positive = np.asarray(positive, dtype=bool)
    n_pos = int(positive.sum())
    n_neg = positive.size - n_pos
    if n_pos == 0 or n_neg == 0 or not np.all(np.isfinite(f)) or np.ptp(f) == 0:
        return 0.0
    with np.errstate(all="ignore"):
        try:
            t, variance = _platt_cut(f, positive, n_pos, n_neg)
        except np.linalg.LinAlgError:
            return 0.0
    return t if np.isfinite(t) and np.isfinite(variance) and t * t > 4.0 * variance else 0.0


def _platt_cut(f, positive, n_pos, n_neg):
    """(t, variance of t) of :func:`decision_threshold`'s Platt fit; t is NaN where a <= 0 (values
    that do not order the classes: nothing to calibrate)."""
    target = np.where(positive, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))
    design = np.column_stack([f, np.ones_like(f)])
    theta = np.array([1.0 / max(float(np.std(f)), np.finfo(float).tiny), math.log((n_pos + 1.0) / (n_neg + 1.0))])

    def loss(th):
        z = design @ th
        return float(np.sum(np.logaddexp(0.0, z) - target * z))

    def hessian_at(th):
        p = 0.5 * (1.0 + np.tanh(0.5 * (design @ th)))  # the logistic function, overflow-free
        return p, design.T @ (design * (p * (1.0 - p))[:, None])

    current = loss(theta)
    for _ in range(100):  # Newton's method with step halving on the convex log loss
        p, hessian = hessian_at(theta)
        step = np.linalg.solve(hessian + 1e-12 * np.trace(hessian) * np.eye(2), design.T @ (p - target))
        for _ in range(30):
            trial = loss(theta - step)
            if trial <= current:
                break
            step = step / 2.0
        else:
            break  # no step lowers the loss: the minimum, up to rounding
        theta, current = theta - step, trial
        if np.max(np.abs(step)) <= 1e-10 * (1.0 + np.max(np.abs(theta))):
            break
    a, b = theta
    if not a > 0:
        return float("nan"), float("nan")
    gradient = np.array([b / a**2, -1.0 / a])  # of t = -b / a
    return float(-b / a), float(gradient @ np.linalg.solve(hessian_at(theta)[1], gradient))


def smallest_ridge(n, dtype, kernel_mean=1.0):
    """The smallest ridge an exact solve on n rows gets in ``dtype``: the largest eigenvalue of K
    is about n times its mean entry, and below a few times that over the unit roundoff's inverse,
    K + alpha I need not factorise in that precision."""
    return 10.0 * n * kernel_mean * float(np.finfo(dtype).eps)


def single_precision_suffices(n, alpha, kernel_mean=1.0):
    """Whether an exact solve on n rows with ridge ``alpha`` is accurate in single precision: its
    relative error, about the condition number n kernel_mean / alpha times float32's unit
    roundoff, is then at most 1 / (10 SINGLE_PRECISION_MARGIN) (1e-3), far below what moves a
    class decision."""
    return alpha >= SINGLE_PRECISION_MARGIN * smallest_ridge(n, np.float32, kernel_mean)


def holdout_rows(n):
    """Rows held out to choose the number of stages of a stagewise fit on n rows."""
    return int(min(HOLDOUT_MAX, HOLDOUT_FRACTION * n))
