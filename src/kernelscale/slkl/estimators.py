"""SLKL: stochastic low-rank kernel learning for regression (paper 1, ALGORITHMS.md section 1).

For M candidate columns c_m = K[:, m] / sqrt(k(x_m, x_m)) (sampled uniformly without
replacement), SLKL learns the conical combination K(mu) = sum_m mu_m c_m c_m^T = C D C^T by
minimising (eq. 14)

    F(mu) = y^T (I + K(mu) / lam)^-1 y + nu sum(mu),   mu >= 0,

(the estimators' ``alpha`` is the paper's ridge lam, ``sparsity`` its nu; the functions below
keep the paper's symbols)

one randomly chosen coordinate at a time (Algorithms 1-2). The state at mu is the active set,
C (n x m0), G = (D^-1 + C^T C / lam)^-1 (kernelscale.slkl.woodbury) and u = (lam I + K(mu))^-1 y.
A visited coordinate costs O(n) for a = c_m^T u; if mu_m = 0 and lam a^2 <= nu it stays 0
(ALGORITHMS.md's skip rule, exact for both step rules); otherwise O(n m0) for
b = c_m^T (lam I + K(mu))^-1 c_m, the step, and the updates of u and G.

Along a coordinate F is known in closed form: F(mu + t e_m) - F(mu) = -lam a^2 t / (1 + t b) + nu t.
``update="exact"`` takes its minimiser mu_m + (sqrt(lam a^2 / nu) - 1) / b clipped at 0 and never
raises F. ``update="newton"`` is the paper's projected Newton step (eq. 19) with the curvature
2 lam a^2 b of Prop. 2 (Algorithm 2 prints it without the 2). A clipped Newton step that lowers
a weight can raise F (the quadratic model is no upper bound for negative steps, despite
Theorem 1a); such a step is detected in closed form and replaced by the exact step, and counted.

Gram solver (``columns="gram"``, what ``"auto"`` picks when it fits). Every quantity of a visit
is an inner product of candidate columns with y or with each other, so with the M x M Gram
matrix Q = C^T C and r = C^T y (one BLAS-3 pass over kernel row blocks, each candidate column
computed once and shared by all outputs) and v = G r_A over the active set A:

    a_m = r_m / lam - Q[m, A] v / lam^2,     b_m = Q_mm / lam - z^T G z / lam^2  (z = Q[A, m]),
    F = y^T y - r_A^T v / lam + nu sum(mu).

The iterates are the same as with the columns (same coordinates, steps and G updates), but a
skipped visit costs O(m0) and a full one O(m0^2) instead of O(n) and O(n m0), at a one-off cost
of O(n M (M + d)) and O(M^2) memory. This departs from the cost analysis of the paper (Sec. 4.2),
whose open problem (the cost of visits that leave a weight at zero) it removes. With numba
installed the visits of an epoch run compiled (kernelscale.slkl.loop: the same iterates up to
rounding; so does the refresh of G from scratch after each epoch for up to 64 active columns,
LAPACK beyond; the objective and the callback stay in Python between epochs): on 30
one-vs-rest problems of 4000 points the fit went from 1.6 s to 0.65 s, on wine (3 classes) from
45 ms to 12 ms; the compiled refresh took the 435 one-vs-one pairs of 30 classes on 3000
points from 1.70 s to 1.01 s (benchmarks/bench_slkl_defaults.py, part "multiclass").
``trace=True`` runs the Python loop.

The learned model is kernel ridge regression with the kernel k_mu(x, x') =
sum_m mu_m k(x, x_m) k(x_m, x') / k(x_m, x_m); its prediction simplifies (eqs. 16-17) to
f(x) = sum_{m active} mu_m a_m k(x_m, x) / sqrt(k(x_m, x_m)).

Threads: the coordinate loops of a fit run on one BLAS thread (2.8x faster with
columns="precompute" on 2 cores). The limit is process-wide: while a fit runs, BLAS calls of other
threads of the process run on one thread as well; the thread count is restored when the last of
overlapping fits ends. With several outputs (classes) the Gram solver's compiled loops run side by
side on as many threads as the BLAS would have used (``threadpoolctl.threadpool_limits(1)`` runs
them in turn), each output with its own seed, so the model does not depend on the thread count
(with a BLAS whose products do not depend on it either, as OpenBLAS's): 30 classes of 4000
points (the robustness suite's split) fitted in 1.1 s instead of 1.8 s on 2 cores (medians of 5).
A callback or verbose output runs them in turn; extra threads stay within ``max_memory``.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, MultiOutputMixin, RegressorMixin, _fit_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ..base.device import DeviceMixin
from ..base.params import DEVICE_CONSTRAINT
from ..base.classifier import (
    OneVsRestScoresMixin, check_class_memory, class_pairs, encode_classes, one_hot,
    one_vs_one_scores_in_blocks, one_vs_rest_from_one_hot, one_vs_rest_targets,
)
from ..base.monitor import IterationMonitor, problem_callbacks
from ..base.estimator import (
    FiniteR2Mixin, INPUT_ATTRIBUTES, commit_fit, fit_weights, positive_counts, target_means, positive_rows,
    resolve_kernel, validate_fit_data,
)
from ..base.validation import check_finite_result, validate_data
from ..kernels import KERNEL_NAMES, Kernel
from ..ops.kernel import KernelOperator
from ..ops.lapack_threads import blas_threads, one_blas_thread
from ..ops.memory import format_bytes, parse_memory
from ..ops.rows import SPLIT_EVERY, DaskRows, is_dask
from . import loop as _slkl_loop
from .loop import exact_step, newton_step, step_change
from .woodbury import woodbury_append, woodbury_direct_gram, woodbury_remove, woodbury_rescale

__all__ = [
    "SLKLRegressor",
    "SLKLClassifier",
    "slkl",
    "slkl_gram",
    "gram_of_columns",
    "SLKLResult",
    "ArrayColumns",
    "KernelColumns",
    "exact_step",
    "newton_step",
    "step_change",
]

logger = logging.getLogger("kernelscale")

UPDATES = ("exact", "newton")
COLUMN_MODES = ("auto", "gram", "precompute", "on_the_fly")
DEFAULT_EPOCHS = 500  # max_iter=None means DEFAULT_EPOCHS * M coordinate visits


# ----------------------------------------------------------------------------------------------
# candidate columns


class ArrayColumns:
    """Candidate columns held in memory: ``C`` of shape (n, M) (stored transposed, row m = c_m).

    Any float dtype is stored as given; ``column`` returns the float64 copy the solver uses.
    """

    def __init__(self, C=None, *, rows=None):
        self.rows = np.ascontiguousarray(np.asarray(C).T if rows is None else rows)
        self.n_candidates, self.n_samples = self.rows.shape
        self.sqnorms = np.einsum("ij,ij->i", self.rows, self.rows, dtype=np.float64)

    def column(self, j):
        return self.rows[j].astype(np.float64)

    nbytes = property(lambda self: self.rows.nbytes)


class KernelColumns:
    """Candidate columns computed on demand from the kernel (``columns="on_the_fly"``).

    c_m = sqrt(w) * K(X, x_m) / sqrt(k(x_m, x_m)) for the candidate rows ``candidates`` of the
    operator's X; ``sqrt_w`` carries sample weights (None for unit weights). Costs O(n d) per
    call, with no re-validation of X.
    """

    def __init__(self, operator, candidates, sqrt_w=None):
        self.operator, self.candidates = operator, np.asarray(candidates)
        self.n_samples, self.n_candidates = operator.n, self.candidates.size
        self.scale = _candidate_scale(operator.kernel, operator.X[self.candidates])
        self.sqrt_w = sqrt_w
        self._buf = np.empty((1, operator.n), dtype=operator.dtype)
        self.sqnorms = None  # computed per column in ``column``
        self.nbytes = operator.prepared_bytes + self._buf.nbytes

    def column(self, j):
        row = self.operator.rows(self.candidates[j:j + 1], out=self._buf)
        c = row[0].astype(np.float64)
        c *= self.scale[j]
        if self.sqrt_w is not None:
            c *= self.sqrt_w
        return c

    def materialise(self):
        """All M columns as an :class:`ArrayColumns` (``columns="precompute"``), in X's dtype."""
        rows = self.operator.rows(self.candidates)
        rows *= self.scale[:, None].astype(rows.dtype)
        if self.sqrt_w is not None:
            rows *= self.sqrt_w[None, :].astype(rows.dtype)
        return ArrayColumns(rows=rows)

    def gram(self, Y, budget=None):
        """Q = C^T C and R = C^T Y, in float64 row blocks (see :func:`gram_of_columns`)."""
        return self.operator.column_gram(self.candidates, Y, scale=self.scale, weights=self.sqrt_w, budget=budget)


