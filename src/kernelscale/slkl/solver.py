"""SLKL's solvers: stochastic coordinate descent on F(mu) (paper 1; docs/algorithms.md section 1).

For M candidate columns c_m (:mod:`kernelscale.slkl.columns`) SLKL learns the conical
combination K(mu) = sum_m mu_m c_m c_m^T = C D C^T by minimising (eq. 14)

    F(mu) = y^T (I + K(mu) / lam)^-1 y + nu sum(mu),   mu >= 0,

(the estimators' ``alpha`` is the paper's ridge lam, ``sparsity`` its nu; the functions here
keep the paper's symbols) one randomly chosen coordinate at a time (Algorithms 1-2,
docs/algorithms.md section 1.2).

:func:`slkl` runs on the columns. The state at mu is the active set, C (n x m0),
G = (D^-1 + C^T C / lam)^-1 (:mod:`kernelscale.slkl.woodbury`) and u = (lam I + K(mu))^-1 y.
A visited coordinate costs O(n) for a = c_m^T u; if mu_m = 0 and lam a^2 <= nu it stays 0 (the
skip rule of docs/algorithms.md section 1.4: either step rule would leave it at 0); otherwise O(n m0) for
b = c_m^T (lam I + K(mu))^-1 c_m, the step, and the updates of u and G. Its products over the n
rows (C^T c, C z, C^T C) run through an ops row block (:class:`kernelscale.ops.kernel.RowBlock`).

Along a coordinate F is known in closed form: F(mu + t e_m) - F(mu) = -lam a^2 t / (1 + t b) + nu t.
``update="line_search"`` takes its minimiser mu_m + (sqrt(lam a^2 / nu) - 1) / b clipped at 0 (an
exact line search, :func:`~kernelscale.slkl.loop.line_search_step`) and never raises F.
``update="newton"`` is the paper's projected Newton step (eq. 19) with the curvature 2 lam a^2 b
of Prop. 2 (Algorithm 2 prints it without the 2). A clipped Newton step that lowers a weight can
raise F (the quadratic model is no upper bound for negative steps, despite Theorem 1a); such a
step is detected in closed form, replaced by the line-search step, and counted
(docs/algorithms.md section 1.3). ``update="exact"``, the former name of "line_search", is
accepted with a FutureWarning until kernelscale 0.3.

:func:`slkl_gram`, the Gram solver (``columns="gram"``; docs/algorithms.md section 1.4). Every
quantity of a visit is an inner product of candidate columns with y or with each other, so with
the M x M Gram matrix Q = C^T C and r = C^T y (:func:`~kernelscale.slkl.columns.gram_of_columns`)
and v = G r_A over the active set A:

    a_m = r_m / lam - Q[m, A] v / lam^2,     b_m = Q_mm / lam - z^T G z / lam^2  (z = Q[A, m]),
    F = y^T y - r_A^T v / lam + nu sum(mu).

The iterates are the same as with the columns (same coordinates, steps and G updates), but a
skipped visit costs O(m0) and a full one O(m0^2) instead of O(n) and O(n m0), at a one-off cost
of O(n M (M + d)) and O(M^2) memory. This departs from the cost analysis of the paper (Sec. 4.2),
whose open problem (the cost of visits that leave a weight at zero) it removes. With numba
installed the visits of an epoch run compiled (:mod:`kernelscale.slkl.loop`: the same iterates up
to rounding; so does the refresh of G from scratch after each epoch for up to
``loop.REFRESH_COMPILED_MAX`` active columns, LAPACK beyond; the objective and the callback stay
in Python between epochs). ``trace=True`` runs the Python loop. The speed-ups measured are in
benchmarks/studies/slkl.md.

Both solvers recompute G and u from scratch every M visits (eq. 23), which bounds the drift of
the rank-one updates, and report the dual coefficients mu_A a_A = v / lam from that direct solve.
Every visit lowers F in exact arithmetic; where F recomputed from scratch has risen all the same
(by more than :data:`DRIFT_RTOL`), the updates drifted (a Q of nearly collinear columns, e.g.
a Gaussian kernel on 784 features, of 250000 rows and 1500 candidates, whose G lost accuracy
within an epoch and let one weight run to 5e5): the visits since the last refresh are undone and
redone with refreshes 8 times as often (the interval then doubles after each run of visits, up
to half the run that failed, and that bound doubles after each epoch). Refreshes are never more
frequent than every m0 / 8 visits (a refresh costs about m0 visits): a run that short which still
raises F is left out. The paper's algorithm has no such check.
The learned model is kernel ridge regression with the kernel k_mu(x, x') =
sum_m mu_m k(x, x_m) k(x_m, x') / k(x_m, x_m); its prediction simplifies (eqs. 16-17) to
f(x) = sum_{m active} mu_m a_m k(x_m, x) / sqrt(k(x_m, x_m)).
"""

