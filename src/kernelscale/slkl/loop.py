"""The coordinate visits of SLKL's Gram solver (:func:`kernelscale.slkl.solver.slkl_gram`), compiled by numba.

One call runs one epoch of visits: the same draws, steps and Woodbury updates (eqs. 24-27,
docs/algorithms.md section 1.1) as the Python loop of ``slkl_gram``, on the active block
``G[:m0, :m0]`` of an M x M buffer, with the rank-one products written as loops (the same
iterates up to rounding). Between epochs ``slkl_gram`` refreshes G from scratch, records the
objective and calls the monitor, in Python. With numba installed (a dependency;
the Python loop remains for platforms without it) the epoch is compiled on first use (cached on disk); without it, with ``trace=True`` or with
:data:`USE_NUMBA` off, ``slkl_gram`` runs its own loop. Why the loop is compiled (its share of a
fit, measured): benchmarks/studies/slkl.md, "Compiled visits".

The step rules live here too, as plain functions the compiled epoch and the Python loops share:
:func:`line_search_step` (``update="line_search"``, formerly ``"exact"``; :func:`exact_step` is
its former name) and :func:`newton_step`.
"""
from __future__ import annotations

import importlib.util
import math
import os
import threading

import numpy as np

#: numba is installed; it is imported, and the epoch compiled, only by :func:`compiled_epoch`
NUMBA_AVAILABLE = importlib.util.find_spec("numba") is not None
#: switch for tests and comparisons: False runs slkl_gram's Python loop
USE_NUMBA = NUMBA_AVAILABLE
_compiled = None
_compile_lock = threading.Lock()  # one build, whichever thread asks first


def _fresh_lock():
    global _compile_lock
    _compile_lock = threading.Lock()  # a fork while another thread compiled would leave it held


if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(after_in_child=_fresh_lock)


def step_change(t, lam_a2, b, nu):
    """F(mu + t e_m) - F(mu) = -lam a^2 t / (1 + t b) + nu t (Sherman-Morrison on eq. 14)."""
    return nu * t - lam_a2 * t / (1.0 + t * b)


def line_search_step(mu, lam_a2, b, nu):
    """The minimiser over v >= 0 of F along the coordinate: max(0, mu + (sqrt(lam a^2/nu) - 1)/b)
    (an exact line search on the closed form of :func:`step_change`; ``update="line_search"``).

    With a = 0 (or b = 0, i.e. c_m = 0) F grows linearly with slope nu, so the minimiser is 0.
    """
    if lam_a2 <= 0.0 or b <= 0.0:
        return 0.0
    return max(0.0, mu + (math.sqrt(lam_a2 / nu) - 1.0) / b)


#: the former name of :func:`line_search_step` (``update="exact"``), kept until kernelscale 0.3
exact_step = line_search_step


def newton_step(mu, lam_a2, b, nu):
    """The paper's projected Newton step (eq. 19, Algorithm 2) with d2F = 2 lam a^2 b (Prop. 2)."""
    h = 2.0 * lam_a2 * b
    if h <= 0.0:
        return 0.0
    return max(0.0, mu + (lam_a2 - nu) / h)


def _quadratic(G, z, m0, Gz):
    """Gz[:m0] = G[:m0, :m0] z[:m0]; returns z^T G z (the curvature term of a visit)."""
    zGz = 0.0
    for s in range(m0):
        acc = 0.0
        for u in range(m0):
            acc += G[s, u] * z[u]
        Gz[s] = acc
        zGz += z[s] * acc
    return zGz


# the functions above, compiled by compiled_epoch (one implementation, in this file: numba's
# disk cache notices changes to the file of the function it compiles, not to other files)
_nb_quadratic = _quadratic
_nb_step_change = step_change
_nb_line_search_step = line_search_step
_nb_newton_step = newton_step


