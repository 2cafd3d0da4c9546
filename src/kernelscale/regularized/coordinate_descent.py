"""Coordinate descent (non-linear Gauss-Seidel) for regularized kernel methods (paper 3, section 4).

With alpha_i = 1/k_ii, Corollary 1 gives c_i = S_i(sum_{j != i} k_ij c_j / k_ii) (eq. 13),
S_i = -J^i_{1/k_ii}. Algorithm 1 picks an index, sets v_i = z_i / k_ii - c_i with z = K c and
c_i <- S_i(v_i); h_i is the change, and a sweep stops the solver when max_i |h_i| < tol.

Each update is the exact minimisation of the dual D(c) = f^*(-c) + c^T K c / 2 over c_i (for the
hinge loss this is LIBLINEAR's dual coordinate descent), so D decreases monotonically. The
objective F of problem (2) converges to its minimum (Theorem 4) but is NOT monotone along the
iterations in general (tests/test_coordinate_descent.py shows a counterexample); F + D is the
duality gap, recorded per sweep.

- :func:`kernel_coordinate_descent` (Algorithm 1, any kernel): z = K c is maintained
  incrementally (z += h_i k_i), so an update with h_i = 0 needs no kernel row and a sweep costs
  O(n x number of changed coordinates). Rows come from an LRU :class:`~kernelscale.ops.row_cache.KernelRowCache` under
  ``max_memory``, computed in batches (the next coordinates of the sweep that changed last time).
- :func:`linear_coordinate_descent` (Algorithm 2, linear kernel): keeps w = X^T c, z_i = x_i . w,
  k_ii = |x_i|^2, and skips the w update when h_i = 0; X dense or scipy.sparse (CSR rows).

Index rules: "cyclic" (1..n every sweep), "aitken" (double sweep: 1..n, then n..1, alternating),
"random" (randomised cyclic: a new permutation every sweep). ``shrinking`` removes from the sweeps
coordinates that did not move and sit at a kink of the dual (a bound such as 0 or C for the hinge
loss) with the unclipped update pushing past it by more than the previous sweep's largest change
(LIBLINEAR's rule); once the remaining ones meet the tolerance all coordinates are swept again,
and the solver stops only when such a full sweep meets it. The linear path uses LIBLINEAR's
one-sided form: a coordinate pushed down (in y c; in c for regression) past its kink is compared
with the previous sweep's largest downward step, one pushed up with the largest upward step
(LIBLINEAR's G > PGmax_old / G < PGmin_old), which shrinks the many points at c = 0 sweeps
earlier, and the z_i it tests are those seen at the coordinate's visit (no pass over the working
set's rows). The stopping rule is the same on both paths. The linear path evaluates F and D
(a pass over X) only after full sweeps: its histories hold NaN after shrunk sweeps.

The sweeps run compiled when numba is installed (a dependency; ``USE_NUMBA``
switches it off; the loops are in kernelscale.regularized.cd_loops), else as Python loops with the same
iterates. On the linear path one compiled call runs sweeps, shrinking included, until a sweep over
all coordinates (after every sweep when a callback is given), so that the many short sweeps over a
shrunk working set cost no Python overhead. On the kernel path one compiled call runs sweeps,
their objectives, shrinking and stopping rule included, until the stopping rule asks for an exact
z or a coordinate that moves has no cached row (that sweep is then finished with the row fetched);
with a callback, one sweep per call, so that one-vs-one fits of many small problems pay little
Python overhead (benchmarks/studies/regularized.md). The "random" rule shuffles with one stream
of floats drawn from ``random_state``, shared by both forms.

Points with k_ii = 0 (a zero kernel row: the paper removes them) and points of zero weight keep
c_i = 0; the former are listed in ``SolverResult.dropped``. When the solver would stop, z (or w)
is recomputed exactly, and sweeping goes on if the accumulated rounding was large enough to
matter.
"""

from __future__ import annotations

import contextlib
import logging
import math

import numpy as np
import scipy.sparse as sp
from scipy.linalg import blas
from sklearn.utils import check_random_state

from . import cd_loops as loops
from ..base.monitor import IterationMonitor
from ..base.validation import as_float_array, check_positive
from .problem import SolverResult, check_linear_X, initial_coef, row_sq_norms, setup, vector_bytes
from ..kernels import make_kernel
from ..ops.kernel import KernelOperator, kernel_diag
from ..losses import (
    AbsoluteLoss, EpsilonInsensitiveLoss, HingeLoss, LogisticLoss, SquaredHingeLoss, SquaredLoss, objectives,
)

