"""Bookkeeping of G = (D^-1 + C^T C / lam)^-1 for SLKL (paper 1, eqs. 22-27).

C (n x m0) holds the active columns c_m (mu_m > 0) and D = diag(mu_active). With G,
(lam I + C D C^T)^-1 = I / lam - C G C^T / lam^2 (eq. 22) is applied to a vector in O(n m0).
One coordinate update changes G by one of four cases: none (eq. 24), a rank-one change of D
(eq. 25), removal of a column (eq. 26) or addition of one (eq. 27). Each is O(m0^2) here.

Removal uses swap-with-last: the last active slot moves into the removed slot, so the caller
moves its last stored column the same way (an O(n) copy instead of shifting m0 columns).
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import cho_factor, cho_solve

__all__ = ["woodbury_direct", "woodbury_rescale", "woodbury_remove", "woodbury_append"]


def woodbury_direct(C, mu, lam):
    """G = (D^-1 + C^T C / lam)^-1 computed from scratch (eq. 23), for mu > 0.

    Evaluated as S (I + S C^T C S / lam)^-1 S with S = D^(1/2), whose matrix is well
    conditioned even when some mu are tiny. O(n m0^2 + m0^3).
    """
    C = np.asarray(C, dtype=np.float64)
    mu = np.asarray(mu, dtype=np.float64)
    m0 = mu.size
    if m0 == 0:
        return np.zeros((0, 0))
    s = np.sqrt(mu)
    B = (C.T @ C) * np.outer(s, s / lam)  # no scaled copy of C: SLKL's memory is O(n m0 + m0^2)
    B[np.diag_indices(m0)] += 1.0
    Binv = cho_solve(cho_factor(B, lower=True), np.eye(m0))
    G = s[:, None] * Binv * s[None, :]
    return (G + G.T) / 2


def woodbury_rescale(G, p, mu_old, mu_new):
    """Case 2 (eq. 25): D^-1 changes by 1/mu_new - 1/mu_old at slot p; G updated in place."""
    delta = 1.0 / mu_new - 1.0 / mu_old
    g = G[:, p].copy()
    G -= (delta / (1.0 + delta * g[p])) * np.outer(g, g)
    return G


def woodbury_remove(G, p):
    """Case 3 (eq. 26): drop slot p (Schur-complement downdate); the last slot moves into p.

    Returns a new (m0 - 1) x (m0 - 1) array.
    """
    g = G[:, p].copy()
    H = G - np.outer(g, g) / g[p]
    last = G.shape[0] - 1
    if p != last:
        H[p, :] = H[last, :]
        H[:, p] = H[:, last]  # also sets H[p, p] = H[last, last] (row p already copied)
    return np.ascontiguousarray(H[:last, :last])


def woodbury_append(G, Gz, b, mu_new, lam):
    """Case 4 (eq. 27): append a column c with weight mu_new in a new last slot.

    ``Gz`` = G C^T c and ``b`` = c^T (lam I + C D C^T)^-1 c = |c|^2/lam - z^T G z / lam^2 (the
    curvature term the coordinate step already computed), so the Schur complement of eq. 27 is
    s = (1/mu_new + b)^-1 = mu_new / (1 + mu_new b). Returns a new (m0 + 1) x (m0 + 1) array.
    """
    m0 = G.shape[0]
    s = mu_new / (1.0 + mu_new * b)
    v = -(s / lam) * Gz
    out = np.empty((m0 + 1, m0 + 1))
    out[:m0, :m0] = G + np.outer(v, v) / s
    out[:m0, m0] = v
    out[m0, :m0] = v
    out[m0, m0] = s
    return out