from __future__ import annotations

import sys
import warnings
from dataclasses import dataclass, field

import numpy as np
from sklearn.utils import check_random_state

from ..ops.backend import NUMPY
from ..ops.kernel import RowBlock
from ..ops.memory import format_bytes
from . import loop as _slkl_loop
from .columns import as_columns, gram_of_columns
from .loop import line_search_step, newton_step, step_change
from .woodbury import woodbury_append, woodbury_direct_gram, woodbury_remove, woodbury_rescale

__all__ = ["slkl", "slkl_gram", "SLKLResult", "check_update", "UPDATES", "DEPRECATED_UPDATES", "DEFAULT_EPOCHS",
           "DRIFT_RTOL"]

#: the step rules: the exact minimiser of F along the coordinate, or the paper's Newton step
UPDATES = ("line_search", "newton")
#: former names of the step rules -> their names now, accepted with a FutureWarning until 0.3
DEPRECATED_UPDATES = {"exact": "line_search"}
DEFAULT_EPOCHS = 500  # max_iter=None means DEFAULT_EPOCHS * M coordinate visits
#: both solvers undo the visits since the last refresh of G when F, recomputed from scratch, is
#: above its value before them by more than this fraction: every visit lowers F in exact
#: arithmetic, so such a rise is the drift of the rank-one updates, not rounding of F
DRIFT_RTOL = 1e-6


def check_update(update):
    """``update`` as one of :data:`UPDATES`: a former name (:data:`DEPRECATED_UPDATES`) gives a
    FutureWarning (pointing at the caller's line outside kernelscale and scikit-learn) and its
    name now; anything else a ValueError."""
    if isinstance(update, str) and update in DEPRECATED_UPDATES:
        new = DEPRECATED_UPDATES[update]
        level, frame = 1, sys._getframe(0)
        while frame is not None and frame.f_globals.get("__name__", "").split(".")[0] in ("kernelscale", "sklearn"):
            level, frame = level + 1, frame.f_back
        warnings.warn(f"update={update!r} was renamed update={new!r} (the same step) in kernelscale 0.2 and "
                      f"will be removed in 0.3; pass update={new!r}.", FutureWarning, stacklevel=level)
        return new
    if update not in UPDATES:
        raise ValueError(f"update must be one of {UPDATES}, got {update!r}.")
    return update


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

    def active(self):
        """The active columns C^T (m0 x n), used through the products of an ops row block."""
        return RowBlock(self.Ct[: self.m0], NUMPY)

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
            w -= self.active().tdot(Gz) / self.lam**2
        return w

    def curvature(self, c, cc):
        """b = c^T (lam I + K(mu))^-1 c with z = C^T c and Gz = G z, O(n m0)."""
        if self.m0 == 0:
            return cc / self.lam, np.zeros(0)
        z = self.active().dot(c)
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
        C = self.active()
        self.G, self.v = woodbury_direct_gram(C.gram(), self.mu[self.order], self.lam, rhs=C.dot(self.y),
                                              overwrite=True)
        self.u = self.y / self.lam - C.tdot(self.v) / self.lam**2

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
    n_undone: int = 0  # runs of visits undone because F rose (DRIFT_RTOL)
    trace: list = field(default_factory=list)  # F after every visit (trace=True only)