__all__ = ["kernel_coordinate_descent", "linear_coordinate_descent", "RULES"]

logger = logging.getLogger(__name__)

RULES = ("cyclic", "aitken", "random")
LOOKAHEAD = 4  # prefetch scans this many batches ahead in the sweep order
SPARSE_SWEEPS_BELOW = 0.3  # compiled linear sweeps run dense X with fewer nonzeros than this as CSR
PRECISION_FLOOR = 100.0  # updates moving z_i by less than this many eps(dtype) * max|z| are rounding
RANDOM_CHUNK = 1 << 16  # floats drawn at a time for the "random" rule's shuffles
RUN_SWEEPS = 4096  # most sweeps of one compiled run of the linear path


def _blas(dtype):
    if dtype == np.float32:
        return blas.saxpy, blas.sdot
    return blas.daxpy, blas.ddot


class _Sweeps:
    """Index rule, shrinking, stopping rule and history shared by Algorithms 1 and 2."""

    def __init__(self, active, loss, y, C, *, rule, tol, max_iter, shrinking, random_state, monitor, dtype):
        if rule not in RULES:
            raise ValueError(f"rule must be one of {RULES}, got {rule!r}.")
        check_positive(tol, "tol")
        check_positive(max_iter, "max_iter", integer=True)
        self.active = active
        self.loss, self.y, self.C = loss, y, C
        self.rule, self.tol, self.max_iter, self.shrinking = rule, tol, max_iter, shrinking
        self.rng = check_random_state(random_state)
        self.rand, self.rpos = np.empty(0), 0  # the stream of floats that shuffles (rule "random")
        self.monitor = monitor
        self.work = np.flatnonzero(active)
        self.n_active = int(self.work.size)
        self.mark = np.zeros(active.shape[0], dtype=bool)
        self.last_change = math.inf
        self.sweep = 0
        self.primal, self.dual = [], []
        self.converged = False
        self.eps = float(np.finfo(dtype).eps)
        self.inv_d = self.diag = None  # 1 / k_ii (0 where inactive) and k_ii, set by the solver
        self.inv_kmin = 0.0
        # one-sided shrinking thresholds (the linear path): the previous sweep's largest step in
        # each direction of y c (classification) or c (regression), as LIBLINEAR's PGmax / PGmin
        self.one_sided = False
        self.sign = None
        self.last_up = self.last_down = math.inf

    def order(self):
        """The coordinates of the next sweep, in the rule's order."""
        if self.rule == "random":
            order = self.work.astype(np.intp)
            need = max(order.size - 1, 0)
            self.random_floats(need)
            loops.shuffle(order, order.size, self.rand, self.rpos)
            self.rpos += need
            return order
        if self.rule == "aitken" and self.sweep % 2 == 1:
            return self.work[::-1]
        return self.work

    def random_floats(self, need):
        """Make rand[rpos:] hold at least ``need`` floats of the "random" rule's stream."""
        if self.rpos + need > self.rand.size:
            # a chunk sized to the problem (small ones would spend most of their time drawing);
            # the stream is the same however it is chunked
            fresh = self.rng.random_sample(max(need, min(RANDOM_CHUNK, 64 * self.n_active)))
            self.rand = np.concatenate((self.rand[self.rpos:], fresh))
            self.rpos = 0

    def start(self, c, z, diag, inv_d):
        """Take k_ii and 1 / k_ii (0 where inactive), record the objectives at the start."""
        self.inv_d, self.diag, self.inv_kmin = inv_d, diag, float(np.max(inv_d, initial=0.0))
        self.record(c, z)
        if not self.active.any():
            self.converged = True

    def record(self, c, z):
        p, d = objectives(self.loss, self.y, z, c, self.C)
        self.primal.append(p)
        self.dual.append(d)
        return p, d

    def account(self, outcome, done, max_changes, sizes, c, z, refresh, z_floor, objectives=None):
        """Book-keeping after a compiled run of ``done`` sweeps (loops._nb_linear_run or
        _nb_kernel_run did the shrinking); the same histories and stopping decision as
        :meth:`after_sweep`. ``objectives``: F and D of every sweep (the kernel path), else they
        are evaluated after the run's last sweep when it covered all coordinates (``z(None)``)."""
        for t in range(done):
            self.sweep += 1
            if objectives is not None:
                p, d = float(objectives[0][t]), float(objectives[1][t])
                self.primal.append(p)
                self.dual.append(d)
            elif t == done - 1 and outcome in (loops.RUN_FULL, loops.RUN_TOL):
                p, d = self.record(c, z(None))
            else:
                p = d = math.nan
                self.primal.append(p)
                self.dual.append(d)
            if self.monitor.update(objective=p, dual_objective=d, duality_gap=p + d, max_change=float(max_changes[t]),
                                   n_active=int(sizes[t])):
                return True
        if outcome == loops.RUN_TOL:
            drift = refresh()
            if drift * self.inv_kmin < self.tol or drift < z_floor:
                self.converged = True
                return True
        return False

    def after_sweep(self, c, z, changed, steps, max_change, refresh, z_visit=None):
        """Book-keeping after a sweep; returns True when the solver must stop.

        ``z`` is K c (with intercept) after the sweep, or a function ``z(idx)`` returning its
        entries idx (all for None) where z is not maintained (the linear path); then the
        objectives, which need all of z (a pass over X), are evaluated only after sweeps over all
        coordinates and recorded as NaN after sweeps over a shrunk working set, whose cost is
        a fraction of that pass. ``changed`` / ``steps`` are the coordinates that moved and by
        how much; ``refresh()`` recomputes z exactly and returns the largest difference to the
        maintained one (the accumulated rounding). ``z_visit`` (the linear path): z_i as each
        coordinate saw it when visited (LIBLINEAR's gradient at its visit), used for shrinking and
        the precision floor instead of a pass over the working set's rows.
        """
        self.sweep += 1
        w = self.work
        full = w.size == self.n_active
        if callable(z):
            z_all = z(None) if full else None
            z_w = z_visit[w] if z_visit is not None else (z_all[w] if full else z(w))
        else:
            z_all, z_w = z, z[w]
        if z_all is not None:
            p, d = self.record(c, z_all)
        else:
            p = d = math.nan
            self.primal.append(p)
            self.dual.append(d)
        stop = self.monitor.update(objective=p, dual_objective=d, duality_gap=p + d, max_change=max_change,
                                   n_active=int(w.size))
        if stop:
            return True
        # working precision: every update moved its own z_i (by h_i k_ii) less than the rounding
        # of z; a tol below float32 resolution is met there instead of spinning to max_iter
        z_floor = PRECISION_FLOOR * self.eps * max(1.0, float(np.max(np.abs(z_w), initial=0.0)))
        moved = np.abs(np.asarray(steps)) * self.diag[changed] if len(changed) else np.zeros(1)
        if max_change < self.tol or float(moved.max()) < z_floor:
            if not full:
                self.work = np.flatnonzero(self.active)  # un-shrink: a full sweep must confirm
                self.last_change = self.last_up = self.last_down = math.inf
                return False
            drift = refresh()
            if drift * self.inv_kmin < self.tol or drift < z_floor:
                self.converged = True
                return True
            return False
        if self.shrinking and self.sweep > 1:
            # LIBLINEAR's rule, and like LIBLINEAR no periodic full sweeps: a wrong shrink is
            # undone by the full sweep that must confirm convergence
            self.mark[changed] = True
            unchanged = ~self.mark[w]
            self.mark[changed] = False
            v = z_w * self.inv_d[w] - c[w]
            push = self.loss.kink_push(c[w], v, self.y[w], self.inv_d[w], self.C[w])
            if self.one_sided:
                # the push goes the way of the unclipped step, sign(y_i - z_i) in c units; compare
                # it with the last sweep's largest step that way (LIBLINEAR: G > PGmax_old at the
                # lower bound, G < PGmin_old at the upper)
                up = self.sign[w] * (self.y[w] - z_w) > 0
                limit = np.where(up, self.last_up, self.last_down)
            else:
                limit = self.last_change
            self.work = w[~(unchanged & (push > limit))]
        self.last_change = max_change
        if self.one_sided:
            signed = self.sign[changed] * np.asarray(steps) if len(changed) else np.zeros(1)
            self.last_up = float(signed.max(initial=0.0)) or math.inf
            self.last_down = float(-signed.min(initial=0.0)) or math.inf
        return False