def _epoch(Q, r, qdiag, mu, slot, act, m0, G, v, draws, lam, nu, newton, skip):
    """Visit the coordinates ``draws`` (Algorithm 2 on the Gram quantities), updating ``mu``,
    ``slot``, ``act``, ``G[:m0, :m0]`` and ``v[:m0]`` = G r_A in place. Returns (m0, skipped
    visits, Newton fallbacks); the caller evaluates F after the epoch."""
    inv_lam = 1.0 / lam
    inv_lam2 = 1.0 / lam**2
    M = r.size
    z = np.empty(M)
    Gz = np.empty(M)
    g = np.empty(M)
    n_skipped = 0
    n_fallbacks = 0
    for idx in range(draws.size):
        j = draws[idx]
        p = slot[j]
        mu_old = mu[j]
        if p >= 0:
            # active: a and b from v and G (see slkl_gram for why these forms)
            a = v[p] * inv_lam / mu_old
            lam_a2 = lam * a * a
            if mu_old * qdiag[j] * inv_lam > 1.0:
                b = (mu_old - G[p, p]) / (mu_old * mu_old)
            else:
                for s in range(m0):
                    z[s] = Q[j, act[s]]
                b = qdiag[j] * inv_lam - _nb_quadratic(G, z, m0, Gz) * inv_lam2
        else:
            zv = 0.0
            for s in range(m0):
                z[s] = Q[j, act[s]]
                zv += z[s] * v[s]
            a = r[j] * inv_lam - zv * inv_lam2
            lam_a2 = lam * a * a
            if skip and lam_a2 <= nu:
                n_skipped += 1
                continue
            b = qdiag[j] * inv_lam - _nb_quadratic(G, z, m0, Gz) * inv_lam2
        if newton:
            mu_new = _nb_newton_step(mu_old, lam_a2, b, nu)
            if _nb_step_change(mu_new - mu_old, lam_a2, b, nu) > 0.0:
                n_fallbacks += 1
                mu_new = _nb_line_search_step(mu_old, lam_a2, b, nu)
        else:
            mu_new = _nb_line_search_step(mu_old, lam_a2, b, nu)
        if mu_new == mu_old:
            continue
        if p >= 0 and mu_new > 0:  # eq. 25, and v = G r_A along the same rank-one change
            delta = 1.0 / mu_new - 1.0 / mu_old
            grA = 0.0
            for s in range(m0):
                g[s] = G[s, p]
                grA += g[s] * r[act[s]]
            denom = 1.0 + delta * g[p]
            coef = -delta / denom
            for s in range(m0):
                for u in range(m0):
                    G[s, u] += coef * g[s] * g[u]
            shift = delta * grA / denom
            for s in range(m0):
                v[s] -= shift * g[s]
        else:
            if p >= 0:  # eq. 26, swap-with-last
                for s in range(m0):
                    g[s] = G[s, p]
                gp = g[p]
                for s in range(m0):
                    for u in range(m0):
                        G[s, u] -= g[s] * g[u] / gp
                last = m0 - 1
                if p != last:
                    for u in range(m0):
                        G[p, u] = G[last, u]
                    for s in range(m0):
                        G[s, p] = G[s, last]
                m0 -= 1
                moved = act[m0]
                act[p] = moved
                slot[moved] = p
                slot[j] = -1
            else:  # eq. 27: a new last slot
                sc = mu_new / (1.0 + mu_new * b)
                for s in range(m0):
                    g[s] = -(sc / lam) * Gz[s]
                for s in range(m0):
                    for u in range(m0):
                        G[s, u] += g[s] * g[u] / sc
                for s in range(m0):
                    G[s, m0] = g[s]
                    G[m0, s] = g[s]
                G[m0, m0] = sc
                act[m0] = j
                slot[j] = m0
                m0 += 1
            for s in range(m0):  # v = G r_A
                acc = 0.0
                for u in range(m0):
                    acc += G[s, u] * r[act[u]]
                v[s] = acc
        mu[j] = mu_new
    return m0, n_skipped, n_fallbacks


#: the largest active set whose refresh runs compiled (:func:`_refresh`); a larger one takes
#: LAPACK (:func:`kernelscale.slkl.woodbury.woodbury_direct_gram`), whose call overhead its O(m0^3)
#: arithmetic then outweighs
REFRESH_COMPILED_MAX = 64


