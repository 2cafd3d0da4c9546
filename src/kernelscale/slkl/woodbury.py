"""Bookkeeping of G = (D^-1 + C^T C / lam)^-1 for SLKL (paper 1, eqs. 22-27).

C (n x m0) holds the active columns c_m (mu_m > 0) and D = diag(mu_active). With G,
(lam I + C D C^T)^-1 = I / lam - C G C^T / lam^2 (eq. 22) is applied to a vector in O(n m0).
One coordinate update changes G by one of four cases: none (eq. 24), a rank-one change of D
(eq. 25), removal of a column (eq. 26) or addition of one (eq. 27). Each is O(m0^2) here; the
rank-one change is done in place (one BLAS ``dger`` pass, no m0 x m0 temporary).

Removal uses swap-with-last: the last active slot moves into the removed slot, so the caller
moves its last stored column the same way (an O(n) copy instead of shifting m0 columns).
"""

from __future__ import annotations

import numpy as np
from scipy.linalg.blas import dger
from scipy.linalg.lapack import dpotrf, dpotri, dpotrs

__all__ = ["woodbury_direct", "woodbury_direct_gram", "woodbury_rescale", "woodbury_remove", "woodbury_append"]


def woodbury_direct(C, mu, lam):
    """G = (D^-1 + C^T C / lam)^-1 computed from scratch (eq. 23), for mu > 0.

    O(n m0^2 + m0^3); see :func:`woodbury_direct_gram`. No scaled copy of C is made, so SLKL's
    memory stays O(n m0 + m0^2).
    """
    C = np.asarray(C, dtype=np.float64)
    return woodbury_direct_gram(C.T @ C, mu, lam, overwrite=True)


def woodbury_direct_gram(CtC, mu, lam, rhs=None, overwrite=False):
    """G = (D^-1 + CtC / lam)^-1 from the Gram matrix CtC = C^T C of the active columns (eq. 23).

    Evaluated as S (I + S CtC S / lam)^-1 S with S = D^(1/2), whose matrix is well conditioned
    even when some mu are tiny. O(m0^3). With ``rhs``, returns (G, G rhs) where G rhs comes from
    the Cholesky factor directly (a backward-stable solve, more accurate than G @ rhs when CtC
    is ill conditioned). One m0 x m0 array beside CtC (none with ``overwrite``: CtC, a
    C-contiguous float64 array the caller gives up, becomes G): the factor and the inverse
    (LAPACK ``potri``) are computed in place, then scaled and mirrored block by block. Raises
    LinAlgError when an entry it reads (CtC's upper triangle, mu, rhs) is not finite.
    """
    mu = np.asarray(mu, dtype=np.float64)
    m0 = mu.size
    if m0 == 0:
        G = np.zeros((0, 0))
        return G if rhs is None else (G, np.zeros(0))
    s = np.sqrt(mu)
    B = np.asarray(CtC, dtype=np.float64)
    owned = overwrite or not np.shares_memory(B, CtC)  # given up by the caller, or converted already
    if not (owned and B.flags.c_contiguous and B.flags.writeable):
        B = B.copy()
    B *= (s / lam)[:, None]
    B *= s
    B.flat[:: m0 + 1] += 1.0
    # B is symmetric: B.T is a Fortran view LAPACK factorises and inverts in place (lower = B's upper);
    # the LAPACK routines are called directly: at the m0 of a typical refresh (tens) the wrappers'
    # argument checks cost more than the arithmetic
    factor, info = dpotrf(B.T, lower=1, clean=0, overwrite_a=1)
    if info > 0 or not np.all(np.isfinite(np.diagonal(factor))):  # a non-finite entry reaches the diagonal
        raise np.linalg.LinAlgError("the Woodbury matrix I + S C^T C S / lam is not finite or not positive definite")
    solved = None
    if rhs is not None:
        solved, info = dpotrs(factor, s * np.asarray(rhs, dtype=np.float64), lower=1)
        solved *= s
        if info != 0 or not np.all(np.isfinite(solved)):
            raise np.linalg.LinAlgError("the right-hand side of the Woodbury solve is not finite")
    inverse, info = dpotri(factor, lower=1, overwrite_c=1)
    if info != 0:
        raise np.linalg.LinAlgError(f"potri failed (info={info})")
    G = inverse.T  # C-ordered again: the inverse sits in its upper triangle
    _scale_and_mirror(G, s)
    return G if rhs is None else (G, solved)


_MIRROR_BLOCK = 64
_STRICT_LOWER = np.tril_indices(_MIRROR_BLOCK, -1)


def _scale_and_mirror(G, s):
    """G <- S U S mirrored, for U the upper triangle of the square G and S = diag(s): exactly
    symmetric, in row blocks, never touching the (scratch) strict lower triangle's values, with
    temporaries of a block's size only (the panel copies below the diagonal read disjoint memory)."""
    m0, block = G.shape[0], _MIRROR_BLOCK
    if m0 <= block:  # one block: a few whole-array operations (np.triu selects, it does no arithmetic)
        U = np.triu(G)
        U *= s[:, None]
        U *= s
        G[...] = U
        G += np.triu(U, 1).T  # 0 + x below the diagonal, x + 0 above it: exact
        return
    for i in range(0, m0, block):
        j = min(i + block, m0)
        d = G[i:j, i:j]
        lower = _STRICT_LOWER if j - i == block else np.tril_indices(j - i, -1)
        d[lower] = d.T[lower]  # the scratch below the diagonal replaced before it could be scaled
        G[i:j, i:] *= s[i:j, None]
        G[i:j, i:] *= s[i:]
        d[lower] = d.T[lower]  # (x s_r) s_c and (x s_c) s_r may round apart: the upper one wins
        G[j:, i:j] = G[i:j, j:].T


def woodbury_rescale(G, p, mu_old, mu_new):
    """Case 2 (eq. 25): D^-1 changes by 1/mu_new - 1/mu_old at slot p; G updated in place."""
    delta = 1.0 / mu_new - 1.0 / mu_old
    g = G[:, p].copy()
    coef = -delta / (1.0 + delta * g[p])
    if G.dtype == np.float64 and G.flags.c_contiguous:
        dger(coef, g, g, a=G.T, overwrite_a=1)  # G.T is a Fortran view of G: updated in place
    else:
        G += coef * np.outer(g, g)
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