def _coordinates(c, y, C, inv_d, compiled):
    """c, y, C and 1 / k_ii as the sweeps read them: the compiled loops' coordinate table Q
    (:func:`~kernelscale.regularized.cd_loops.coordinate_table`; c is its column Q_COEF, updated
    in place) or, for the Python sweeps, lists. Returns (Q, lists, coef_now), the form not used
    None; ``coef_now()`` is the current c as an array."""
    if compiled:
        Q = loops.coordinate_table(c, y, C, inv_d)
        c_now = Q[:, loops.Q_COEF]
        return Q, None, lambda: c_now
    lists = c.tolist(), y.tolist(), C.tolist(), inv_d.tolist()
    return None, lists, lambda: np.asarray(lists[0])


@contextlib.contextmanager
def _sweeping(desc, active, loss, y, C, *, verbose, callback, sign=None, **rules):
    """The progress monitor and the :class:`_Sweeps` of one solve (Algorithm 1 or 2), for a
    ``with`` block; ``rules``: the keywords of :class:`_Sweeps` other than the monitor.
    ``sign`` (the linear path) switches on the one-sided shrinking thresholds: the direction
    of each coordinate (sign(y_i) for classification, 1 for regression)."""
    with IterationMonitor(verbose, callback, total=rules["max_iter"], desc=desc) as monitor:
        sweeps = _Sweeps(active, loss, y, C, monitor=monitor, **rules)
        if sign is not None:
            sweeps.one_sided, sweeps.sign = True, sign
        yield sweeps