def _refresh(Q, r, mu, act, m0, lam, G, v):
    """G[:m0, :m0] = S (I + S Q_AA S / lam)^-1 S and v[:m0] = G r_A from scratch (eq. 23, as
    :func:`kernelscale.slkl.woodbury.woodbury_direct_gram`, S = diag(sqrt(mu_A))): the Cholesky
    factor L of the middle matrix solves for v (backward stable) and gives G = S L^-T L^-1 S,
    computed on its upper triangle and mirrored (exactly symmetric). Plain loops, m0^3 / 2
    multiply-adds, for the small active sets of a typical refresh, where the LAPACK calls'
    overhead in Python dominates (benchmarks/studies/slkl.md, "Compiled visits"). Returns False
    when the factor or v is not finite (the matrix is not positive definite, or an entry
    overflowed)."""
    s = np.empty(m0)
    for i in range(m0):
        s[i] = math.sqrt(mu[act[i]])
    L = np.empty((m0, m0))  # B, then its Cholesky factor, in the lower triangle
    for i in range(m0):
        for j in range(i + 1):
            L[i, j] = (Q[act[i], act[j]] * (s[i] / lam)) * s[j]
        L[i, i] += 1.0
    for j in range(m0):
        d = L[j, j]
        for k in range(j):
            d -= L[j, k] * L[j, k]
        if not (d > 0.0 and math.isfinite(d)):
            return False
        d = math.sqrt(d)
        L[j, j] = d
        for i in range(j + 1, m0):
            acc = L[i, j]
            for k in range(j):
                acc -= L[i, k] * L[j, k]
            L[i, j] = acc / d
    x = np.empty(m0)  # v = S L^-T L^-1 S r_A
    for i in range(m0):
        acc = s[i] * r[act[i]]
        for k in range(i):
            acc -= L[i, k] * x[k]
        x[i] = acc / L[i, i]
    for i in range(m0 - 1, -1, -1):
        acc = x[i]
        for k in range(i + 1, m0):
            acc -= L[k, i] * x[k]
        x[i] = acc / L[i, i]
    W = np.zeros((m0, m0))  # L^-1, lower triangular
    for j in range(m0):
        W[j, j] = 1.0 / L[j, j]
        for i in range(j + 1, m0):
            acc = 0.0
            for k in range(j, i):
                acc -= L[i, k] * W[k, j]
            W[i, j] = acc / L[i, i]
    for i in range(m0):
        for j in range(i, m0):
            acc = 0.0
            for k in range(j, m0):
                acc += W[k, i] * W[k, j]
            g = (acc * s[i]) * s[j]
            G[i, j] = g
            G[j, i] = g
        v[i] = s[i] * x[i]
        if not math.isfinite(v[i]):
            return False
    return True


_compiled_refresh = None


def compiled_refresh():
    """The compiled :func:`_refresh` (None until :func:`compiled_epoch` has built it)."""
    return _compiled_refresh


def compiled_epoch():
    """The compiled :func:`_epoch` (built once; None without numba or with USE_NUMBA off)."""
    global _compiled, _compiled_refresh, _nb_quadratic, _nb_step_change, _nb_line_search_step, _nb_newton_step
    if not (USE_NUMBA and NUMBA_AVAILABLE):
        return None
    with _compile_lock:
        if _compiled is None:
            try:
                import numba
            except ImportError:  # installed but not importable (e.g. built for another numpy)
                return None

            jit = numba.njit(cache=True, nogil=True, fastmath=False, error_model="numpy")  # x / 0 -> inf, as numpy
            inline = numba.njit(cache=True, nogil=True, fastmath=False, error_model="numpy", inline="always")
            _nb_quadratic, _nb_step_change = inline(_quadratic), jit(step_change)
            _nb_line_search_step, _nb_newton_step = jit(line_search_step), jit(newton_step)
            _compiled_refresh = jit(_refresh)
            _compiled = jit(_epoch)
    return _compiled