def slkl(columns, y, *, lam=1.0, nu=0.01, update="line_search", tol=1e-4, max_iter=None, random_state=None,
         mu0=None, refresh=True, skip=True, trace=False, budget=None, reserved_bytes=0, monitor=None,
         gram=False):
    """Minimise F(mu) of eq. 14 by stochastic coordinate descent (Algorithm 2).

    Parameters
    ----------
    columns : array (n, M) of candidate columns c_m, or ArrayColumns / KernelColumns
    y : array (n,)
    lam, nu : float > 0
    update : "line_search" (the minimiser of F along the coordinate) or "newton" (eq. 19,
        safeguarded); "exact", the former name of "line_search", with a FutureWarning
    tol : stop when F(mu^{k-M}) - F(mu^k) < tol F(mu^{k-M}), checked every M visits
    max_iter : maximum number of coordinate visits (None: 500 M)
    random_state : coordinates are drawn uniformly with replacement from it
    mu0 : starting weights (M,), default 0
    refresh : recompute G and u from scratch every M visits (bounds round-off drift), and undo the
        visits since the last refresh when F rose (:data:`DRIFT_RTOL`)
    skip : use the O(n) skip rule (switch off only to test that it changes nothing)
    trace : record F after every visit in ``result.trace`` (tests)
    budget, reserved_bytes : bytes for the active columns and G, and bytes of it taken already
        (budget None: unchecked)
    monitor : an IterationMonitor, updated every M visits
    gram : run :func:`slkl_gram` on Q = C^T C and r = C^T y instead (same iterates; O(m0^2) per
        visit instead of O(n m0)); ``result.u`` is then computed at the end from the columns

    Returns
    -------
    SLKLResult
    """
    cols = as_columns(columns)
    y = np.asarray(y, dtype=np.float64).ravel()
    if y.size != cols.n_samples:
        raise ValueError(f"y has {y.size} entries but the columns have length {cols.n_samples}.")
    update = check_update(update)
    if gram:
        Q, R = gram_of_columns(cols, y, budget)
        res = slkl_gram(Q, R[:, 0], y @ y, lam=lam, nu=nu, update=update, tol=tol, max_iter=max_iter,
                        random_state=random_state, mu0=mu0, refresh=refresh, skip=skip, trace=trace,
                        monitor=monitor)
        on = np.flatnonzero(res.mu > 0)
        _, v = _gram_state(Q, R[:, 0], res.mu, on, on.size, lam)
        res.u = y / lam
        for i, j in enumerate(on):
            res.u -= (v[i] / lam**2) * cols.column(j)
        return res
    M = cols.n_candidates
    max_iter = DEFAULT_EPOCHS * M if max_iter is None else int(max_iter)
    rng = check_random_state(random_state)
    st = _State(y, M, lam, budget, reserved_bytes)
    if mu0 is not None:
        st.load(cols, np.asarray(mu0, dtype=np.float64))
    sqnorms = cols.sqnorms
    F = st.objective(nu)
    history = [F]
    tr = [F] if trace else []
    n_skipped = n_fallbacks = k = 0
    converged = stopped = False
    step = line_search_step if update == "line_search" else newton_step
    lam_ = float(lam)
    # visits between two refreshes: cut to 1/8 where F rose, then doubled back up to half the run that failed
    span = longest = M
    n_undone = 0
    while k < max_iter and not converged:
        F_epoch = F
        epoch_draws = rng.randint(0, M, size=min(M, max_iter - k))
        start = 0
        while start < epoch_draws.size:
            draws = epoch_draws[start:start + span]
            saved = st.mu.copy(), F, k, n_skipped, n_fallbacks, len(tr)
            for j in draws:
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
                    mu_new = line_search_step(mu_old, lam_a2, b, nu)
                t = mu_new - mu_old
                if t != 0.0:
                    F += step_change(t, lam_a2, b, nu)
                    st.apply(j, c, a, b, Gz, mu_new)
                if trace:
                    tr.append(F)
            if refresh:
                st.refresh()
            F = st.objective(nu)
            if not refresh or F - saved[1] <= DRIFT_RTOL * abs(saved[1]):
                start += draws.size
                span = min(longest, 2 * span)
                continue
            # F rose: undone and redone with more refreshes, as in slkl_gram
            F, k, n_skipped, n_fallbacks = saved[1:5]
            del tr[saved[5]:]
            st = _State(y, M, lam, budget, reserved_bytes)
            st.load(cols, saved[0])
            n_undone += 1
            shortest = max(1, st.m0 // 8)  # a refresh costs about m0 visits
            if span <= shortest:
                start += draws.size  # these visits are left out
            longest, span = max(shortest, span // 2), max(shortest, span // 8)
        longest = min(M, 2 * longest)
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
                      n_newton_fallbacks=n_fallbacks, stopped_by_callback=stopped, n_undone=n_undone, trace=tr)


def _curvature(state, c, cc):
    """b = c^T (lam I + K(mu))^-1 c (and G C^T c); the O(n m0) part of a visit (module-level so
    tests can count its calls)."""
    return state.curvature(c, cc)



def _gram_state(Q, r, mu, act, m0, lam):
    """G (eq. 23) and v = G r_A over the active slots act[:m0], from scratch. O(m0^3).

    v = lam mu_A a_A are the dual coefficients of the active columns (G^-1 v = r_A gives
    r_A / lam - Q_AA v / lam^2 = D^-1 v / lam), solved directly from the Cholesky factor."""
    A = act[:m0]
    return woodbury_direct_gram(Q[np.ix_(A, A)], mu[A], lam, rhs=r[A], overwrite=True)



def slkl_gram(Q, r, yy, *, lam=1.0, nu=0.01, update="line_search", tol=1e-4, max_iter=None, random_state=None,
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
    update = check_update(update)
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
    n_skipped = n_fallbacks = n_undone = k = 0
    converged = stopped = False
    step = line_search_step if update == "line_search" else newton_step
    newton = update == "newton"
    empty = np.zeros(0)
    epoch = None if trace else _slkl_loop.compiled_epoch()  # one epoch of visits, compiled
    compiled_refresh = None if epoch is None else (_slkl_loop.compiled_refresh() or _slkl_loop._refresh)
    if epoch is not None:
        Q = np.ascontiguousarray(Q)
        G_buf, v_buf = np.zeros((M, M)), np.zeros(M)  # G and v in their leading m0 x m0 and m0 entries
        G_buf[:m0, :m0], v_buf[:m0] = G, v

    def fresh_state():  # G and v from scratch at mu (eq. 23), into the compiled loop's buffers too
        if epoch is not None and m0 <= _slkl_loop.REFRESH_COMPILED_MAX:
            if not compiled_refresh(Q, r, mu, act, m0, lam, G_buf, v_buf):
                raise np.linalg.LinAlgError(
                    "the Woodbury matrix I + S C^T C S / lam is not finite or not positive definite")
            return G_buf[:m0, :m0], v_buf[:m0]
        G, v = _gram_state(Q, r, mu, act, m0, lam)
        if epoch is not None:
            G_buf[:m0, :m0], v_buf[:m0] = G, v
        return G, v

    # visits between two refreshes: cut to 1/8 where F rose, then doubled back up to half the run that failed
    span = longest = M
    while k < max_iter and not converged:
        F_epoch = F
        epoch_draws = rng.randint(0, M, size=min(M, max_iter - k))
        start = 0
        while start < epoch_draws.size:
            draws = epoch_draws[start:start + span]
            if refresh:
                saved = mu.copy(), slot.copy(), act.copy(), m0, F, k, n_skipped, n_fallbacks, len(tr)
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
                        mu_new = line_search_step(mu_old, lam_a2, b, nu)
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
            if not refresh:
                F = yy - float(rA @ v) * inv_lam + nu * mu.sum()
                start += draws.size
                continue
            G, v = fresh_state()
            A, rA = act[:m0], r[act[:m0]]
            F_part = saved[4]
            F = yy - float(rA @ v) * inv_lam + nu * mu.sum()
            if F - F_part <= DRIFT_RTOL * abs(F_part):
                start += draws.size
                span = min(longest, 2 * span)
                continue
            # F rose: the rank-one updates of G drifted (an ill-conditioned Q). Undo the part and
            # redo its visits with refreshes 8 times as often; the shortest run allowed is left out.
            mu[:], slot[:], act[:] = saved[:3]
            m0, F, k, n_skipped, n_fallbacks = saved[3:8]
            del tr[saved[8]:]
            G, v = fresh_state()
            A, rA = act[:m0], r[act[:m0]]
            n_undone += 1
            shortest = max(1, m0 // 8)  # a refresh costs about m0 visits
            if span <= shortest:
                start += draws.size  # these visits are left out
            longest, span = max(shortest, span // 2), max(shortest, span // 8)
        longest = min(M, 2 * longest)
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
                      n_newton_fallbacks=n_fallbacks, stopped_by_callback=stopped, n_undone=n_undone,
                      trace=tr)