def _exact_intercept(c, scale, state=None):
    """The intercept's term scale * sum(c) (b = s^2 sum(c) on the kernel path, the weight s sum(c)
    of the constant feature on the linear path), summed exactly (math.fsum) as an exact refresh
    of z or w needs it; also stored in ``state[0]``, where the compiled loops keep it, when given."""
    value = scale * math.fsum(c.tolist())
    if state is not None:
        state[0] = value
    return value


def _python_sweep(order, c, y, C, inv_d, step, score, move):
    """One sweep of Algorithm 1 or 2 in Python over ``order`` (a list), on lists c, y, C, inv_d.

    The update of each coordinate is ``loss.step`` (``step``) at v_i = z_i / k_ii - c_i, with
    ``score(i)`` giving z_i (intercept included); ``move(pos, i, h)`` adds h times row i (of K, or
    of X) to the maintained z (or w) and its intercept, and c_i takes the new value. Returns the
    coordinates that moved, their changes and the largest |change|.
    """
    changed, steps = [], []
    max_h = 0.0
    for pos, i in enumerate(order):
        ci = c[i]
        new = step(score(i) * inv_d[i] - ci, y[i], inv_d[i], C[i])
        h = new - ci
        if h != 0.0:
            move(pos, i, h)
            c[i] = new
            changed.append(i)
            steps.append(h)
            if abs(h) > max_h:
                max_h = abs(h)
    return changed, steps, max_h


