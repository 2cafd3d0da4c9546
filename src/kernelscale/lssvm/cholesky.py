"""The Cholesky solves of the randomized LS-SVM solvers (docs/algorithms.md sections 4.2 and 4.4).

- :class:`BlockGramCholesky`: the J x J Gram matrix G = Theta[s, :] Theta[s, :]^T of a block s,
  scaled to unit diagonal (the paper's unit-norm rows, eqs. 35-37, which leave the block
  projection unchanged) and factorised by Cholesky in float64, even in a float32 fit: G is formed
  in the fit dtype (the J^2 n product), its factorisation is J^3 / 3 work, negligible next to it,
  and float32 Gram matrices of large blocks are routinely singular to float32 precision. A Gram
  matrix singular to working precision (duplicate samples, float32 rounding, a block larger than
  the kernel's rank) gets a ridge; the solvers count these (``n_regularized``) and keep their
  steps monotone by a line search.
- :class:`WholeSystemCholesky`: the block that is the whole system (J = n + 1), solved without
  the Gram matrix G = Theta Theta^T (2 n^3 flops to form, n^3 / 3 to factorise, cond(Theta)^2):
  one in-place float64 Cholesky of H = K + D (n^3 / 3 flops) and the bias by its Schur
  complement, as :func:`kernelscale.exact.exact_lssvm` does. It declines (and the block path
  runs) when H is not positive definite (a kernel that is not) or singular to float64 precision.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

from ..kernels import GaussianKernel, LaplacianKernel, LinearKernel, MaternKernel, PolynomialKernel
from ..linalg import one_norm
from ..ops.lapack_threads import one_lapack_thread

__all__ = ["BlockGramCholesky", "WholeSystemCholesky", "psd_kernel", "one_norm_lower_free"]


class BlockGramCholesky:
    """Cholesky solves with the J x J block Gram matrix, regularised when it is singular."""

    def __init__(self):
        self.n_regularized = 0
        self.largest_ridge = 0.0

    def factor(self, G):
        """Cholesky factor of G scaled to unit diagonal, with the scale; two float64 J x J arrays
        at most (H and the factor's buffer, reused when a ridge is retried)."""
        # float64 even for float32 fits: J^3 work against the J^2 n of forming G, and float32
        # Gram matrices of large blocks are routinely singular to float32 precision
        H = G.astype(np.float64)
        scale = 1.0 / np.sqrt(np.diag(H))  # unit-norm rows of Theta (eqs. 35-37)
        H *= scale[:, None]
        H *= scale
        eps = np.finfo(H.dtype).eps
        work = np.abs(H)
        anorm = float(work.sum(axis=0).max())
        # H is symmetric, so the transposed (Fortran-ordered) view of the buffer is factorised
        # in place by LAPACK, without a copy
        buf = work.T
        diagonal = work.reshape(-1)[:: H.shape[0] + 1]  # a view: work is C-ordered
        ridge = 0.0
        while True:
            np.copyto(buf, H)
            diagonal += ridge
            try:
                with one_lapack_thread(buf.shape[0]):
                    c, lower = linalg.cho_factor(buf, lower=True, overwrite_a=True, check_finite=False)
                    (pocon,) = linalg.get_lapack_funcs(("pocon",), (c,))
                    rcond, info = pocon(c, anorm + ridge, uplo="L")
                if info == 0 and rcond >= eps and np.isfinite(rcond):
                    break
            except np.linalg.LinAlgError:
                pass
            ridge = 10.0 * eps * anorm if ridge == 0.0 else 10.0 * ridge
            if not np.isfinite(ridge) or ridge > 1e3 * anorm:
                raise ValueError(
                    "a block of the LS-SVM system could not be factorised even with a ridge; the "
                    "kernel values are not finite or badly scaled. Rescale X or change the kernel."
                )
        if ridge:
            self.n_regularized += 1
            self.largest_ridge = max(self.largest_ridge, ridge)
        return (c, lower), scale

    @staticmethod
    def solve(factor, rhs):
        """G^{-1} rhs for the factor of G, in the dtype of rhs."""
        (c, lower), scale = factor
        with one_lapack_thread(c.shape[0]):
            x = linalg.cho_solve((c, lower), rhs * scale[:, None], check_finite=False)
        x *= scale[:, None]
        return x.astype(rhs.dtype, copy=False)


_UNSOLVABLE_WHOLE = (
    "the LS-SVM system could not be solved: 1^T (K + D)^{-1} 1 is not a positive finite number "
    "(X or the kernel's values overflow); rescale X or change the kernel."
)


def psd_kernel(kernel):
    """Whether the kernel is positive semi-definite by construction (the bandwidth kernels,
    the linear kernel, polynomial kernels with coef0 >= 0)."""
    if isinstance(kernel, (GaussianKernel, LaplacianKernel, MaternKernel, LinearKernel)):
        return True
    return isinstance(kernel, PolynomialKernel) and kernel.coef0 >= 0


def one_norm_lower_free(H, h_diag):
    """||H||_1 from the strict lower triangle of the C-ordered buffer (the part a lower Cholesky
    of H.T, which overwrites the buffer's upper triangle, leaves) and the saved diagonal, in
    row blocks (no n x n temporary)."""
    n = H.shape[0]
    sums = np.abs(h_diag)
    step = max(1, min(2**20 // (n * H.itemsize), n))
    for i in range(0, n, step):
        block = np.abs(np.tril(H[i : i + step], k=i - 1))
        sums[i : i + step] += block.sum(axis=1)
        sums += block.sum(axis=0)
    return float(sums.max())


class WholeSystemCholesky:
    """The block that is the whole system (J = n + 1, ``batch_size="auto"`` up to 4095 samples,
    or 24575 within the budget): Theta^{-1} by one in-place Cholesky of H = K + D (n x n), the
    bias by its Schur complement, as :func:`kernelscale.exact.exact_lssvm` does, instead of the
    block path's Gram matrix G = Theta Theta^T (2 n^3 flops to form, n^3 / 3 to factorise, and
    cond(Theta)^2).

    With eta = H^{-1} 1 (once) and s = 1^T eta > 0, Theta [b; A] = [r0; r] is solved by
    nu = H^{-1} r, b = (1^T nu - r0) / s, A = nu - eta b. LAPACK factorises H.T (the C-ordered
    buffer read as a Fortran array) in place: the factor takes the buffer's upper triangle and
    leaves its strict lower one, so H itself stays available for the products Theta Q (``symm``
    on that half, with H's diagonal swapped in for the factor's): the residual is updated exactly
    as matching pursuit does, at 4 n^2 k flops per iteration. The factorisation runs in float64 (as the block path's J x J one; a
    float32 fit builds K in float32 and casts it, within the memory its Gram matrices were
    counted for). :meth:`factor` returns False, and nothing is kept, when H is not positive
    definite or is singular to float64 precision (reciprocal condition number below eps); the
    caller then takes the block path, whose ridge and line search handle such systems.
    """

    def __init__(self, system):
        self.system = system
        self.n = system.n
        self.H = None

    def factor(self):
        """Build H = K + D and factorise it in place; False (nothing kept) when H is not
        positive definite or is singular to float64 precision.

        LAPACK's condition estimate is skipped, with the pass over H for ||H||_1, for positive
        semi-definite kernels whose bound min(D) / (n max_i H_ii) on the reciprocal condition
        number is above 1e6 eps (as at the defaults)."""
        system, n = self.system, self.n
        # the held state counts the block path's J x J arrays (G in the fit dtype, two float64),
        # which this path does not allocate: H (float64) and, for float32 fits, K take their place
        J = n + 1
        unused = 2 * J * J * 8 + J * J * system.op.dtype.itemsize
        H = np.empty((n, n), dtype=np.float64)
        budget = system.budget - system.held + unused - H.nbytes
        if system.op.dtype == np.float64:
            system.op.rows(np.arange(n), out=H, budget=budget)
        else:
            K = system.op.rows(np.arange(n), budget=budget)
            np.copyto(H, K)
            del K
        diagonal = H.reshape(-1)[:: n + 1]  # a view
        diagonal += system.diag
        # no O(n^2) finiteness pass: a non-finite H gives a failed factorisation or a NaN rcond
        self.h_diag = diagonal.copy()
        eps = np.finfo(np.float64).eps
        # a positive semi-definite kernel has |K_ij| <= max_i K_ii, so ||H||_1 <= n max_i H_ii and
        # lambda_min(H) >= min(D): its 1/rcond is at most n max(H_ii) / min(D), known without a
        # pass over H; otherwise LAPACK's estimate (pocon: a sizeable fraction of the
        # factorisation's time, benchmarks/studies/lssvm.md) after the 1-norm pass
        psd = psd_kernel(system.op.kernel) and system.op.dtype == np.float64  # float32 K: rounded, maybe not PSD
        anorm = n * float(self.h_diag.max()) if psd else one_norm(H)
        if not (np.isfinite(anorm) and np.all(np.isfinite(self.h_diag))):
            return False
        # H is symmetric: its C-ordered buffer read as H.T is a Fortran array factorised in place
        try:
            with one_lapack_thread(n):
                c, _ = linalg.cho_factor(H.T, lower=True, overwrite_a=True, check_finite=False)
        except np.linalg.LinAlgError:
            return False
        if not (psd and float(system.diag.min()) >= 1e6 * eps * anorm):
            if psd:
                anorm = one_norm_lower_free(H, self.h_diag)
            (pocon,) = linalg.get_lapack_funcs(("pocon",), (c,))
            rcond, info = pocon(c, anorm, uplo="L")
            if info != 0 or not np.isfinite(rcond) or rcond < eps:
                return False
        self.H, self.diagonal, self.l_diag = H, diagonal, diagonal.copy()
        self._symm = linalg.get_blas_funcs("symm", (H,))
        self.eta = None  # H^{-1} 1, solved with the first right-hand sides
        return True

    def solve(self, R):
        """Theta^{-1} R for R of shape (n + 1, k), in the dtype of R."""
        self.diagonal[:] = self.l_diag
        first = self.eta is None
        rhs = np.empty((self.n, R.shape[1] + first), dtype=np.float64, order="F")
        rhs[:, first:] = R[1:]
        if first:
            rhs[:, 0] = 1.0
        with one_lapack_thread(self.n):
            nu = linalg.cho_solve((self.H.T, True), rhs, overwrite_b=True, check_finite=False)
        if first:
            self.eta, nu = nu[:, 0].copy(), nu[:, 1:]
            self.s = float(self.eta.sum())
            if not (np.isfinite(self.s) and self.s > 0.0):
                raise ValueError(_UNSOLVABLE_WHOLE)
        b = (nu.sum(axis=0) - R[0]) / self.s
        out = np.empty(R.shape, dtype=R.dtype)
        out[0] = b
        nu -= self.eta[:, None] * b
        out[1:] = nu
        return out

    def dot(self, W):
        """Theta W for W of shape (n + 1, k), in the dtype of W."""
        self.diagonal[:] = self.h_diag
        # H's intact half is the buffer's strict lower triangle, i.e. the upper one of H.T: symm
        # on H.T (Fortran) with lower=0
        A = np.asfortranarray(W[1:], dtype=np.float64)
        HA = self._symm(1.0, self.H.T, A, lower=0)
        out = np.empty(W.shape, dtype=W.dtype)
        out[0] = W[1:].sum(axis=0)
        HA += W[0].astype(np.float64)
        out[1:] = HA
        return out