# ----------------------------------------------------------------------------------------------
# the solver state


class _State:
    """Active columns (rows of ``Ct``, grown by doubling), G, mu and u = (lam I + K(mu))^-1 y."""

    def __init__(self, y, n_candidates, lam, budget=None, reserved=0):
        self.y = y
        self.n = y.size
        self.lam = lam
        self.mu = np.zeros(n_candidates)
        self.slot = -np.ones(n_candidates, dtype=np.intp)  # candidate -> slot in Ct, -1 if inactive
        self.order = []  # slot -> candidate
        self.Ct = np.empty((0, self.n))
        self.G = np.zeros((0, 0))
        self.u = y / lam
        self.budget, self.reserved = budget, reserved

    @property
    def m0(self):
        return len(self.order)

    def _grow(self):
        cap = min(max(8, (3 * self.Ct.shape[0]) // 2), self.mu.size)
        if self.budget is not None:
            need = self.reserved + cap * self.n * 8 + 3 * cap * cap * 8
            if need > self.budget:
                raise ValueError(
                    f"SLKL needs {format_bytes(need)} to hold {cap} active columns of length {self.n}, "
                    f"more than max_memory={format_bytes(self.budget)}; increase max_memory, increase "
                    f"sparsity (fewer active columns) or lower n_components."
                )
        Ct = np.empty((cap, self.n))
        Ct[: self.m0] = self.Ct[: self.m0]
        self.Ct = Ct

    def kinv(self, c, Gz):
        """(lam I + K(mu))^-1 c from Gz = G C^T c (eq. 22), O(n m0)."""
        w = c / self.lam
        if self.m0:
            w -= (self.Ct[: self.m0].T @ Gz) / self.lam**2
        return w

    def curvature(self, c, cc):
        """b = c^T (lam I + K(mu))^-1 c with z = C^T c and Gz = G z, O(n m0)."""
        if self.m0 == 0:
            return cc / self.lam, np.zeros(0)
        z = self.Ct[: self.m0] @ c
        Gz = self.G @ z
        return cc / self.lam - float(z @ Gz) / self.lam**2, Gz

    def apply(self, j, c, a, b, Gz, mu_new):
        """Move mu_j to mu_new: update u (Sherman-Morrison) and G by the cases (25)-(27)."""
        mu_old = self.mu[j]
        t = mu_new - mu_old
        w = self.kinv(c, Gz)
        self.u -= (t * a / (1.0 + t * b)) * w
        p = self.slot[j]
        if p >= 0 and mu_new > 0:
            woodbury_rescale(self.G, p, mu_old, mu_new)
        elif p >= 0:
            self.G = woodbury_remove(self.G, p)
            last = self.m0 - 1
            moved = self.order[last]
            self.Ct[p] = self.Ct[last]
            self.order[p] = moved
            self.slot[moved] = p
            self.order.pop()
            self.slot[j] = -1
        else:
            self.G = woodbury_append(self.G, Gz, b, mu_new, self.lam)
            if self.m0 == self.Ct.shape[0]:
                self._grow()
            self.Ct[self.m0] = c
            self.slot[j] = self.m0
            self.order.append(j)
        self.mu[j] = mu_new

    def load(self, columns, mu):
        """Set the state at ``mu`` from scratch (warm start)."""
        for j in np.flatnonzero(mu > 0):
            if self.m0 == self.Ct.shape[0]:
                self._grow()
            self.Ct[self.m0] = columns.column(j)
            self.slot[j] = self.m0
            self.order.append(int(j))
        self.mu[:] = np.where(mu > 0, mu, 0.0)
        self.refresh()

    def refresh(self):
        """Recompute G (eq. 23) and u from scratch: bounds the drift of the rank-one updates.
        O(n m0^2 + m0^3), done once every M visits, so O(n m0) amortised per visit."""
        m0 = self.m0
        if m0 == 0:
            self.G, self.v = np.zeros((0, 0)), np.zeros(0)
            self.u = self.y / self.lam
            return
        C = self.Ct[:m0]
        self.G, self.v = woodbury_direct_gram(C @ C.T, self.mu[self.order], self.lam, rhs=C @ self.y, overwrite=True)
        self.u = self.y / self.lam - (C.T @ self.v) / self.lam**2

    def objective(self, nu):
        return float(self.lam * (self.y @ self.u) + nu * self.mu.sum())


@dataclass
class SLKLResult:
    """Output of :func:`slkl` for one target vector."""

    mu: np.ndarray  # (M,) weights over the candidates
    a: np.ndarray  # (M,) c_m^T u at the final state (0 where mu_m = 0)
    u: np.ndarray | None  # (n,) (lam I + K(mu))^-1 y (None from slkl_gram)
    objective: float
    objective_history: np.ndarray  # F at the start and every M visits
    n_iter: int  # coordinate visits
    converged: bool
    n_skipped: int  # visits decided by the skip rule (b not computed)
    n_newton_fallbacks: int  # raw Newton steps that would have raised F
    stopped_by_callback: bool = False
    trace: list = field(default_factory=list)  # F after every visit (trace=True only)


def _as_columns(columns):
    if isinstance(columns, (ArrayColumns, KernelColumns)):
        return columns
    C = np.asarray(columns)
    if C.ndim != 2:
        raise ValueError(f"columns must be an (n, M) array or a column source, got shape {C.shape}.")
    return ArrayColumns(C)


def slkl(columns, y, *, lam=1.0, nu=0.01, update="exact", tol=1e-4, max_iter=None, random_state=None,
         mu0=None, refresh=True, skip=True, trace=False, max_memory=None, reserved_bytes=0, monitor=None,
         gram=False):
    """Minimise F(mu) of eq. 14 by stochastic coordinate descent (Algorithm 2).

    Parameters
    ----------
    columns : array (n, M) of candidate columns c_m, or ArrayColumns / KernelColumns
    y : array (n,)
    lam, nu : float > 0
    update : "exact" (minimiser along the coordinate) or "newton" (eq. 19, safeguarded)
    tol : stop when F(mu^{k-M}) - F(mu^k) < tol F(mu^{k-M}), checked every M visits
    max_iter : maximum number of coordinate visits (None: 500 M)
    random_state : coordinates are drawn uniformly with replacement from it
    mu0 : starting weights (M,), default 0
    refresh : recompute G and u from scratch every M visits (bounds round-off drift)
    skip : use the O(n) skip rule (switch off only to test that it changes nothing)
    trace : record F after every visit in ``result.trace`` (tests)
    max_memory, reserved_bytes : budget for the active columns and G (None: unchecked)
    monitor : an IterationMonitor, updated every M visits
    gram : run :func:`slkl_gram` on Q = C^T C and r = C^T y instead (same iterates; O(m0^2) per
        visit instead of O(n m0)); ``result.u`` is then computed at the end from the columns

    Returns
    -------
    SLKLResult
    """
    cols = _as_columns(columns)
    y = np.asarray(y, dtype=np.float64).ravel()
    if y.size != cols.n_samples:
        raise ValueError(f"y has {y.size} entries but the columns have length {cols.n_samples}.")
    if gram:
        Q, R = gram_of_columns(cols, y, max_memory)
        res = slkl_gram(Q, R[:, 0], y @ y, lam=lam, nu=nu, update=update, tol=tol, max_iter=max_iter,
                        random_state=random_state, mu0=mu0, refresh=refresh, skip=skip, trace=trace,
                        monitor=monitor)
        on = np.flatnonzero(res.mu > 0)
        _, v = _gram_state(Q, R[:, 0], res.mu, on, on.size, lam)
        res.u = y / lam
        for i, j in enumerate(on):
            res.u -= (v[i] / lam**2) * cols.column(j)
        return res
    if update not in UPDATES:
        raise ValueError(f"update must be one of {UPDATES}, got {update!r}.")
    M = cols.n_candidates
    max_iter = DEFAULT_EPOCHS * M if max_iter is None else int(max_iter)
    rng = check_random_state(random_state)
    budget = None if max_memory is None else parse_memory(max_memory)
    st = _State(y, M, lam, budget, reserved_bytes)
    if mu0 is not None:
        st.load(cols, np.asarray(mu0, dtype=np.float64))
    sqnorms = cols.sqnorms
    F = st.objective(nu)
    history = [F]
    tr = [F] if trace else []
    n_skipped = n_fallbacks = k = 0
    converged = stopped = False
    step = exact_step if update == "exact" else newton_step
    lam_ = float(lam)
    while k < max_iter and not converged:
        F_epoch = F
        for j in rng.randint(0, M, size=min(M, max_iter - k)):
            k += 1
            p = st.slot[j]
            c = st.Ct[p].copy() if p >= 0 else cols.column(j)
            a = float(c @ st.u)
            lam_a2 = lam_ * a * a
            mu_old = float(st.mu[j])
            if skip and p < 0 and lam_a2 <= nu:
                n_skipped += 1
                if trace:
                    tr.append(F)
                continue
            cc = float(sqnorms[j]) if sqnorms is not None else float(c @ c)
            b, Gz = _curvature(st, c, cc)
            mu_new = step(mu_old, lam_a2, b, nu)
            if update == "newton" and step_change(mu_new - mu_old, lam_a2, b, nu) > 0.0:
                n_fallbacks += 1
                mu_new = exact_step(mu_old, lam_a2, b, nu)
            t = mu_new - mu_old
            if t != 0.0:
                F += step_change(t, lam_a2, b, nu)
                st.apply(j, c, a, b, Gz, mu_new)
            if trace:
                tr.append(F)
        if refresh:
            st.refresh()
        F = st.objective(nu)
        history.append(F)
        converged = F_epoch - F <= tol * F_epoch  # (F = 0 for a target of zeros: at once)
        if monitor is not None and monitor.update(objective=F, n_active=st.m0):
            stopped = True
            break
    st.refresh()
    a = np.zeros(M)
    if st.m0:
        # a_A = v / (lam mu_A) with v = G C_A^T y from the direct solve (see _gram_state), not C_A^T u:
        # the dual coefficients mu_A a_A = v / lam without cancellation
        a[st.order] = st.v / (lam * st.mu[st.order])
    return SLKLResult(mu=st.mu.copy(), a=a, u=st.u.copy(), objective=st.objective(nu),
                      objective_history=np.asarray(history), n_iter=k, converged=converged, n_skipped=n_skipped,
                      n_newton_fallbacks=n_fallbacks, stopped_by_callback=stopped, trace=tr)


def _curvature(state, c, cc):
    """b = c^T (lam I + K(mu))^-1 c (and G C^T c); the O(n m0) part of a visit (module-level so
    tests can count its calls)."""
    return state.curvature(c, cc)


# ----------------------------------------------------------------------------------------------
# the Gram solver


def gram_of_columns(columns, Y, max_memory=None):
    """Q = C^T C (M, M) and R = C^T Y (M, k) in float64 (BLAS-3), for the Gram solver.

    ``columns``: an (n, M) array, ArrayColumns or KernelColumns. KernelColumns are evaluated in
    kernel row blocks of the training points against the candidates, so C is never held whole
    and every candidate column is computed once, for all outputs. Memory O(M^2 + M k) besides
    the blocks, which fit ``max_memory`` (default: the columns' own budget).
    """
    cols = _as_columns(columns)
    Y = np.asarray(Y, dtype=np.float64)
    Y2 = Y.reshape(Y.shape[0], -1)
    if Y2.shape[0] != cols.n_samples:
        raise ValueError(f"Y has {Y2.shape[0]} rows but the columns have length {cols.n_samples}.")
    if isinstance(cols, ArrayColumns):
        rows = cols.rows.astype(np.float64, copy=False)  # (M, n)
        return rows @ rows.T, rows @ Y2
    return cols.gram(Y2, None if max_memory is None else parse_memory(max_memory))


def _gram_state(Q, r, mu, act, m0, lam):
    """G (eq. 23) and v = G r_A over the active slots act[:m0], from scratch. O(m0^3).

    v = lam mu_A a_A are the dual coefficients of the active columns (G^-1 v = r_A gives
    r_A / lam - Q_AA v / lam^2 = D^-1 v / lam), solved directly from the Cholesky factor."""
    A = act[:m0]
    return woodbury_direct_gram(Q[np.ix_(A, A)], mu[A], lam, rhs=r[A], overwrite=True)


def slkl_gram(Q, r, yy, *, lam=1.0, nu=0.01, update="exact", tol=1e-4, max_iter=None, random_state=None,
              mu0=None, refresh=True, skip=True, trace=False, monitor=None):
    """Algorithm 2 on the Gram quantities Q = C^T C (M, M), r = C^T y (M,) and yy = y^T y.

    The same iterates as :func:`slkl` on the columns (same coordinate draws from
    ``random_state``, same steps and G updates), with a_m = r_m / lam - Q[m, A] G r_A / lam^2 and
    b_m = Q_mm / lam - Q[m, A] G Q[A, m] / lam^2: a visit the skip rule settles costs O(m0), any
    other O(m0^2). Parameters as for :func:`slkl`; ``result.u`` is None (it needs the columns).
    """
    Q = np.asarray(Q, dtype=np.float64)
    r = np.asarray(r, dtype=np.float64).ravel()
    M = r.size
    if Q.shape != (M, M):
        raise ValueError(f"Q must be ({M}, {M}) to match r, got {Q.shape}.")
    if update not in UPDATES:
        raise ValueError(f"update must be one of {UPDATES}, got {update!r}.")
    max_iter = DEFAULT_EPOCHS * M if max_iter is None else int(max_iter)
    rng = check_random_state(random_state)
    lam, nu, yy = float(lam), float(nu), float(yy)
    inv_lam, inv_lam2 = 1.0 / lam, 1.0 / lam**2
    qdiag = np.ascontiguousarray(np.diag(Q))
    mu = np.zeros(M)
    slot = -np.ones(M, dtype=np.intp)  # candidate -> active slot, -1 if inactive
    act = np.empty(M, dtype=np.intp)  # slot -> candidate
    m0 = 0
    if mu0 is not None:
        mu0 = np.asarray(mu0, dtype=np.float64).ravel()
        on = np.flatnonzero(mu0 > 0)
        m0 = on.size
        mu[on], act[:m0], slot[on] = mu0[on], on, np.arange(m0)
    G, v = _gram_state(Q, r, mu, act, m0, lam)
    A, rA = act[:m0], r[act[:m0]]
    F = yy - float(rA @ v) * inv_lam + nu * mu.sum()
    history = [F]
    tr = [F] if trace else []
    n_skipped = n_fallbacks = k = 0
    converged = stopped = False
    step = exact_step if update == "exact" else newton_step
    newton = update == "newton"
    empty = np.zeros(0)
    epoch = None if trace else _slkl_loop.compiled_epoch()  # one epoch of visits, compiled
    compiled_refresh = None if epoch is None else (_slkl_loop.compiled_refresh() or _slkl_loop._refresh)
    if epoch is not None:
        Q = np.ascontiguousarray(Q)
        G_buf, v_buf = np.zeros((M, M)), np.zeros(M)  # G and v in their leading m0 x m0 and m0 entries
        G_buf[:m0, :m0], v_buf[:m0] = G, v
    while k < max_iter and not converged:
        F_epoch = F
        draws = rng.randint(0, M, size=min(M, max_iter - k))
        if epoch is not None:
            m0, skipped, fallbacks = epoch(Q, r, qdiag, mu, slot, act, m0, G_buf, v_buf, draws, lam, nu,
                                           newton, skip)
            n_skipped, n_fallbacks, k = n_skipped + skipped, n_fallbacks + fallbacks, k + draws.size
            A, rA = act[:m0], r[act[:m0]]
            G, v = G_buf[:m0, :m0], v_buf[:m0]
        else:
            for j in draws.tolist():
                k += 1
                p = slot[j]
                mu_old = mu[j]
                if p >= 0:
                    # active: a = v_p / (lam mu) and b = (mu - G_pp) / mu^2 follow from G^-1 = D^-1 + Q_AA / lam
                    # without the cancellation of r_m / lam - Q[m, A] v / lam^2, whose error grows with |Q|;
                    # the Q form of b is kept where mu Q_mm / lam < 1 (there the G form cancels instead)
                    a = v[p] * inv_lam / mu_old
                    lam_a2 = lam * a * a
                    Gz = None
                    if mu_old * qdiag[j] * inv_lam > 1.0:
                        b = (mu_old - G[p, p]) / (mu_old * mu_old)
                    else:
                        z = Q[j].take(A)
                        Gz = G @ z
                        b = qdiag[j] * inv_lam - float(z @ Gz) * inv_lam2
                else:
                    if m0:
                        z = Q[j].take(A)  # Q[A, j] = C_A^T c_j
                        a = r[j] * inv_lam - float(z @ v) * inv_lam2
                    else:
                        a = r[j] * inv_lam
                    lam_a2 = lam * a * a
                    if skip and lam_a2 <= nu:
                        n_skipped += 1
                        if trace:
                            tr.append(F)
                        continue
                    if m0:
                        Gz = G @ z
                        b = qdiag[j] * inv_lam - float(z @ Gz) * inv_lam2
                    else:
                        Gz, b = empty, qdiag[j] * inv_lam
                mu_new = step(mu_old, lam_a2, b, nu)
                if newton and step_change(mu_new - mu_old, lam_a2, b, nu) > 0.0:
                    n_fallbacks += 1
                    mu_new = exact_step(mu_old, lam_a2, b, nu)
                t = mu_new - mu_old
                if t != 0.0:
                    F += step_change(t, lam_a2, b, nu)
                    if p >= 0 and mu_new > 0:  # eq. 25; v = G r_A follows the same rank-one change
                        g = G[:, p].copy()
                        delta = 1.0 / mu_new - 1.0 / mu_old
                        woodbury_rescale(G, p, mu_old, mu_new)
                        v -= (delta * float(g @ rA) / (1.0 + delta * g[p])) * g
                    else:
                        if p >= 0:  # eq. 26, swap-with-last
                            G = woodbury_remove(G, p)
                            m0 -= 1
                            moved = act[m0]
                            act[p], slot[moved], slot[j] = moved, p, -1
                        else:  # eq. 27
                            G = woodbury_append(G, Gz, b, mu_new, lam)
                            act[m0], slot[j] = j, m0
                            m0 += 1
                        A, rA = act[:m0], r[act[:m0]]
                        v = G @ rA
                    mu[j] = mu_new
                if trace:
                    tr.append(F)
        if refresh:
            if epoch is not None and m0 <= _slkl_loop.REFRESH_COMPILED_MAX:
                if not compiled_refresh(Q, r, mu, act, m0, lam, G_buf, v_buf):
                    raise np.linalg.LinAlgError(
                        "the Woodbury matrix I + S C^T C S / lam is not finite or not positive definite")
                G, v = G_buf[:m0, :m0], v_buf[:m0]
            else:
                G, v = _gram_state(Q, r, mu, act, m0, lam)
                if epoch is not None:
                    G_buf[:m0, :m0], v_buf[:m0] = G, v
        F = yy - float(rA @ v) * inv_lam + nu * mu.sum()
        history.append(F)
        converged = F_epoch - F <= tol * F_epoch  # (F = 0 for a target of zeros: at once)
        if monitor is not None and monitor.update(objective=F, n_active=m0):
            stopped = True
            break
    if not refresh:  # a refresh made G and v from the final weights already
        G = v = None
        G, v = _gram_state(Q, r, mu, act, m0, lam)
    a = np.zeros(M)
    a[A] = v * inv_lam / mu[A]  # so that mu_A a_A = v / lam exactly: the dual coefficients
    return SLKLResult(mu=mu, a=a, u=None, objective=yy - float(rA @ v) * inv_lam + nu * mu.sum(),
                      objective_history=np.asarray(history), n_iter=k, converged=converged, n_skipped=n_skipped,
                      n_newton_fallbacks=n_fallbacks, stopped_by_callback=stopped, trace=tr)


# ----------------------------------------------------------------------------------------------
# estimators


_PARAMS_DOC = """
    kernel : Kernel or str, default="gaussian"
        A kernelscale kernel or one of ``KERNEL_NAMES``; ``sigma="median"`` is resolved in fit
        into ``kernel_``.
    n_components : int >= 1, default=256
        M, the number of candidate columns, sampled uniformly without replacement from the
        training points (clipped to n with a warning).
    sparsity : float > 0 or "auto", default="auto"
        The paper's nu: weight of the l1 penalty nu sum(mu) of eq. 14; larger values keep
        fewer columns active. Only alpha * sparsity matters (Prop. 3). "auto" is 0.01 times the
        weighted mean square of the target, sum(w y^2) / n, per output (the regressor: of the
        target less ``intercept_``; kept in ``sparsity_``):
        the first term of eq. 14 grows like y^2 and the penalty does not, so a fixed nu makes the
        fit depend on the units of y (with nu = 0.01 and y * 1e-5 the model kept no column worth
        the penalty: normalised RMSE 1.19 against 0.31 for y * 1). For +-1 class targets without
        weights "auto" is exactly 0.01, the value of the paper's experiments, for two classes
        and for each one-vs-one pair (``SLKLClassifier``'s ``multi_class``); for k > 2 classes
        one-vs-rest it is divided by k (0.01 / k for each of the k problems).
        Chosen on held-out training data (benchmarks/bench_slkl_defaults.py): against 0.01 for
        every class, validation error 3.3 -> 2.1% on digits, 5.8 -> 5.1% on USPS, 8.5 -> 7.9%
        on 12000 MNIST digits and 23.7 -> 20.6% on 30 classes (at about 3x its fit time there),
        the same on three classes (all at alpha 1; the classifier's alpha of 0.1 since makes
        its product alpha * nu ten times smaller than the paper's).
    alpha : float > 0, default=1.0 (SLKLClassifier: 0.1)
        The ridge, the paper's lambda in (lambda I + K(mu))^-1 of eq. 14; larger values
        regularise more. The classifier's +-1 targets take 0.1, chosen on held-out training
        data (benchmarks/bench_slkl_defaults.py, part "alpha"): as good as 1.0 or better on
        all ten classification sets, e.g. USPS 5.05 -> 4.72% validation error, 30 classes
        20.6 -> 20.1%.
    update : "exact" or "newton", default="exact"
        Exact minimiser along the coordinate, or the paper's Newton step (eq. 19), safeguarded:
        a Newton step that would raise F is replaced by the exact step and counted in
        ``n_newton_fallbacks_``.
    tol : float > 0, default=1e-4
        Stop when F(mu^{k-M}) - F(mu^k) <= tol F(mu^{k-M}) (checked every M visits).
    max_iter : int or None, default=None
        Maximum coordinate visits per output (None: 500 M); ConvergenceWarning if reached.
    columns : "auto", "gram", "precompute" or "on_the_fly", default="auto"
        "gram": compute Q = C^T C and C^T y once (BLAS-3 over kernel row blocks, memory O(M^2))
        and run the visits on them, O(m0) per skipped visit and O(m0^2) per other visit (same
        iterates as the column modes; see the module docstring). "precompute": keep all M
        columns (memory n M) and pay O(n) / O(n m0) per visit as in the paper (Sec. 4.2).
        "on_the_fly": recompute a visited column from the kernel and keep only the active ones
        (memory O(n m0 + m0^2), O(n d) extra work per visit). "auto" takes "gram" when its
        state fits in half of ``max_memory``, else "precompute" when the M columns take at most
        a quarter of it, else "on_the_fly". The mode used is ``columns_used_``. On a dask X
        chunked by rows, "auto" and "gram" fit over the chunks: the M candidate rows are gathered
        and one pass sums each chunk's share of C^T W C, C^T W y and y^T W y (README, "Dask");
        the other modes gather X.
    max_memory : int, str or None, default=None
        Budget for the columns, the active set and kernel blocks (half the available memory
        if None); fit fails at once, naming what to change, when it cannot fit.
    device : None, "auto", "cpu", "cuda" or "cuda:N", default=None
        Where kernel and feature blocks are computed (README, "GPUs"): None is numpy on the host
        (a torch tensor as input selects its device); the others need torch.
    warm_start : bool, default=False
        Reuse the previous candidates and weights ``mu_`` when the training set has the same
        size, n_components and number of outputs (the classifier: the same classes and the same
        ``multi_class_``).
    random_state : int, RandomState or None
        Seeds the candidate sample, the coordinate choice and the median heuristic.
    verbose : int, default=0
        1 shows a progress bar with F, updated every M visits.
    callback : callable or None
        Called every M visits with a dict (iteration, objective, n_active, problem); returning
        True stops the current output's problem."""

_ATTR_DOC = """
    kernel_ : Kernel
        The kernel used (bandwidth resolved).
    sparsity_ : float or ndarray (n_outputs,)
        The nu used (``sparsity`` resolved; one per output for a 2-d y or several classes).
    candidates_ : ndarray (M,)
        Indices of the candidate training points.
    mu_ : ndarray (M,) or (M, n_outputs)
        Weights over the candidates.
    active_ : ndarray
        Indices of the training points whose weight is positive (for some output).
    n_active_ : int
        m0, the size of ``active_``.
    X_fit_ : ndarray (m0, d)
        The active training points, all that predict needs.
    dual_coef_ : ndarray (m0,) or (m0, n_outputs)
        mu_m a_m / sqrt(k(x_m, x_m)), so that f(x) = K(x, X_fit_) @ dual_coef_.
    objective_history_ : ndarray or list of ndarray
        F at the start and every M visits (one array per output when there are several).
    n_iter_ : int
        Coordinate visits (maximum over outputs).
    n_skipped_ : int
        Visits settled by the O(n) skip rule (mu_m = 0 and lam a^2 <= nu), summed over outputs.
    columns_used_ : str
        The ``columns`` mode "auto" resolved to ("gram", "precompute" or "on_the_fly").
    n_newton_fallbacks_ : int
        With update="newton": raw Newton steps that would have raised F, replaced by the exact
        step (0 for update="exact")."""


class _SLKLBase(DeviceMixin, BaseEstimator):
    #: "auto" sparsity shared out over the outputs (the one-vs-rest problems of several classes)
    _AUTO_SPARSITY_PER_CLASS = False
    _parameter_constraints: dict = {
        "kernel": [Kernel, StrOptions(set(KERNEL_NAMES))],
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "sparsity": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
        "alpha": [Interval(Real, 0, None, closed="neither")],
        "update": [StrOptions(set(UPDATES))],
        "tol": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 1, None, closed="left"), None],
        "columns": [StrOptions(set(COLUMN_MODES))],
        "max_memory": [Interval(Real, 0, None, closed="neither"), str, None],
        "device": DEVICE_CONSTRAINT,
        "warm_start": ["boolean"],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "callback": [callable, None],
    }

    #: a dask y is passed in float64, as numpy's fit converts it (kernelscale.dask.fit)
    _float64_targets = True
    #: the configurations that fit over dask row chunks (for kernelscale.dask.dispatch's messages)
    _chunked_configuration = "columns='auto' or columns='gram'"

    def _fits_over_chunks(self):
        """A dask X is fitted over its row chunks (kernelscale.dask.fit) with the Gram solver: one
        pass of per-chunk sums C^T W C, C^T W y and y^T W y (one-vs-one: per class); the coordinate
        descent runs on these M x M quantities here. The other column modes hold n-sized columns:
        they gather X. The sums are taken per chunk and added up a tree, not over numpy's row
        blocks: the model differs from numpy's by rounding (measured: 2e-10 relative in float64
        at alpha 1; the classifier's +-1 systems at its default alpha 0.1 can amplify it to
        1e-7-5e-6 relative on small problems)."""
        return self.columns in ("auto", "gram")

    def _solve_outputs(self, solve_one, k, threads=1):
        """One SLKL problem per output column j (eq. 14 for the j-th target); ``solve_one(j, monitor)``,
        on up to ``threads`` threads (in turn with a callback or verbose output, whose order is kept)."""
        callbacks = problem_callbacks(self.callback, k)

        def run(j):
            with IterationMonitor(self.verbose, callbacks[j], desc=f"SLKL output {j}" if k > 1 else "SLKL") as mon:
                return solve_one(j, mon)

        if threads <= 1 or self.callback is not None or self.verbose:
            return [run(j) for j in range(k)]
        # an error (or an interrupt of the caller) stops the outputs not yet started, and the
        # running ones at their next epoch: their monitors ask to stop
        failed = threading.Event()

        def run_threaded(j):
            if failed.is_set():
                return None
            try:
                with IterationMonitor(0, lambda info: failed.is_set()) as mon:
                    return solve_one(j, mon)
            except BaseException:
                failed.set()
                raise

        contexts = [contextvars.copy_context() for _ in range(k)]  # the caller's np.errstate in each task
        pool = ThreadPoolExecutor(threads)
        try:
            return list(pool.map(lambda j: contexts[j].run(run_threaded, j), range(k)))
        except BaseException:
            failed.set()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    #: every attribute a fit may set (a refit deletes those it does not set again)
    _FITTED = ("kernel_", "sparsity_", "columns_used_", "_n_fit", "candidates_", "active_", "n_active_", "X_fit_",
               "objective_history_", "n_iter_", "n_skipped_", "n_newton_fallbacks_", "mu_", "dual_coef_",
               "classes_", *INPUT_ATTRIBUTES)

    def _solve(self, X, Y, sample_weight, fitted, warm_start=True, squeeze=False, pairs=None):
        """Fit the columns of Y (n, k) as k problems over shared candidates and commit ``fitted``
        plus the fitted state in one step (``mu_`` and ``dual_coef_`` 1-d with ``squeeze``);
        ``warm_start=False`` ignores the previous weights. With ``pairs`` (p, 2) of class codes,
        Y is one-hot and the problems are the p one-vs-one ones, +1 for a pair's first class and
        -1 for its second on their rows only, solved on the Gram solver from per-class sums."""
        n_all, k = Y.shape[0], (Y.shape[1] if pairs is None else len(pairs))
        if not 1e-150 <= float(self.alpha) <= 1e150:  # the coordinate steps divide by alpha**2
            raise ValueError(f"alpha={self.alpha!r} is outside the range of SLKL's arithmetic (alpha**2 must be a "
                             f"finite, normal float); pass 1e-150 <= alpha <= 1e150.")
        distributed = is_dask(X)
        if distributed:  # the rows of positive weight stay in their chunks: counted, not gathered
            counts = positive_counts(X, sample_weight)
            n = int(counts[:, 0].sum())
        else:
            keep = np.flatnonzero(sample_weight > 0)
            Xk, Yk, wk = X[keep], Y[keep], sample_weight[keep]
            n = keep.size
        if n == 0:
            raise ValueError("sample_weight has no positive entry; pass at least one positive weight.")
        rng = check_random_state(self.random_state)
        kernel = resolve_kernel(self.kernel, X, rng, sample_weight) if distributed else resolve_kernel(
            self.kernel, Xk, rng, wk)
        M = int(self.n_components)  # True passes the Integral constraint; numpy's choice() refuses it
        if M > n:
            warnings.warn(f"n_components={M} > n_samples={n} (with positive weight); using n_components={n}.",
                          UserWarning, stacklevel=3)
            M = n
        prev_mu = getattr(self, "mu_", None)
        warm = (self.warm_start and warm_start and prev_mu is not None and getattr(self, "_n_fit", None) == n_all
                and prev_mu.reshape(prev_mu.shape[0], -1).shape == (M, k)
                and (sample_weight is None or np.all(_take(sample_weight, self.candidates_) > 0)))
        if warm:
            mu0 = prev_mu.reshape(M, k)
            if distributed:
                candidates, Zc = self.candidates_, _take(X, self.candidates_)
            else:
                cand = np.searchsorted(keep, self.candidates_)
        else:
            cand = rng.choice(n, M, replace=False)
            mu0 = None
            if distributed:  # the M candidate rows, gathered in the order of the draw
                order = np.argsort(cand)
                rows, _, index = positive_rows(X, sample_weight, cand[order], counts)
                Zc, candidates = np.empty_like(rows), np.empty_like(index)
                Zc[order], candidates[order] = rows, index
        if not distributed:
            candidates, Zc = keep[cand], Xk[cand]
        budget = parse_memory(self.max_memory)
        item = X.dtype.itemsize
        precomputed_bytes = M * n * item
        # the Gram solver holds Q (M x M), R (M x k), and G with its temporaries (<= 3 m0^2, m0 <= M: the
        # compiled visits keep G in an M x M buffer and update it in place; a refresh turns its copy of
        # Q_AA into the new G in place; the Python loop's updates make one new G at a time)
        gram_bytes = 8 * (4 * M * M + 2 * M * k)
        mode = self.columns
        if pairs is not None:  # the Gram solver, its columns mode and memory checked by the caller
            gram_bytes, mode = _ovo_gram_bytes(M, Y.shape[1], _partial_sums(distributed)), "gram"
        if mode == "auto":
            if 2 * gram_bytes <= budget or distributed:
                mode = "gram"
            else:
                mode = "precompute" if 4 * precomputed_bytes <= budget else "on_the_fly"
        if mode == "gram" and gram_bytes > budget:
            raise ValueError(
                f"columns='gram' needs {format_bytes(gram_bytes)} for the {M} x {M} Gram matrix of the candidates "
                f"and its solver state, more than max_memory={format_bytes(budget)}; "
                + ("lower n_components or increase max_memory (over dask chunks only the Gram solver runs "
                   "without gathering X)." if distributed else
                   "use columns='on_the_fly', lower n_components or increase max_memory.")
            )
        if mode == "precompute" and precomputed_bytes > budget:
            raise ValueError(
                f"columns='precompute' needs {format_bytes(precomputed_bytes)} for {M} columns of length "
                f"{n}, more than max_memory={format_bytes(budget)}; use columns='on_the_fly', lower "
                f"n_components or increase max_memory."
            )
        scale = _candidate_scale(kernel, Zc)
        if pairs is not None:  # one pass over the rows (chunks): per class C^T W C, C^T w, sum(w), rows
            gram_kw = dict(kernel=kernel, points=Zc, scale=scale, budget=budget)
            Qs, R, yy, counts = (
                DaskRows(X.chunks[0], budget).sum(_class_gram_chunk, X, Y, sample_weight, **gram_kw) if distributed
                else _class_gram_chunk(Xk, Yk, None if np.all(wk == 1.0) else wk, **gram_kw))
            first, second = pairs[:, 0], pairs[:, 1]
            R, yy, rows = R[:, first] - R[:, second], yy[first] + yy[second], counts[first] + counts[second]
        elif distributed:  # one pass over the row chunks: Q, R, y^T W y and the non-zero targets
            Q, R, yy, nonzero = DaskRows(X.chunks[0], budget).sum(
                _gram_chunk, X, Y, sample_weight, kernel=kernel, points=Zc, scale=scale, budget=budget)
        else:
            unit = np.all(wk == 1.0)
            sqrt_w = None if unit else np.sqrt(wk)
            source = KernelColumns(KernelOperator(kernel, Xk, budget), cand, sqrt_w)
            Yw = Yk if unit else Yk * sqrt_w[:, None]
            with np.errstate(over="ignore", under="ignore"):
                yy = np.einsum("ij,ij->j", Yw, Yw)
            nonzero = np.any(Yw != 0, axis=0)
            if mode == "gram":
                # one BLAS-3 pass over kernel row blocks (all BLAS threads), shared by the k outputs
                Q, R = gram_of_columns(source, Yw, budget)
        if pairs is None:
            nu = _resolve_sparsity(self.sparsity, yy, n, nonzero,
                                   shared=yy.size if self._AUTO_SPARSITY_PER_CLASS else 1)
        else:  # each pair's mean over its own rows
            nu = _resolve_sparsity(self.sparsity, yy, np.maximum(rows, 1), rows > 0)
        kw = dict(lam=self.alpha, update=self.update, tol=self.tol, max_iter=self.max_iter)
        # one seed per output: the draws of output j do not depend on the others, so the outputs
        # may run in any order, on any number of threads, with the same result
        seeds = rng.randint(np.iinfo(np.int32).max, size=k) if k > 1 else None

        def state(j):
            return rng if seeds is None else np.random.RandomState(seeds[j])

        threads = 1
        if mode == "gram":
            if _slkl_loop.compiled_epoch() is not None:
                # the outputs' compiled coordinate loops (without the GIL) side by side; each thread
                # beyond the first holds another G state with its refresh (3 M^2 floats, as counted in
                # gram_bytes for the first), within the budget left beside gram_bytes
                # (a pair's Q_a + Q_b adds M^2 more)
                threads = max(1, min(k, blas_threads(),
                                     1 + (budget - gram_bytes) // ((24 if pairs is None else 32) * M * M)))

            def solve_one(j, mon):
                Qj = Q if pairs is None else Qs[first[j]] + Qs[second[j]]
                return slkl_gram(Qj, R[:, j], yy[j], nu=nu[j], mu0=None if mu0 is None else mu0[:, j], monitor=mon,
                                 random_state=state(j), **kw)
        else:
            if mode == "precompute":
                source = source.materialise()
            reserved = source.nbytes + 4 * n * 8

            def solve_one(j, mon):
                res = slkl(source, Yw[:, j], nu=nu[j], mu0=None if mu0 is None else mu0[:, j], max_memory=budget,
                           reserved_bytes=reserved, monitor=mon, random_state=state(j), **kw)
                res.u = None  # n floats per output that the estimator does not use
                return res
        # each visit is a few small matrix-vector products, which a multithreaded BLAS slows down:
        # run the coordinate loops on one thread (2 cores, SLKLClassifier(n_components=1000),
        # medians: columns="precompute" 23.4 s with it, 65.5 s without on 20000 x 100; the Gram
        # solver within noise on idle cores, up to 10x slower without on busy ones)
        with one_blas_thread():
            try:
                results = self._solve_outputs(solve_one, k, threads)
            except (ValueError, np.linalg.LinAlgError) as err:  # scipy's check_finite, a failed factorization
                if not (isinstance(err, np.linalg.LinAlgError) or "infs or NaNs" in str(err)):
                    raise
                raise ValueError(_OVERFLOW) from err
        if not all(r.converged or r.stopped_by_callback for r in results):
            warnings.warn(
                f"{type(self).__name__} did not reach tol={self.tol:g} in max_iter="
                f"{max(r.n_iter for r in results)} coordinate visits; increase max_iter or tol.",
                ConvergenceWarning, stacklevel=3)
        mu = np.stack([r.mu for r in results], axis=1)
        a = np.stack([r.a for r in results], axis=1)
        on = np.flatnonzero(np.any(mu > 0, axis=1))
        coef = (mu[on] * a[on]) * scale[on, None]
        if not np.all(np.isfinite(coef)):
            raise ValueError(_OVERFLOW)
        coef = np.ascontiguousarray(coef, dtype=X.dtype)
        hist = [r.objective_history for r in results]
        fitted.update(
            kernel_=kernel,
            sparsity_=float(nu[0]) if squeeze else nu,
            columns_used_=mode,
            _n_fit=n_all,
            candidates_=candidates,
            active_=candidates[on],
            n_active_=int(on.size),
            X_fit_=np.ascontiguousarray(Zc[on]),
            objective_history_=hist[0] if k == 1 else hist,
            n_iter_=int(max(r.n_iter for r in results)),
            n_skipped_=int(sum(r.n_skipped for r in results)),
            n_newton_fallbacks_=int(sum(r.n_newton_fallbacks for r in results)),
            mu_=mu[:, 0] if squeeze else mu,
            dual_coef_=coef[:, 0] if squeeze else coef,
        )
        return commit_fit(self, fitted, stale=self._FITTED)

    def _scores(self, X):
        check_is_fitted(self)
        return self._decision_values(validate_data(self, X, dtype=[np.float64, np.float32], reset=False))

    def _decision_values(self, X):
        """K(X, X_fit_) @ dual_coef_ for a validated X: one column per output (or pair)."""
        coef = self.dual_coef_[:, None] if self.dual_coef_.ndim == 1 else self.dual_coef_
        if self.n_active_ == 0:
            return np.zeros((X.shape[0], coef.shape[1]), dtype=np.result_type(X.dtype, coef.dtype))
        scores = KernelOperator(self.kernel_, self.X_fit_, self.max_memory).predict(X, coef)
        return check_finite_result(scores, "decision values" if hasattr(self, "classes_") else "predictions")


_OVERFLOW = ("SLKL produced non-finite weights: its arithmetic overflowed or lost all precision on the values of X, "
             "y and sample_weight (e.g. y * sqrt(sample_weight) or their squares beyond the float range); rescale X "
             "or y, scale sample_weight towards 1, or increase alpha or sparsity.")


def _class_bytes(n, M, k):
    """float64 bytes of the arrays with one column per output: the targets (with their weighted
    copies), C^T Y of the Gram solver and the weights, steps and coefficients of the M candidates."""
    return 8 * k * (3 * n + 6 * M)


def _partial_sums(distributed):
    """How many per-class Gram sums a one-vs-one fit may hold at once: one, or on dask row chunks
    a node of the tree reduction's SPLIT_EVERY chunk sums, its result and a chunk in progress."""
    return SPLIT_EVERY + 2 if distributed else 1


def _ovo_gram_bytes(M, k, partial_sums=1):
    """The one-vs-one Gram solver's bytes: the per-class M x M Gram matrices (``partial_sums``
    copies of them: a distributed fit's tree adds up to SPLIT_EVERY chunks' at once), C^T W per
    class and pair and the solver state of one pair (Q_a + Q_b, G and their temporaries)."""
    return 8 * (partial_sums * k * M * M + 4 * M * M + M * (k + k * (k - 1) // 2))


def _ovo_bytes(n, M, k, partial_sums=1):
    """All a one-vs-one fit holds beside X and its kernel blocks: the one-hot targets (with the
    copy of the rows of positive weight), the Gram solver's state of :func:`_ovo_gram_bytes` and
    the weights, steps and coefficients of the M candidates for every pair."""
    return 16 * n * k + _ovo_gram_bytes(M, k, partial_sums) + 8 * 5 * M * (k * (k - 1) // 2)


def _resolve_sparsity(sparsity, yy, n, nonzero, shared=1):
    """nu per output: the number given, or "auto" = 0.01 * mean(w y^2) / shared of each weighted
    target column Yw = sqrt(w) y (0.01 / shared for a zero target), from yy = sum(Yw^2) over the
    n rows of positive weight (one n per output for one-vs-one pairs) and ``nonzero`` (whether Yw
    has a non-zero entry); ``shared``: the number of one-vs-rest problems of a classifier with
    more than two classes, else 1."""
    with np.errstate(over="ignore", under="ignore"):
        mean_square = yy / n
    if not np.all(np.isfinite(mean_square)):
        raise ValueError(_OVERFLOW)  # y^2 beyond the float range: so is the objective of eq. 14
    if sparsity != "auto":
        return np.full(np.shape(yy)[0], float(sparsity))
    if np.any((mean_square == 0) & np.asarray(nonzero, dtype=bool)):
        raise ValueError(_OVERFLOW)  # y^2 below the float range
    return np.where(mean_square > 0, _AUTO_SPARSITY * mean_square, _AUTO_SPARSITY) / shared


_AUTO_SPARSITY = 0.01


def _candidate_scale(kernel, Z):
    """1 / sqrt(k(z, z)) for the candidate rows Z (0 where the diagonal is 0)."""
    diag = np.asarray(kernel.diag(Z), dtype=np.float64)
    return np.where(diag > 0, 1.0 / np.sqrt(np.where(diag > 0, diag, 1.0)), 0.0)


def _take(a, index):
    """The rows ``index`` of a (numpy, or a dask array: only those rows are computed)."""
    return a[index].compute() if is_dask(a) else a[index]


def _gram_chunk(X, Y, w, *, kernel, points, scale, budget):
    """One row chunk's share of the Gram solver's sums (a distributed fit): C^T C, C^T Yw, Yw^T Yw
    per output and whether Yw has a non-zero entry, with Yw = sqrt(w) Y and the chunk's candidate
    columns C = sqrt(w) K(X, points) scale (eq. 6)."""
    sqrt_w = None if w is None else np.sqrt(w)
    Yw = Y if w is None else Y * sqrt_w[:, None]
    Q, R = KernelOperator(kernel, X, budget).column_gram(None, Yw, scale=scale, weights=sqrt_w, budget=budget,
                                                         points=points)
    with np.errstate(over="ignore", under="ignore"):
        yy = np.einsum("ij,ij->j", Yw, Yw)
    return Q, R, yy, np.any(Yw != 0, axis=0).astype(np.float64)


def _class_gram_chunk(X, Y, w, *, kernel, points, scale, budget):
    """The one-vs-one Gram quantities of some rows (a row chunk of a distributed fit), from their
    one-hot classes Y (n, k) and weights w (None for ones): per class c, C_c^T C_c (k, M, M) and
    C_c^T sqrt(w_c) (M, k) with C_c = sqrt(w_c) K(X_c, points) scale, sum(w_c) and the number of
    rows of positive weight. A pair (a, b) is then Q_a + Q_b, r_a - r_b, sum(w_a) + sum(w_b)."""
    member = np.asarray(Y) > 0
    M, k = points.shape[0], member.shape[1]
    Qs, R, wsum, counts = np.zeros((k, M, M)), np.zeros((M, k)), np.zeros(k), np.zeros(k)
    for c in range(k):
        rows = np.flatnonzero(member[:, c])
        if rows.size == 0:
            continue
        sqrt_w = None if w is None else np.sqrt(np.asarray(w[rows], dtype=np.float64))
        target = np.ones((rows.size, 1)) if sqrt_w is None else sqrt_w[:, None]
        Xc = X[rows]
        Qs[c], R[:, c:c + 1] = KernelOperator(kernel, Xc, budget).column_gram(
            None, target, scale=scale, weights=sqrt_w, budget=budget, points=points,
            fixed_bytes=Qs.nbytes + R.nbytes + Xc.nbytes)
        wsum[c] = rows.size if w is None else float(np.sum(w[rows], dtype=np.float64))
        counts[c] = rows.size if w is None else np.count_nonzero(w[rows] > 0)
    return Qs, R, wsum, counts


def _init_params(self, kernel, n_components, sparsity, alpha, update, tol, max_iter, columns, max_memory, device,
                 warm_start, random_state, verbose, callback):
    self.kernel = kernel
    self.n_components = n_components
    self.sparsity = sparsity
    self.alpha = alpha
    self.update = update
    self.tol = tol
    self.max_iter = max_iter
    self.columns = columns
    self.max_memory = max_memory
    self.device = device
    self.warm_start = warm_start
    self.random_state = random_state
    self.verbose = verbose
    self.callback = callback


class SLKLRegressor(MultiOutputMixin, FiniteR2Mixin, RegressorMixin, _SLKLBase):
    """Stochastic low-rank kernel learning for regression (paper 1).

    Learns a sparse conical combination of M rank-one Nystrom kernels by minimising eq. 14 with
    stochastic coordinate descent, then predicts as kernel ridge regression with that kernel.
    The paper has no intercept (``fit_intercept=False``); by default the targets are centred
    first (``intercept_``, added back by ``predict``). Each column of a 2-d y is an independent problem
    (its own weights mu) over shared candidates. ``sample_weight`` w gives the weighted
    least-squares version (rows of C and y scaled by sqrt(w)); points of zero weight are
    dropped, and candidates are drawn from the others. The solver works in float64 (the
    Woodbury downdates lose too many digits in float32); precomputed columns are stored in the
    input dtype and predictions of float32 input are float32.

    Parameters
    ----------""" + _PARAMS_DOC + """
    fit_intercept : bool, default=True
        Fit eq. 14 to the targets less their weighted mean (``intercept_``), which ``predict``
        adds back; False is the paper's model. The rank-one kernels have no constant term, so
        targets far from zero cost columns and ridge, and they set the "auto" sparsity (a
        hundredth of the targets' mean square, which a mean far from zero inflates). Validation
        RMSE on held-out parts of the training data (every other parameter at its default;
        part ``intercept`` of benchmarks/bench_slkl_defaults.py) without / with it: boston 5.16 /
        4.81, abalone 2.14 / 2.04, cadata 62300 / 60900, friedman1 1.74 / 1.66 (x 1e5),
        diabetes 53.1 / 52.8; lower or equal on every set of the study. Dask input: one more
        pass over y and the weights, for their means. A model saved before this parameter
        existed loads with fit_intercept=True but no offset (and predicts as it did).

    Attributes
    ----------""" + _ATTR_DOC + """
    intercept_ : float or ndarray (n_outputs,)
        The targets' weighted mean (0 with fit_intercept=False).
    """

    _parameter_constraints: dict = {**_SLKLBase._parameter_constraints, "fit_intercept": ["boolean"]}
    _FITTED = (*_SLKLBase._FITTED, "intercept_")

    def __init__(self, kernel="gaussian", *, n_components=256, sparsity="auto", alpha=1.0, update="exact", tol=1e-4,
                 max_iter=None, columns="auto", fit_intercept=True, max_memory=None, device=None, warm_start=False,
                 random_state=None, verbose=0, callback=None):
        _init_params(self, kernel, n_components, sparsity, alpha, update, tol, max_iter, columns, max_memory, device,
                     warm_start, random_state, verbose, callback)
        self.fit_intercept = fit_intercept

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit on X (n, d) and y (n,) or (n, k)."""
        X, y, fitted = validate_fit_data(self, X, y, dtype=[np.float64, np.float32], multi_output=True,
                                         y_numeric=True)
        sample_weight = fit_weights(sample_weight, None, X, ones=True)
        return self._fit_prepared(X, np.asarray(y, dtype=np.float64), None, sample_weight, fitted)

    def _fit_prepared(self, X, y, classes, sample_weight, fitted):
        """The fit on validated X, float64 y and weights: numpy arrays, or dask arrays with X's row
        chunks (:mod:`kernelscale.dask.fit`; weights None for ones)."""
        Y = y.reshape(y.shape[0], -1)
        offset = target_means(Y, sample_weight) if self.fit_intercept else np.zeros(Y.shape[1])
        if np.any(offset):
            Y = Y - offset
        fitted = {**fitted, "intercept_": float(offset[0]) if y.ndim == 1 else offset}
        return self._solve(X, Y, sample_weight, fitted, squeeze=y.ndim == 1)

    def predict(self, X):
        """f(x) = sum_m mu_m a_m k(x_m, x) / sqrt(k(x_m, x_m)) + ``intercept_``: shape (n,), or (n, k)
        for a 2-d y."""
        scores = self._scores(X)
        offset = np.asarray(getattr(self, "intercept_", 0.0))  # absent from models saved before it existed
        if np.any(offset):
            scores = check_finite_result(scores + offset.astype(scores.dtype), "predictions")
        return scores[:, 0] if self.dual_coef_.ndim == 1 else scores


class SLKLClassifier(OneVsRestScoresMixin, ClassifierMixin, _SLKLBase):
    """SLKL classifier: regression on +-1 targets, one problem per pair of classes or per class.

    Two classes make one problem. For more, ``multi_class`` picks one-vs-one (a problem per
    pair of classes on their rows, as LIBSVM's SVC; the default where its Gram matrices fit) or
    one-vs-all (a problem per class on all rows: the protocol of the paper's USPS and MNIST
    experiments). ``predict`` is the argmax of the class scores (the sign for two classes, the
    majority vote of the pairs for one-vs-one). No ``predict_proba``: the scores are
    least-squares regressions of +-1 labels, not probabilities (calibrate with
    ``sklearn.calibration.CalibratedClassifierCV`` if needed).

    Parameters
    ----------""" + _PARAMS_DOC + """
    multi_class : "auto", "ovo" or "ovr", default="auto"
        How more than two classes are decomposed. "ovo": k(k-1)/2 problems, one per pair of
        classes on the rows of its two classes, all over the same M candidates: one pass over
        the rows sums each class's C^T W C (M x M) and C^T w, and a pair's problem is the Gram
        solver on Q_a + Q_b and r_a - r_b; "auto" sparsity is 0.01 times the pair's mean
        weight. "ovr": k problems on all rows, "auto" sparsity 0.01 / k each. "auto" is "ovo"
        when ``columns`` is "auto" or "gram" and everything one-vs-one holds (the k Gram
        matrices, the solver's state, the per-pair weights and coefficients; on dask chunks the
        tree's partial sums of the Gram matrices) fits in half of ``max_memory``, else "ovr".
        Chosen on held-out training data (benchmarks/bench_slkl_defaults.py, part "multiclass"):
        validation error one-vs-rest -> one-vs-one 4.72 -> 3.07% on USPS, 7.83 -> 5.87% on
        12000 MNIST digits, 20.1 -> 9.1% on 30 classes, 2.08 -> 1.78% on digits, 14.3 -> 7.1% on
        iris, 0 -> 0 on wine, at up to 1.8x the fit time (30 classes 0.84 -> 1.01 s, USPS
        0.29 -> 0.51 s).
    class_weight : dict, "balanced" or None
        Multiplies each sample's weight by its class weight (in every binary problem).

    Attributes
    ----------
    classes_ : ndarray
    multi_class_ : "ovo" or "ovr"
        The decomposition used ("ovr" for two classes). With "ovo" every array with one column
        per problem (``mu_``, ``dual_coef_``, ``sparsity_``, ``objective_history_``) has one per
        pair of classes (0, 1), (0, 2), ..., (k-2, k-1), positive values meaning the first;
        ``decision_function`` gives each class its votes plus its summed pairwise decision values
        squashed into (-1/3, 1/3).""" + _ATTR_DOC + """
    """

    _parameter_constraints: dict = {
        **_SLKLBase._parameter_constraints,
        "multi_class": [StrOptions({"auto", "ovo", "ovr"})],
        "class_weight": [dict, StrOptions({"balanced"}), None],
    }
    _AUTO_SPARSITY_PER_CLASS = True
    _FITTED = (*_SLKLBase._FITTED, "multi_class_")

    def __init__(self, kernel="gaussian", *, n_components=256, sparsity="auto", alpha=0.1, update="exact", tol=1e-4,
                 max_iter=None, columns="auto", multi_class="auto", class_weight=None, max_memory=None, device=None,
                 warm_start=False, random_state=None, verbose=0, callback=None):
        _init_params(self, kernel, n_components, sparsity, alpha, update, tol, max_iter, columns, max_memory, device,
                     warm_start, random_state, verbose, callback)
        self.multi_class = multi_class
        self.class_weight = class_weight

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit on X (n, d) and class labels y."""
        X, y, fitted = validate_fit_data(self, X, y, dtype=[np.float64, np.float32])
        classes, codes = encode_classes(y)
        sample_weight = fit_weights(sample_weight, self.class_weight, X, codes, classes, ones=True)
        n, k = X.shape[0], classes.size
        # decided once: "auto" reads the memory available, which the targets then take some of
        scheme = self._scheme(k, n, distributed=False)
        if scheme == "ovo":
            self._check_ovo_memory(n, k, distributed=False)
            return self._fit_prepared(X, one_hot(codes, k), classes, sample_weight, fitted, scheme)
        check_class_memory(_class_bytes(n, min(self.n_components, n), 1 if k == 2 else k), self.max_memory, k,
                           "the one-vs-rest targets and the per-class SLKL state")
        return self._fit_prepared(X, one_vs_rest_targets(codes, k), classes, sample_weight, fitted, scheme)

    def _check_ovo_memory(self, n, k, distributed):
        """A ValueError, before anything class-sized is allocated, when one-vs-one does not fit."""
        check_class_memory(_ovo_bytes(n, min(self.n_components, n), k, _partial_sums(distributed)),
                           self.max_memory, k, f"the per-class Gram matrices and the state of the "
                           f"{k * (k - 1) // 2} one-vs-one problems (or pass multi_class='ovr')")

    def _scheme(self, n_classes, n, distributed):
        """"ovo" or "ovr": ``multi_class`` resolved for ``n_classes`` classes of n samples (a
        ValueError for one-vs-one with a column mode other than the Gram solver). "auto" takes
        one-vs-one where all it holds (:func:`_ovo_bytes`) fits in half of ``max_memory``."""
        if n_classes == 2 or self.multi_class == "ovr":
            return "ovr"
        gram_solver = self.columns in ("auto", "gram")
        if self.multi_class == "ovo":
            if not gram_solver:
                raise ValueError(
                    f"multi_class='ovo' runs on the Gram solver (got columns={self.columns!r}); use columns='auto' "
                    f"or 'gram', or multi_class='ovr'.")
            return "ovo"
        need = _ovo_bytes(n, min(self.n_components, n), n_classes, _partial_sums(distributed))
        return "ovo" if gram_solver and 2 * need <= parse_memory(self.max_memory) else "ovr"

    def _fit_prepared(self, X, Y, classes, sample_weight, fitted, scheme=None):
        """The fit on validated X, targets Y and weights: numpy arrays from :meth:`fit` with the
        ``scheme`` it chose (Y one-hot for one-vs-one, else the +-1 targets of
        :func:`one_vs_rest_targets`), or dask arrays with X's row chunks, Y one-hot, the scheme
        chosen here (:mod:`kernelscale.dask.fit`; weights None for ones)."""
        k = classes.size
        if scheme is None:
            scheme = self._scheme(k, X.shape[0], distributed=is_dask(X))
            if scheme == "ovo":
                self._check_ovo_memory(X.shape[0], k, distributed=is_dask(X))
        same_classes = (np.array_equal(getattr(self, "classes_", None), classes)  # warm start only then
                        and getattr(self, "multi_class_", "ovr") == scheme)
        fitted.update(classes_=classes, multi_class_=scheme)
        if scheme == "ovo":
            return self._solve(X, Y, sample_weight, fitted, warm_start=same_classes, pairs=class_pairs(k))
        if is_dask(Y):
            Y = DaskRows(X.chunks[0], 0).map(one_vs_rest_from_one_hot, Y, width=1 if k == 2 else k, dtype=np.float64)
        return self._solve(X, Y, sample_weight, fitted, warm_start=same_classes, squeeze=k == 2)

    def _scores(self, X):
        """One column per class (one for two classes); one-vs-one pairwise decision values become
        votes (:func:`kernelscale.base.classifier.one_vs_one_scores`), over row blocks within
        ``max_memory``."""
        if getattr(self, "multi_class_", "ovr") != "ovo":
            return super()._scores(X)
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        return one_vs_one_scores_in_blocks(self._decision_values, X, self.classes_.size, self.max_memory)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = True
        return tags