def kernel_coordinate_descent(kernel, X, y, loss="hinge", C=1.0, *, rule="random", tol=1e-4, max_iter=1000,
                              shrinking=True, c0=None, intercept_scaling=0.0, epsilon=0.1, max_memory=None,
                              random_state=None, verbose=0, callback=None, cache=None, max_rows=None):
    """Solve problem (2) by coordinate descent, Algorithm 1 (any kernel).

    Parameters
    ----------
    kernel : Kernel or str
        A resolved kernel.
    X : array of shape (n, d)
    y : array of shape (n,)
        Targets (+-1 for classification losses). For several problems on the same X, call once
        per column passing the same ``cache``.
    loss : str or Loss
    C : float or array of shape (n,)
        Per-point weight C_i = C w_i of the loss; 0 removes a point.
    rule : "cyclic", "aitken" or "random"
    tol : float
        Stop when max_i |h_i| < tol over a sweep (h_i: the change of c_i).
    max_iter : int
        Maximum number of sweeps.
    shrinking : bool
    c0 : array of shape (n,) or None
        Warm start.
    intercept_scaling : float >= 0
        s > 0: regularised intercept b = s^2 sum(c) (kernel K + s^2), see kernelscale.regularized.fixed_point.
    epsilon : float
        For loss="epsilon_insensitive".
    max_memory : int, str or None
        Budget for the row cache and kernel work; fails at once, naming it, if one row does not fit.
    random_state : seeds the "random" rule.
    verbose, callback : progress bar / per-sweep callback (kernelscale.base.monitor).
    cache : kernelscale.ops.row_cache.KernelRowCache or None
        Rows of K(X, X) to reuse (e.g. across the classes of one-vs-rest).
    max_rows : int or None
        Stop, between sweeps, once this call has computed at least this many kernel rows (the
        cache's misses; each costs O(n d)): a bound on the kernel work whatever the sweeps
        (``max_iter="auto"`` of the estimators). None: no bound. The result is then not
        ``converged``, and ``info["row_cap_reached"]`` is True.

    Returns
    -------
    SolverResult (n_iter counts sweeps).
    """
    kernel = make_kernel(kernel)
    X = as_float_array(X, "X", accept_sparse=True)
    n, dtype = X.shape[0], X.dtype
    loss, y, C, s = setup(X, y, loss, C, intercept_scaling, epsilon, one_output=True)
    s2 = s * s
    diag = np.maximum(kernel_diag(kernel, X).astype(np.float64), 0.0) + s2
    keep = diag > 0
    active = keep & (C > 0)
    dropped = np.flatnonzero(~keep)
    if dropped.size:
        logger.info("%d point(s) have a zero kernel diagonal; their coefficients are fixed at 0", dropped.size)
    if cache is None:
        cache = KernelOperator(kernel, X, max_memory).row_cache(reserved_bytes=vector_bytes(n, 1, dtype),
                                                                max_rows=max(int(active.sum()), 1))
    elif cache.n != n or cache.dtype != dtype:
        raise ValueError("cache was built for a different X; pass cache=None.")
    axpy, _ = _blas(dtype)
    rows_before = cache.n_computed
    capped = False

    c = initial_coef(c0, (n,), np.float64, active)
    z = np.zeros(n, dtype=dtype)
    if c.any():
        z[:] = cache.matvec(c.astype(dtype))
    b = s2 * float(c.sum())

    inv_d_arr = np.divide(1.0, diag, out=np.zeros(n), where=active)
    rows, slot_of, last_used = cache.rows, cache.slot_of, cache.last_used
    lru = cache.capacity < int(active.sum())
    # prefetch candidates: coordinates that changed when last visited (from a warm start: those
    # not at a kink, the others usually stay put and need no row)
    likely = np.ones(n, dtype=bool) if c0 is None else ~loss.at_kink(c, y, C)
    batch = cache.batch_rows

    def z_eff():
        return z + b if s2 else z

    def prefetch(order, pos):
        """Compute the row of order[pos], and in the same batch those of the next coordinates
        of the sweep likely to move."""
        i = order[pos]
        seg = order[pos : pos + LOOKAHEAD * batch]
        want = seg[likely[seg] & (slot_of[seg] < 0)]
        cache.fetch(np.concatenate(([i], want[want != i]))[:batch])

    code = _loss_code(loss)
    Q, lists, coef_now = _coordinates(c, y, C, inv_d_arr, code >= 0)
    if code >= 0:  # compiled sweeps: state in arrays
        c_arr = coef_now()
        eps_loss = float(getattr(loss, "epsilon", 0.0))
        state = np.array([b, 0.0])
        counts = np.zeros(2, dtype=np.int64)
        hbuf = np.zeros(1, dtype=dtype)
        changed_buf = np.empty(n, dtype=np.intp)
        steps_buf = np.empty(n, dtype=np.float64)
        # a callback sees every sweep as it ends: then one compiled sweep at a time
        runs = callback is None
        if runs:
            active_idx = np.flatnonzero(active).astype(np.intp)
            work_buf, order_buf = np.empty(n, dtype=np.intp), np.empty(n, dtype=np.intp)
            # [working-set size, sweeps, position in the random stream, max sweeps, rule, shrinking,
            # position reached in an interrupted sweep]
            ist = np.array([0, 0, 0, 0, 0, int(shrinking), 0], dtype=np.int64)
            # [tol, precision floor factor, last sweep's largest change, z_floor]
            fst = np.array([tol, PRECISION_FLOOR * float(np.finfo(dtype).eps), math.inf, 0.0])
            stats = (np.empty(RUN_SWEEPS), np.empty(RUN_SWEEPS, dtype=np.int64), np.empty(RUN_SWEEPS),
                     np.empty(RUN_SWEEPS))
    else:  # the Python sweeps run on lists
        runs = False
        c_l, y_l, C_l, inv_d = lists

        def score(i):
            return float(z[i]) + b

        def move(pos, i, h):
            nonlocal b
            slot = slot_of[i]
            if slot < 0:
                prefetch(order_arr, pos)
                slot = slot_of[i]
            axpy(rows[slot], z, a=h)
            if lru:
                cache.clock += 1
                last_used[slot] = cache.clock
            b += s2 * h

    def refresh():
        nonlocal b
        cur = coef_now()
        exact = cache.matvec(cur.astype(dtype)) if cur.any() else np.zeros(n, dtype=dtype)
        drift = float(np.max(np.abs(exact - z))) if n else 0.0
        z[:] = exact
        b = _exact_intercept(cur, s2, state if code >= 0 else None)
        return drift

    with _sweeping("coordinate descent", active, loss, y, C, verbose=verbose, callback=callback, rule=rule, tol=tol,
                   max_iter=max_iter, shrinking=shrinking, random_state=random_state, dtype=dtype) as sweeps:
        sweeps.start(c, z_eff(), diag, inv_d_arr)
        if runs:
            ist[4] = RULES.index(rule)
        while not sweeps.converged and sweeps.sweep < max_iter:
            if max_rows is not None and cache.n_computed - rows_before >= max_rows:
                capped = True
                break
            pos = 0
            if runs:  # compiled runs of whole sweeps; one that meets a row not cached is finished here
                m = sweeps.work.size
                work_buf[:m] = sweeps.work
                ist[0], ist[1], ist[2], ist[3] = m, sweeps.sweep, sweeps.rpos, min(max_iter - sweeps.sweep, RUN_SWEEPS)
                fst[2] = sweeps.last_change
                counts[1] = cache.clock
                outcome, done = loops._nb_kernel_run(work_buf, active_idx, order_buf, sweeps.rand, ist, fst, Q, z,
                                                     rows, slot_of, last_used, lru, diag, code, eps_loss, s2, hbuf,
                                                     changed_buf, steps_buf, sweeps.mark, state, counts, *stats)
                cache.clock = int(counts[1])
                b = float(state[0])
                sweeps.rpos, sweeps.last_change = int(ist[2]), float(fst[2])
                sweeps.work = work_buf[: ist[0]].copy()
                if sweeps.account(outcome, done, stats[0], stats[1], c_arr, None, refresh, float(fst[3]),
                                  objectives=stats[2:]):
                    break
                if outcome == loops.RUN_RANDOM:
                    sweeps.random_floats(max(int(ist[0]) - 1, 0))
                if outcome != loops.RUN_ROW:
                    continue
                order_arr, pos = order_buf[: ist[0]].copy(), int(ist[6])
            else:
                order_arr = sweeps.order()
            if code >= 0:
                if pos == 0:
                    order_arr = np.ascontiguousarray(order_arr, dtype=np.intp)
                    state[1] = 0.0
                    counts[0] = 0
                while True:
                    counts[1] = cache.clock
                    pos = loops._nb_kernel_sweep(order_arr, pos, Q, z, rows, slot_of, last_used, lru, code, eps_loss,
                                                 s2, state, hbuf, changed_buf, steps_buf, counts)
                    cache.clock = int(counts[1])
                    if pos >= order_arr.size:
                        break
                    prefetch(order_arr, pos)
                b = float(state[0])
                k = int(counts[0])
                changed, steps, max_h, c = changed_buf[:k], steps_buf[:k], float(state[1]), c_arr
            else:
                changed, steps, max_h = _python_sweep(order_arr.tolist(), c_l, y_l, C_l, inv_d, loss.step, score,
                                                      move)
                c = np.asarray(c_l)
            likely[order_arr] = False
            likely[changed] = True
            if sweeps.after_sweep(c, z_eff(), changed, steps, max_h, refresh):
                break
        stopped = sweeps.monitor.stopped_by_callback
    c = coef_now()
    coef = c.astype(dtype)
    return SolverResult(coef, z_eff().astype(dtype), b if s2 else 0.0, sweeps.sweep, sweeps.converged,
                        np.array(sweeps.primal), np.array(sweeps.dual), dropped, None,
                        stopped_by_callback=stopped, info={"rows_computed": cache.n_computed,
                                                           "cache_rows": cache.capacity,
                                                           "row_cap_reached": capped})


def linear_coordinate_descent(X, y, loss="hinge", C=1.0, *, rule="random", tol=1e-4, max_iter=1000, shrinking=True,
                              c0=None, intercept_scaling=0.0, epsilon=0.1, random_state=None, verbose=0,
                              callback=None):
    """Solve problem (5) (problem (2) with K = X X^T) by Algorithm 2, keeping w = X^T c.

    X is dense or scipy.sparse (converted to CSR); float32 stays float32. The other parameters
    are those of :func:`kernel_coordinate_descent`. With ``intercept_scaling = s > 0`` every row
    gets an extra feature s (LIBLINEAR's bias, regularised); the intercept is s times its weight.
    ``shrinking`` uses LIBLINEAR's one-sided thresholds (module docstring); the stopping rule is
    max |h| < tol over a full sweep, as on the kernel path. The result carries w (shape (d,)) in
    ``SolverResult.w``.
    """
    X = check_linear_X(X)  # validates sparse structure: the compiled sweeps index w with X.indices
    n, dtype = X.shape[0], X.dtype
    loss, y, C, s = setup(X, y, loss, C, intercept_scaling, epsilon, one_output=True)
    sparse = sp.issparse(X)
    if sparse:
        X = X.copy()
        X.sum_duplicates()
        X.sort_indices()
        indices, data = X.indices, X.data
    else:
        X = np.ascontiguousarray(X)
    diag = row_sq_norms(X) + s * s
    keep = diag > 0
    active = keep & (C > 0)
    dropped = np.flatnonzero(~keep)
    axpy, dot = _blas(dtype)

    c = initial_coef(c0, (n,), np.float64, active)
    w = np.asarray(X.T @ c.astype(dtype), dtype=dtype).ravel()
    wb = s * float(c.sum())  # weight of the constant feature s
    inv_d_arr = np.divide(1.0, diag, out=np.zeros(n), where=active)
    code = _loss_code(loss)
    z_visit = np.zeros(n)  # z_i when coordinate i was last visited (the Python sweeps)

    def scores():
        A = X if csr is None else csr  # CSR products: O(nnz), and no BLAS threads to wake
        return np.asarray(A @ w, dtype=dtype).ravel() + s * wb

    def scores_at(idx):  # shrinking reads z_visit, so only the full z is ever asked for
        z = scores()
        return z if idx is None else z[idx]

    csr = X if sparse else None
    Q, lists, coef_now = _coordinates(c, y, C, inv_d_arr, code >= 0)
    if code >= 0:  # compiled runs of sweeps (loops._nb_linear_run): state in arrays
        eps_loss = float(getattr(loss, "epsilon", 0.0))
        if not sparse and prefers_csr(X):
            csr = sp.csr_matrix(X)  # a sweep costs O(nnz): run mostly-zero dense rows as CSR rows
        c_arr = coef_now()
        active_idx = np.flatnonzero(active).astype(np.intp)
        work_buf = np.zeros(n, dtype=np.intp)
        work_buf[: active_idx.size] = active_idx
        # [working-set size, sweeps, position in the random stream, max sweeps, rule, shrinking]
        ist = np.array([active_idx.size, 0, 0, 0, 0, int(shrinking)], dtype=np.int64)  # rule: set below
        # [wb, tol, precision floor factor, last up / down steps, z_floor]
        fst = np.array([wb, tol, PRECISION_FLOOR * float(np.finfo(dtype).eps), math.inf, math.inf, 0.0])
        if csr is not None:  # unsigned views: the compiled gathers then skip negative-index handling
            X_args = (True, _unsigned(csr.indptr), _unsigned(csr.indices), csr.data, np.zeros((1, 1), dtype=dtype))
        else:
            X_args = (False, np.zeros(1, dtype=np.uint32), np.zeros(1, dtype=np.uint32), np.zeros(1, dtype=dtype), X)
        run_args = (w, Q, diag.astype(np.float64), code, eps_loss, s, np.zeros(1, dtype=dtype),
                    np.empty(n, dtype=np.intp), np.empty(n), np.zeros(n, dtype=bool), np.empty(RUN_SWEEPS),
                    np.empty(RUN_SWEEPS, dtype=np.int64))
        order_buf = np.empty(n, dtype=np.intp)
    else:  # the Python sweeps run on lists
        c_l, y_l, C_l, inv_d = lists
        # z_i = x_i . w + s wb, seen at the visit (z_visit); a move adds h (x_i, s) to (w, wb).
        # _python_sweep moves coordinate i right after scoring it: score keeps row i for move
        xi = ind = val = None
        if sparse:
            indptr = X.indptr.tolist()

            def score(i):
                nonlocal ind, val
                lo, hi = indptr[i], indptr[i + 1]
                ind, val = indices[lo:hi], data[lo:hi]
                z_visit[i] = zi = float(val @ w[ind]) + s * wb
                return zi

            def move(pos, i, h):
                nonlocal wb
                w[ind] += h * val
                wb += s * h
        else:
            def score(i):
                nonlocal xi
                xi = X[i]
                z_visit[i] = zi = dot(xi, w) + s * wb
                return zi

            def move(pos, i, h):
                nonlocal wb
                axpy(xi, w, a=h)
                wb += s * h

    def refresh():
        nonlocal wb
        cur = coef_now()
        A = X if csr is None else csr
        exact = np.asarray(A.T @ cur.astype(dtype), dtype=dtype).ravel()
        drift = float(np.max(np.abs(A @ (exact - w)))) if n else 0.0
        w[:] = exact
        wb = _exact_intercept(cur, s, fst if code >= 0 else None)
        return drift

    with _sweeping("coordinate descent (linear)", active, loss, y, C, verbose=verbose, callback=callback, rule=rule,
                   tol=tol, max_iter=max_iter, shrinking=shrinking, random_state=random_state, dtype=dtype,
                   sign=np.sign(y) if loss.classification else np.ones(n)) as sweeps:
        if code >= 0:
            ist[4] = RULES.index(rule)  # validated by _Sweeps
        sweeps.start(c, scores(), diag, inv_d_arr)
        while not sweeps.converged and sweeps.sweep < max_iter:
            if code >= 0:
                # one sweep per run when a callback must see every sweep, else until a full sweep
                ist[2], ist[3] = sweeps.rpos, 1 if callback is not None else min(max_iter - sweeps.sweep, RUN_SWEEPS)
                outcome, done = loops._nb_linear_run(work_buf, active_idx, order_buf, sweeps.rand, ist, fst, *X_args,
                                                     *run_args)
                sweeps.rpos, wb = int(ist[2]), float(fst[0])
                if outcome == loops.RUN_RANDOM:
                    sweeps.random_floats(max(int(ist[0]) - 1, 0))
                if sweeps.account(outcome, done, run_args[-2], run_args[-1], c_arr, scores_at, refresh, float(fst[5])):
                    break
                continue
            changed, steps, max_h = _python_sweep(sweeps.order().tolist(), c_l, y_l, C_l, inv_d, loss.step, score,
                                                  move)
            c = np.asarray(c_l)
            if sweeps.after_sweep(c, scores_at, changed, steps, max_h, refresh, z_visit):
                break
        stopped = sweeps.monitor.stopped_by_callback
    c = coef_now()
    return SolverResult(c.astype(dtype), scores(), s * wb, sweeps.sweep, sweeps.converged, np.array(sweeps.primal),
                        np.array(sweeps.dual), dropped, None, w=w, stopped_by_callback=stopped)


# ----------------------------------------------------------------------------------------------
# compiled loops (optional numba, kernelscale.regularized.cd_loops)

#: compiled sweeps are used when numba is importable and this is True (tests flip it)
USE_NUMBA = loops.NUMBA_AVAILABLE
_LOSS_CODES = {"squared": 0, "hinge": 1, "squared_hinge": 2, "absolute": 3, "epsilon_insensitive": 4, "logistic": 5}
_BUILTIN = {SquaredLoss, HingeLoss, SquaredHingeLoss, AbsoluteLoss, EpsilonInsensitiveLoss, LogisticLoss}


def prefers_csr(X):
    """True when the compiled linear sweeps run faster on X (dense, mostly zeros) as CSR rows."""
    return (USE_NUMBA and loops.NUMBA_AVAILABLE and not sp.issparse(X) and X.size > 0
            and np.count_nonzero(X) < SPARSE_SWEEPS_BELOW * X.size)


def _unsigned(a):
    """The same non-negative integers viewed as unsigned (no copy)."""
    return a.view(np.uint32 if a.dtype.itemsize == 4 else np.uint64)


def _loss_code(loss):
    """The compiled loops' code of a built-in loss, or -1 (use the Python loop)."""
    if not (USE_NUMBA and loops.NUMBA_AVAILABLE) or type(loss) not in _BUILTIN:
        return -1
    loops.compile_loops()
    return _LOSS_CODES[loss.name]
