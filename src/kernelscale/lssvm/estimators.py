"""Multi-class LS-SVM with randomized block solvers (paper 4, ALGORITHMS.md section 4).

The LS-SVM with bias solves the saddle system (eqs. 16-19)

    Theta W = Z,   Theta = [[0, 1^T], [1, K + D]],   W = [b; A],   Z = [0; Y],

with D = I / C (C is the paper's gamma). With sample weights s_i the squared errors are weighted,
min 1/2 |w|^2 + C/2 sum_i s_i |e_i|^2, whose optimality conditions give a_i = C s_i e_i, i.e.
D = diag(1 / (C s_i)); samples with s_i = 0 have a_i = 0 and are dropped before solving.

Theta has n + 1 rows: index 0 is the bias row [0, 1^T], index i >= 1 the row of sample i - 1.
The randomized solvers draw blocks s of J indices from ALL n + 1 rows, bias row included, as
the paper does (its blocks come from a permutation of the N + 1 indices, eq. 26 ff.): a random
permutation is cut into floor((n + 1) / J) contiguous blocks, then reshuffled. The J rows
Theta[s, :] are computed on the fly from kernel rows (:meth:`kernelscale.ops.kernel.KernelOperator.row_block`,
under ``max_memory``) plus the diagonal D and the bias column; the bias row itself is never
stored (its entries are known). Theta is symmetric, so the J columns Theta[:, s] that matching
pursuit uses are the same numbers.

Solvers (``solve_lssvm``), all with the J x J Gram matrix G = Theta[s, :] Theta[s, :]^T solved by
Cholesky after scaling it to unit diagonal (the paper's unit-norm rows, eqs. 35-37, which leave
the block projection unchanged). G is formed in the fit dtype (the J^2 n product); its J x J
factorisation runs in float64 (J^3, negligible) because float32 Gram matrices of large blocks
are routinely singular to float32 precision:

- ``"kaczmarz"`` (eqs. 39-47): W <- W + Theta[s, :]^T G^{-1} (Z_s - Theta[s, :] W), the block
  projection of the row-normalised system; ||W - W*|| never increases (eq. 44).
- ``"matching_pursuit"`` (eqs. 56-60): R = Z - Theta W kept; Q = pinv(Theta[:, s]) R =
  G^{-1} Theta[s, :] R; W_s <- W_s + Q; R <- R - Theta[:, s] Q; ||R|| never increases (eq. 60).
- ``"kaczmarz_mp"``: one Kaczmarz step then one matching-pursuit step on the same block and the
  same factorisation. The Kaczmarz update Theta[s, :]^T V is dense, so keeping R = Z - Theta W
  exact needs Theta times it: one full blocked kernel product per iteration (about (n + 1) / J
  extra kernel blocks). No cheaper exact update exists (it would need rows of Theta^2).
  Deviation: the paper's two unit steps can DIVERGE (Kaczmarz contracts ||W - W*||, matching
  pursuit ||Theta (W - W*)||, and their composition contracts neither; e.g. n = 200, J = 20,
  Gaussian kernel, see tests). Here the Kaczmarz direction gets the step length that minimises
  ||R|| (free, as Theta times the update is computed anyway), so the residual never increases.
- ``"nystrom"`` (eqs. 26-28): committee members W_t = pinv(Theta_JN) Theta_JJ pinv(Theta_NJ) Z
  = Theta[s, :]^T G^{-1} Theta[s, s] G^{-1} Theta[s, :] Z, one block per member. The committee is
  the AVERAGE of the members: eq. 28 prints their sum, which has the same argmax but T times
  the scale, wrong for regression and for probabilities.
- ``"exact"``: the dense Cholesky solve of :func:`kernelscale.exact.exact_lssvm` (n x n memory;
  with sample weights :func:`exact_weighted_lssvm`).

When one block is the whole system (J = n + 1, what ``batch_size="auto"`` gives up to 4095
samples, and up to 24575 when the n x n arrays fit ``max_memory``), the three iterative solvers'
steps coincide: W <- W + Theta^{-1} (Z - Theta W). It is then computed without the Gram matrix
G = Theta Theta^T (2 n^3 flops to form, n^3 / 3 to factorise, cond(Theta)^2): one in-place
float64 Cholesky of H = K + D (n^3 / 3 flops) and the bias by its Schur complement
(:class:`_WholeSystem`), each iteration a pair of triangular solves and a product with H (4 n^2 k
flops), with the same line search, histories and stopping rules. At n = 4000, d = 10 a default fit
went from about 1.9 s to 0.3-0.45 s on 2 cores (Cholesky 0.2 s, kernel matrix 0.06 s). When H is
not positive definite (a kernel that is not) or singular to float64 precision (LAPACK's condition
estimate below eps; skipped, with the pass over H for ||H||_1, for positive semi-definite kernels
whose bound min(D) / (n max_i H_ii) on it is above 1e6 eps, as at the defaults), the block path
runs instead, with its ridge and line search. "nystrom" keeps the block path.

sample_weight with integer weights is exactly equivalent to repeating samples for the LS-SVM
solution, which the iterative solvers converge to; the Nystrom committee is an approximation
whose blocks depend on the rows, so for it the equivalence holds only as J -> n + 1.

Each update is scaled per output column by an exact line-search factor alpha, computable from
quantities the step already has: the step length minimising ||W - W*|| for Kaczmarz (Theta[s, :]
W* = Z_s is known) and ||R|| for matching pursuit. With an exact J x J solve alpha = 1, the
paper's step; when the solve had to be regularised (a singular block, e.g. duplicate samples, or
float32 rounding) it keeps eqs. 44 and 60 true. A block Gram matrix that is singular to working
precision gets a ridge (one RuntimeWarning per fit; the count is ``n_regularized``).

``n_averaged`` = S > 1 averages S independently seeded solutions (eq. 68).

On a dask X chunked by rows (issue #15; :mod:`kernelscale.lssvm.distributed`) the same solvers run
over the chunks: the blocks drawn are numpy's, the J sampled rows of X (J x d) are shipped to
every chunk task, each chunk keeps its part K(X_c, X_J) + D of the block and returns its part of
the J x J Gram matrix G and of Theta[s, :] W; W and the residual R stay partitioned like X; the
J x J factorisation and solves run here. The hybrid's full product Theta dW is one task per pair
of row chunks. The model equals numpy's up to the order of the sums (1e-8 relative in float64).
When one block is the whole system (``solver="exact"``, or J = n + 1, as ``batch_size="auto"``
gives up to 4095 samples, or more within the budget) the rows are gathered and numpy's solve
runs on them: it needs an n x n block anyway. Either way the fitted model holds the training rows and the dual
coefficients (``X_fit_``, ``dual_coef_``, n x d and n x k), as numpy's does, since predictions
need them: they are gathered once, at the end of the fit.

Cost of one iteration (n samples, d features, J = batch_size, k outputs): the J x n kernel block
(2 J n d flops, one GEMM) and its Gram matrix G (J^2 n flops, a float32 symmetric rank-k
update) dominate; both are needed by the exact block projections (pinv of a J x n block).
For MNIST (n = 60000, d = 784, J = 2000) the Gram matrix is about 1.3 times the block's
flops; the float64 J x J Cholesky factorisation (J^3 / 3) and the k-column products add about
10%. The hybrid also needs one full product with Theta (2 n^2 d), about (n + 1) / J times the
cost of a block.
"""

from __future__ import annotations

import logging
import warnings
from numbers import Integral, Real
from typing import NamedTuple

import numpy as np
from scipy import linalg
from sklearn.base import BaseEstimator, ClassifierMixin, MultiOutputMixin, RegressorMixin, _fit_context
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ..base.device import DeviceMixin
from ..base.params import DEVICE_CONSTRAINT
from ..base.classifier import check_class_memory, encode_classes, one_hot
from ..base.monitor import IterationMonitor, check_callback
from ..base.validation import (
    as_float_array, check_finite_result, check_positive, check_sample_weight, validate_data,
)
from ..exact import _one_norm, exact_lssvm, kernel_predict, kernel_ridge_dual
from ..ops.backend import NUMPY
from ..ops.feature_blocks import float_dtype
from ..base.estimator import (
    INPUT_ATTRIBUTES, FiniteR2Mixin, commit_fit, fit_weights, resolve_kernel, validate_fit_data,
    warm_start_iterations,
)
from ..kernels import (
    KERNEL_NAMES, GaussianKernel, Kernel, LaplacianKernel, LinearKernel, MaternKernel, PolynomialKernel,
    make_kernel,
)
from ..ops.kernel import KernelOperator, kernel_rows
from ..ops.lapack_threads import one_lapack_thread
from ..ops.rows import is_dask
from ..simplex import project_simplex
from ..ops.memory import format_bytes, parse_memory, ufunc_workspace_bytes

__all__ = [
    "LSSVMClassifier",
    "LSSVMRegressor",
    "solve_lssvm",
    "exact_weighted_lssvm",
    "lssvm_fit_memory",
    "lssvm_theta",
    "LSSVMSolution",
    "SOLVERS",
]

logger = logging.getLogger(__name__)

SOLVERS = ("matching_pursuit", "kaczmarz", "kaczmarz_mp", "nystrom", "exact")
_ITERATIVE = ("matching_pursuit", "kaczmarz", "kaczmarz_mp")


# ----------------------------------------------------------------------------------------------
# the system Theta W = Z


def lssvm_diagonal(n, C, sample_weight, dtype):
    """The diagonal D of eq. 17: 1/C, or 1 / (C s_i) with positive sample weights s_i."""
    if sample_weight is None:
        return np.full(n, 1.0 / C, dtype=dtype)
    return (1.0 / (C * np.asarray(sample_weight, dtype=np.float64))).astype(dtype)


def lssvm_theta(kernel, X, C, sample_weight=None, max_memory=None):
    """The dense (n + 1) x (n + 1) matrix Theta of eq. 17 (with the weighted diagonal).

    For tests and small problems only: it builds the n x n kernel matrix (through
    :func:`kernelscale.ops.kernel.kernel_rows`, which refuses when it does not fit ``max_memory``).
    """
    kernel = make_kernel(kernel)
    X = as_float_array(X, "X")
    n = X.shape[0]
    K = kernel_rows(kernel, X, np.arange(n), max_memory=max_memory)
    theta = np.zeros((n + 1, n + 1), dtype=X.dtype)
    theta[0, 1:] = 1.0
    theta[1:, 0] = 1.0
    theta[1:, 1:] = K
    theta[np.arange(1, n + 1), np.arange(1, n + 1)] += lssvm_diagonal(n, C, sample_weight, X.dtype)
    return theta


class _Rows:
    """The rows Theta[s, :] of one block, stored as kernel rows (with D added, a
    :class:`~kernelscale.ops.kernel.RowBlock`) for the sample indices and, when the bias index 0
    is in s, an implicit last row [0, 1^T].

    ``order`` is s rearranged so that the bias index (if any) comes last; every J-vector below
    is in this order.
    """

    def __init__(self, order, block, has_bias, n):
        self.order = order
        self.block = block
        self.has_bias = has_bias
        self.n = n
        self.m = block.shape[0]

    @property
    def nbytes(self):
        return self.block.nbytes

    def gram(self):
        """G = Theta[s, :] Theta[s, :]^T (J x J): 1 1^T + M M^T, plus the bias row's entries."""
        m, J = self.m, self.m + self.has_bias
        G = np.empty((J, J), dtype=self.block.dtype)
        G[:m, :m] = self.block.gram()
        G[:m, :m] += 1.0
        if self.has_bias:
            sums = self.block.row_sums()
            G[:m, m] = sums
            G[m, :m] = sums
            G[m, m] = self.n
        return G

    def dot(self, W):
        """Theta[s, :] W for W of shape (n + 1, k); shape (J, k)."""
        out = np.empty((self.m + self.has_bias, W.shape[1]), dtype=W.dtype)
        self.block.dot(W[1:], out=out[: self.m])
        out[: self.m] += W[0]
        if self.has_bias:
            out[self.m] = W[1:].sum(axis=0)
        return out

    def tdot(self, V):
        """Theta[s, :]^T V = Theta[:, s] V for V of shape (J, k); shape (n + 1, k)."""
        out = np.empty((self.n + 1, V.shape[1]), dtype=V.dtype)
        out[0] = V[: self.m].sum(axis=0)
        self.block.tdot(V[: self.m], out=out[1:])
        if self.has_bias:
            out[1:] += V[self.m]
        return out

    def square(self):
        """Theta[s, s] (J x J), in ``order``."""
        m, J = self.m, self.m + self.has_bias
        T = np.empty((J, J), dtype=self.block.dtype)
        T[:m, :m] = self.block.columns(self.order[:m] - 1)
        return bias_border(T, m, self.has_bias)


def bias_border(T, m, has_bias):
    """T (J x J) with the bias row and column of Theta (eq. 17) after its m sample rows: ones, and
    a zero corner."""
    if has_bias:
        T[:m, m] = 1.0
        T[m, :m] = 1.0
        T[m, m] = 0.0
    return T


class _System:
    """Theta of eq. 17 for the training set, evaluated on demand under a memory budget."""

    def __init__(self, kernel, X, diag, budget, held_bytes):
        self.op = KernelOperator(kernel, X, budget)
        self.diag = diag
        self.n = X.shape[0]
        self.budget = budget
        # X prepared once for every block and product (its copy counts as held)
        self.held = held_bytes + self.op.prepared_extra_bytes
        self._buffer = None  # one (J, n) block buffer reused across iterations

    def rows(self, block):
        """The rows Theta[s, :] for the index block s (values in 0..n); the returned rows live
        in a buffer that the next call overwrites."""
        samples = block[block > 0]
        has_bias = samples.size < block.size
        order = np.concatenate([samples, [0]]) if has_bias else block
        idx = samples - 1
        if self._buffer is None or self._buffer.shape[0] < idx.size:
            self._buffer = None
            self._buffer = np.empty((block.size, self.n), dtype=self.op.dtype)
        out = self._buffer[: idx.size]
        rows = self.op.row_block(idx, diag=self.diag, out=out, budget=self.budget - self.held - out.nbytes)
        return _Rows(order, rows, has_bias, self.n)

    def matvec(self, W, extra_bytes=0):
        """Theta W for W of shape (n + 1, k): one blocked pass over the kernel matrix."""
        out = np.empty_like(W)
        out[0] = W[1:].sum(axis=0)
        budget = self.budget - self.held - extra_bytes - out.nbytes
        out[1:] = self.op.matvec(W[1:], budget=budget)
        out[1:] += W[0]
        out[1:] += self.diag[:, None] * W[1:]
        return out


class _SmallSolver:
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


def _psd_kernel(kernel):
    """Whether the kernel is positive semi-definite by construction (the bandwidth kernels,
    the linear kernel, polynomial kernels with coef0 >= 0)."""
    if isinstance(kernel, (GaussianKernel, LaplacianKernel, MaternKernel, LinearKernel)):
        return True
    return isinstance(kernel, PolynomialKernel) and kernel.coef0 >= 0


def _one_norm_lower_free(H, h_diag):
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


class _WholeSystem:
    """The block that is the whole system (J = n + 1, ``batch_size="auto"`` up to 4095 samples,
    or 24575 within the budget): Theta^{-1} by one in-place Cholesky of H = K + D (n x n), the
    bias by its Schur complement, as :func:`kernelscale.exact.exact_lssvm` does, instead of the
    block path's Gram matrix G = Theta Theta^T (2 n^3 flops to form, n^3 / 3 to factorise, and
    cond(Theta)^2).

    With eta = H^{-1} 1 (once) and s = 1^T eta > 0, Theta [b; A] = [r0; r] is solved by
    nu = H^{-1} r, b = (1^T nu - r0) / s, A = nu - eta b. LAPACK factorises H.T (the C-ordered
    buffer read as a Fortran array) in place: the factor takes the buffer's upper triangle and
    leaves its strict lower one, so H itself stays available for the products Theta Q (``symm``
    on that half, with H's diagonal swapped in for the factor's): the residual is updated exactly as matching pursuit does, at 4 n^2 k
    flops per iteration. The factorisation runs in float64 (as the block path's J x J one; a
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
        # pass over H; otherwise LAPACK's estimate (pocon, about 1/4 of the factorisation's time
        # at n = 4000) after the 1-norm pass
        psd = _psd_kernel(system.op.kernel) and system.op.dtype == np.float64  # float32 K: rounded, maybe not PSD
        anorm = n * float(self.h_diag.max()) if psd else _one_norm(H)
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
                anorm = _one_norm_lower_free(H, self.h_diag)
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

    def iterate(self, Z, W, solver, T, monitor, run, hist_r, hist_u, tol):
        """One run from W (updated in place): T iterations W <- W + alpha Theta^{-1} R with the
        residual R = Z - Theta W, the matching-pursuit step with the whole system as its block;
        Kaczmarz's and the hybrid's steps are the same step there. alpha minimises ||R|| (1 up to
        rounding). Histories and stopping rules as in :func:`_iterate`."""
        use_k = solver in ("kaczmarz", "kaczmarz_mp")
        use_mp = solver in ("matching_pursuit", "kaczmarz_mp")
        z_norm = float(np.linalg.norm(Z))
        R = Z.copy() if not W.any() else Z - self.dot(W)
        if use_mp:
            hist_r[0] = np.linalg.norm(R)
        for t in range(T):
            Q = self.solve(R)
            dR = self.dot(Q)
            alpha = _line_search(*_coldots(R, dR))
            Q *= alpha
            dR *= alpha
            W += Q
            R -= dR
            del dR
            info = {"run": run, "step": t + 1, "coef": W}
            if use_k:
                info["update"] = hist_u[t] = float(np.linalg.norm(Q))
            if use_mp:
                info["residual"] = hist_r[t + 1] = float(np.linalg.norm(R))
            info["objective"] = info.get("residual", info.get("update"))
            if monitor.update(**info):
                return t + 1
            if tol is not None and (info["residual"] <= tol * z_norm if use_mp
                                    else info["update"] <= tol * float(np.linalg.norm(W))):
                return t + 1
        return T


def _line_search(num, den):
    """Per-column step factor num / den (0 where the direction vanishes)."""
    tiny = np.finfo(den.dtype).tiny
    return np.where(den > tiny, num / np.maximum(den, tiny), 0.0).astype(den.dtype)


def _coldot(a, b):
    return np.einsum("ij,ij->j", a, b) if isinstance(a, np.ndarray) else a.coldots(b)[1]


def _coldots(a, b):
    """(a . b, b . b) per column (one pass over the rows for row-chunked vectors)."""
    return (_coldot(a, b), _coldot(b, b)) if isinstance(a, np.ndarray) else a.coldots(b)


# the solvers' other operations on (n + 1) x k vectors: numpy arrays, or the row-chunked
# vectors of :mod:`kernelscale.lssvm.distributed` (which implement them as methods)

def _norm(a):
    return np.linalg.norm(a) if isinstance(a, np.ndarray) else a.norm()


def _zeros_like(a):
    return np.zeros_like(a) if isinstance(a, np.ndarray) else a.zeros_like()


def _add_at(W, order, Q):
    """W[order] += Q."""
    if isinstance(W, np.ndarray):
        W[order] += Q
    else:
        W.add_at(order, Q)


def _live(W):
    """W for a callback: the array itself, or a lazy dask array of the row-chunked vector."""
    return W if isinstance(W, np.ndarray) else W.lazy()


def _blocks(rng, n_rows, J):
    """Blocks of J indices: contiguous pieces of a random permutation, reshuffled when used up."""
    while True:
        perm = rng.permutation(n_rows)
        for start in range(0, n_rows - J + 1, J):
            yield perm[start : start + J]


# ----------------------------------------------------------------------------------------------
# memory


def _state_bytes(n, k, J, item, solver, n_averaged):
    """Bytes held besides the kernel block: the (n + 1) x k state arrays of ``solver`` (plus the
    running average when S > 1), the J x J Gram matrix in the fit dtype, two float64 J x J arrays
    of its factorisation, and the J x k right-hand sides."""
    n_vec = {"matching_pursuit": 4, "kaczmarz": 3, "kaczmarz_mp": 6, "nystrom": 3}[solver] + (n_averaged > 1)
    return n_vec * (n + 1) * k * item + 2 * J * J * 8 + J * J * item + 6 * J * k * 8


def _class_bytes(n, k, item, solver, n_averaged):
    """Bytes of the arrays with one column per class: the one-hot targets and the solver's
    (n + 1) x k state (for "exact", the right-hand sides and solutions)."""
    state = 3 * n * (k + 1) * item if solver == "exact" else _state_bytes(n, k, 1, item, solver, n_averaged)
    return n * k * item + state


def lssvm_fit_memory(n, d, k, batch_size, dtype, kernel, solver="matching_pursuit", n_averaged=1):
    """Bytes a fit of ``solver`` allocates for n samples, d features, k outputs and J = batch_size.

    Counts the (n + 1) x k state arrays (W, Z, the residual R, the committee/average, update
    temporaries), one J x n kernel block with the temporaries of
    :func:`kernelscale.ops.kernel.kernel_rows`, and the J x J Gram matrix and its factor; for
    ``"kaczmarz_mp"`` also one row of the full kernel product (the minimum it needs: its blocks
    take what the budget leaves, up to ``kernelscale.ops.memory.MAX_BLOCK_BYTES``, so with a large
    budget the hybrid uses up to that much more); for ``"exact"`` the n x n matrix.
    """
    kernel = make_kernel(kernel)
    dtype = np.dtype(dtype)
    item = dtype.itemsize
    if solver == "exact":
        return n * n * item + 3 * n * (k + 1) * item
    J = min(int(batch_size), n + 1)
    state = _state_bytes(n, k, J, item, solver, n_averaged)
    block = J * n * item
    temps = (
        kernel.aux_bytes(n, d, dtype)
        + ufunc_workspace_bytes()
        + J * d * item
        + max(kernel.bytes_per_row(n, d, dtype) - n * item, 1)
    )
    total = state + block + temps
    if solver == "kaczmarz_mp":
        # the full product Theta dW: its output and one block row against the prepared X the
        # block loop holds
        total += (n + 1) * k * item + kernel.bytes_per_row(n, d, dtype)
    return int(total)


def _check_memory(n, d, k, J, dtype, kernel, solver, n_averaged, budget):
    need = lssvm_fit_memory(n, d, k, J, dtype, kernel, solver, n_averaged)
    if need <= budget:
        return
    if solver == "exact":
        raise ValueError(
            f"max_memory={format_bytes(budget)} is too small for solver='exact', which builds the "
            f"{n} x {n} kernel matrix ({format_bytes(need)}); use an iterative solver (e.g. "
            f"'matching_pursuit'), float32 data, or increase max_memory to {need} bytes."
        )
    lo, hi = 0, J  # largest block size that fits (the memory grows with J)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if lssvm_fit_memory(n, d, k, mid, dtype, kernel, solver, n_averaged) <= budget:
            lo = mid
        else:
            hi = mid - 1
    hint = f"pass batch_size <= {lo}" if lo else "no batch_size fits"
    f32 = ", use dtype=np.float32 (halves it)" if dtype == np.float64 else ""
    raise ValueError(
        f"max_memory={format_bytes(budget)} is too small for solver={solver!r} with "
        f"batch_size={J}: it needs {format_bytes(need)} ({need} bytes; a {J} x {n} kernel block "
        f"plus the state arrays); {hint}{f32}, or increase max_memory to at least {need} bytes."
    )


# ----------------------------------------------------------------------------------------------
# solvers


class LSSVMSolution(NamedTuple):
    """What :func:`solve_lssvm` returns.

    intercept (k,), dual_coef (n, k); n_iter: iterations of the last run; residual_history
    (S, n_iter + 1) of ||Z - Theta W||_F (matching pursuit and hybrid, else None);
    update_history (S, n_iter) of ||W(t+1) - W(t)||_F (Kaczmarz and hybrid, else None), NaN
    after an early stop; n_regularized: block solves that needed a ridge; batch_size: J used.
    """

    intercept: np.ndarray
    dual_coef: np.ndarray
    n_iter: int
    residual_history: np.ndarray | None
    update_history: np.ndarray | None
    n_regularized: int
    batch_size: int


def exact_weighted_lssvm(kernel, X, Y, C, sample_weight=None, max_memory=None):
    """Exact LS-SVM with the weighted diagonal diag(1 / (C s_i)) (``exact_lssvm`` has no weights).

    With H = K + diag(1 / (C s)), one weighted kernel-ridge solve (``kernel_ridge_dual`` with
    alpha = 1/C, which forms exactly this H) gives eta = H^{-1} 1 and nu = H^{-1} Y; then
    b = 1^T nu / 1^T eta and A = nu - eta b. Zero weights give zero coefficients.
    Returns ``(intercept (k,), dual_coef (n, k))``.
    """
    if sample_weight is None:
        b, A = exact_lssvm(kernel, X, Y, C, max_memory=max_memory)
        return np.atleast_1d(b), A.reshape(A.shape[0], -1)
    X = as_float_array(X, "X")
    Y = np.asarray(Y, dtype=X.dtype).reshape(X.shape[0], -1)
    rhs = np.empty((X.shape[0], Y.shape[1] + 1), dtype=X.dtype)
    rhs[:, 0] = 1.0
    rhs[:, 1:] = Y
    sol = kernel_ridge_dual(kernel, X, rhs, 1.0 / C, sample_weight=sample_weight, max_memory=max_memory)
    eta, nu = sol[:, 0], sol[:, 1:]
    intercept = nu.sum(axis=0) / eta.sum()
    return intercept, np.ascontiguousarray(nu - eta[:, None] * intercept)


def solve_lssvm(
    kernel,
    X,
    Y,
    C,
    solver="matching_pursuit",
    *,
    sample_weight=None,
    batch_size=2000,
    n_iter=100,
    tol=None,
    n_averaged=1,
    init=None,
    init_count=0,
    random_state=None,
    max_memory=None,
    verbose=0,
    callback=None,
):
    """Solve the LS-SVM system Theta W = Z (eqs. 16-19) with one of ``SOLVERS``.

    Parameters
    ----------
    kernel : Kernel or str
        A resolved kernel.
    X : array (n, d); its dtype (float32 or float64) is the dtype of every array of the solve. A
        dask array chunked by rows (validated, one column chunk) is solved over its chunks
        (module docstring); Y and sample_weight are then dask arrays with X's row chunks.
    Y : array (n,) or (n, k) of targets (one-hot class codes for classification).
    C : float > 0, the paper's gamma.
    solver : one of SOLVERS.
    sample_weight : array (n,) of positive weights, or None (drop zero weights beforehand).
    batch_size : int >= 1, J; clipped (with a warning) to the n + 1 rows of Theta.
    n_iter : int >= 1, T: iterations per run (committee members for "nystrom").
    tol : float > 0 or None: a run stops early once ||Z - Theta W||_F <= tol ||Z||_F (matching
        pursuit and the hybrid) or ||W(t+1) - W(t)||_F <= tol ||W(t+1)||_F (Kaczmarz); None
        runs all T iterations ("nystrom" always does: its members are not iterates).
    n_averaged : int >= 1, S: independently seeded runs averaged (eq. 68).
    init : (intercept, dual_coef) to start from (warm start), or None for W = 0. For
        "nystrom" the previous committee, weighted by ``init_count`` members.
    init_count : int, previous block updates (mixed into the seeds so a warm start draws new
        blocks; the committee weight of ``init`` for "nystrom").
    random_state : int, RandomState or None.
    max_memory : int, str or None. The fit fails at once, naming batch_size, when it cannot
        run within this budget (see :func:`lssvm_fit_memory`).
    device : None, "auto", "cpu", "cuda" or "cuda:N", default=None
        Where kernel and feature blocks are computed (README, "GPUs"): None is numpy on the host
        (a torch tensor as input selects its device); the others need torch.
    verbose, callback : see :class:`kernelscale.base.monitor.IterationMonitor`. The callback's dict
        has "run", "step", "residual" / "update" and "coef", the live (n + 1, k) array W (a lazy
        dask array on dask input).

    Returns
    -------
    LSSVMSolution
    """
    if solver not in SOLVERS:
        raise ValueError(f"solver={solver!r} is not one of {SOLVERS}.")
    kernel = make_kernel(kernel)
    check_positive(C, "C")
    for value, name in ((batch_size, "batch_size"), (n_iter, "n_iter"), (n_averaged, "n_averaged")):
        check_positive(value, name, integer=True)
    if tol is not None:
        check_positive(tol, "tol")
    check_callback(callback)
    budget = parse_memory(max_memory)
    distributed = is_dask(X)
    if distributed and (solver == "exact" or int(batch_size) >= X.shape[0] + 1):
        # one block is the whole system (an n x n solve): numpy's fit on the gathered rows,
        # which the fitted model holds anyway (X_fit_); refused first when it cannot run
        import dask

        n = X.shape[0]
        _check_memory(n, X.shape[1], Y.shape[1] if Y.ndim == 2 else 1, min(int(batch_size), n + 1), X.dtype, kernel,
                      solver, n_averaged, budget)
        X, Y, sample_weight = dask.compute(X, Y, sample_weight)
        distributed = False
    if distributed:
        dtype = X.dtype
        n, d = X.shape
        if Y.ndim not in (1, 2) or Y.shape[0] != n:
            raise ValueError(f"Y must have shape ({n},) or ({n}, k) to match X, got {Y.shape}.")
        Y = (Y[:, None] if Y.ndim == 1 else Y).astype(dtype)
    else:
        X = as_float_array(X, "X")
        dtype = X.dtype
        n, d = X.shape
        Y = np.asarray(Y, dtype=dtype)
        if Y.ndim not in (1, 2) or Y.shape[0] != n:
            raise ValueError(f"Y must have shape ({n},) or ({n}, k) to match X, got {Y.shape}.")
        Y = Y.reshape(n, -1)
        if sample_weight is not None:
            sample_weight = np.asarray(sample_weight, dtype=np.float64)
            if sample_weight.shape != (n,) or not np.all(sample_weight > 0):
                raise ValueError("sample_weight must have shape (n,) with positive entries; drop zero weights first.")
    k = Y.shape[1]

    if solver == "exact":
        _check_memory(n, d, k, n, dtype, kernel, solver, n_averaged, budget)
        b, A = exact_weighted_lssvm(kernel, X, Y, C, sample_weight, max_memory=budget)
        return LSSVMSolution(b.astype(dtype), A.astype(dtype), 1, None, None, 0, n + 1)

    J = int(batch_size)
    if J > n + 1:
        warnings.warn(
            f"batch_size={J} is larger than the {n + 1} rows of the LS-SVM system (n_samples={n} "
            f"plus the bias row); using batch_size={n + 1}.",
            UserWarning,
            stacklevel=2,
        )
        J = n + 1
    # over dask row chunks, one task holds the J x n_c block of its chunk of n_c rows
    _check_memory(max(X.chunks[0]) if distributed else n, d, k, J, dtype, kernel, solver, n_averaged, budget)

    if distributed:  # the same solvers on W, R, Z split into the bias row and the row chunks
        from .distributed import DaskSystem

        system = DaskSystem(kernel, X, C, sample_weight, budget)
        Z = system.vector(np.zeros(k), Y)
        W0 = None if init is None else system.vector(np.reshape(init[0], k), np.reshape(init[1], (n, k)))
    else:
        Z = np.zeros((n + 1, k), dtype=dtype)
        Z[1:] = Y
        W0 = None
        if init is not None:
            b0, A0 = init
            W0 = np.empty((n + 1, k), dtype=dtype)
            W0[0] = np.asarray(b0, dtype=dtype).reshape(k)
            W0[1:] = np.asarray(A0, dtype=dtype).reshape(n, k)
        held = _state_bytes(n, k, J, dtype.itemsize, solver, n_averaged)
        system = _System(kernel, X, lssvm_diagonal(n, C, sample_weight, dtype), budget, held)
    small = _SmallSolver()

    rs = check_random_state(random_state)
    base_seed = int(rs.randint(0, np.iinfo(np.int32).max))
    S, T = int(n_averaged), int(n_iter)
    track_r = solver in ("matching_pursuit", "kaczmarz_mp")
    track_u = solver in ("kaczmarz", "kaczmarz_mp")
    res_hist = np.full((S, T + 1), np.nan) if track_r else None
    upd_hist = np.full((S, T), np.nan) if track_u else None
    total = _zeros_like(Z)
    runs_done, steps_done = 0, 0
    show = ("residual",) if track_r else ("update",)
    whole = None
    if not distributed and J == n + 1 and solver in _ITERATIVE and system.op.backend is NUMPY:  # host Cholesky
        whole = _WholeSystem(system)
        if not whole.factor():
            whole = None  # not SPD or singular to float64 precision: the block path (ridge, line search)
    with IterationMonitor(verbose, callback, total=S * T, desc=f"LS-SVM {solver}", show=show) as monitor:
        for run in range(S):
            rng = np.random.default_rng([base_seed, int(init_count), run])
            blocks = _blocks(rng, n + 1, J)
            if whole is not None:
                W = np.zeros_like(Z) if W0 is None else W0.copy()
                hist_r = None if res_hist is None else res_hist[run]
                hist_u = None if upd_hist is None else upd_hist[run]
                steps_done = whole.iterate(Z, W, solver, T, monitor, run, hist_r, hist_u, tol)
            elif solver == "nystrom":
                W, steps_done = _nystrom(system, Z, blocks, T, small, monitor, run)
            else:
                W = _zeros_like(Z) if W0 is None else W0.copy()
                hist_r = None if res_hist is None else res_hist[run]
                hist_u = None if upd_hist is None else upd_hist[run]
                steps_done = _iterate(system, Z, W, solver, blocks, T, small, monitor, run, hist_r, hist_u, tol)
            total += W
            runs_done += 1
            if monitor.stopped_by_callback:
                break
    whole = None  # release the n x n factor
    if small.n_regularized:
        warnings.warn(
            f"{small.n_regularized} block Gram matrices of the LS-SVM system were singular to "
            f"working precision (duplicate samples, C too large for {dtype.name}, or a block "
            f"larger than the rank of the kernel); their J x J solves were regularised with a "
            f"ridge up to {small.largest_ridge:.3g} (relative to unit diagonal) and the steps "
            f"kept monotone by the line-search factor. Consider float64, a smaller C or batch_size.",
            RuntimeWarning,
            stacklevel=2,
        )
    W = total / runs_done
    if solver == "nystrom" and init is not None and init_count > 0:
        members = runs_done * T if not monitor.stopped_by_callback else (runs_done - 1) * T + steps_done
        W = (init_count * W0 + members * W) / (init_count + members)
    W = W if isinstance(W, np.ndarray) else W.to_numpy()  # the model: n x k, as numpy's
    return LSSVMSolution(
        W[0].copy(), np.ascontiguousarray(W[1:]), steps_done, res_hist, upd_hist, small.n_regularized, J
    )


def _iterate(system, Z, W, solver, blocks, T, small, monitor, run, hist_r, hist_u, tol=None):
    """One run of Kaczmarz, matching pursuit or the hybrid from W (updated in place), stopped
    early at ``tol`` (:func:`solve_lssvm`)."""
    use_k = solver in ("kaczmarz", "kaczmarz_mp")
    use_mp = solver in ("matching_pursuit", "kaczmarz_mp")
    z_norm = float(_norm(Z))
    R = None
    if use_mp:
        R = Z.copy() if not W.any() else Z - system.matvec(W)
        hist_r[0] = _norm(R)
    rows = factor = None
    for t in range(T):
        block = next(blocks)
        rows = factor = None  # release the previous block and factor before the next ones
        rows = system.rows(block)
        factor = small.factor(rows.gram())
        info = {"run": run, "step": t + 1, "coef": _live(W) if monitor.callback else W}
        if use_k:
            r_s = Z[rows.order] - rows.dot(W)
            V = small.solve(factor, r_s)
            dW = rows.tdot(V)
            if use_mp:
                # hybrid: step length minimising ||R|| (the paper's length 1 can diverge)
                dR = system.matvec(dW, extra_bytes=rows.nbytes)
                alpha = _line_search(*_coldots(R, dR))
                dR *= alpha
                R -= dR
                del dR
            else:
                # exact line search on ||W - W*||: Theta[s, :] W* = Z_s makes it computable
                alpha = _line_search(_coldot(r_s, V), _coldot(dW, dW))
            dW *= alpha
            W += dW
            info["update"] = hist_u[t] = float(_norm(dW))
            del dW
        if use_mp:
            Q = small.solve(factor, rows.dot(R))
            dR = rows.tdot(Q)
            alpha = _line_search(*_coldots(R, dR))  # exact line search on ||R||
            Q *= alpha
            dR *= alpha
            _add_at(W, rows.order, Q)
            R -= dR
            del dR
            info["residual"] = hist_r[t + 1] = float(_norm(R))
        info["objective"] = info.get("residual", info.get("update"))
        if monitor.update(**info):
            return t + 1
        if tol is not None and (info["residual"] <= tol * z_norm if use_mp
                                else info["update"] <= tol * float(_norm(W))):
            return t + 1
    return T


def _nystrom(system, Z, blocks, T, small, monitor, run):
    """The average of T committee members W_t = pinv(Theta_JN) Theta_JJ pinv(Theta_NJ) Z (eq. 27)."""
    total = _zeros_like(Z)
    for t in range(T):
        rows = factor = None  # release the previous block and factor before the next ones
        rows = system.rows(next(blocks))
        factor = small.factor(rows.gram())
        x = small.solve(factor, rows.square() @ small.solve(factor, rows.dot(Z)))
        total += rows.tdot(x)
        # "coef" is the committee so far (an (n + 1) x k copy: negligible next to the J x n block)
        if monitor.update(run=run, step=t + 1, objective=None, coef=_live(total / (t + 1)) if monitor.callback else None):
            return total / (t + 1), t + 1
    return total / T, T


# ----------------------------------------------------------------------------------------------
# estimators


#: batch_size="auto" takes the whole system up to 4096 rows, and up to AUTO_WHOLE_MAX rows when
#: its n x n arrays fit the memory budget: its Cholesky (n^3 / 3 flops) costs less than the 15 to
#: 100+ iterations of 4 J^2 n flops that blocks of J = 2000 take to reach tol (at C = 10, n = 4000
#: to 16512), up to about 25000 rows
AUTO_WHOLE_MAX = 24576


def _auto_batch(n, fits=None):
    """batch_size="auto": the whole system (n + 1 rows, one Cholesky solve of K + D,
    :class:`_WholeSystem`) up to 4096 rows, or up to AUTO_WHOLE_MAX when ``fits(n + 1)`` (its
    memory is within the budget), else blocks of 2000 (the estimator docstring gives the costs)."""
    whole = n + 1
    if whole <= 4096 or (whole <= AUTO_WHOLE_MAX and fits is not None and fits(whole)):
        return whole
    return 2000


class _LSSVMBase(DeviceMixin, BaseEstimator):
    _parameter_constraints: dict = {
        "kernel": [Kernel, StrOptions(set(KERNEL_NAMES))],
        "C": [Interval(Real, 0, None, closed="neither")],
        "solver": [StrOptions(set(SOLVERS))],
        "batch_size": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "n_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="neither"), None],
        "n_averaged": [Interval(Integral, 1, None, closed="left")],
        "dtype": "no_validation",  # checked in fit (np.float32, np.float64 or None)
        "max_memory": [Interval(Real, 0, None, closed="neither"), str, None],
        "device": DEVICE_CONSTRAINT,
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "callback": [callable, None],
        "warm_start": ["boolean"],
    }

    def _work_dtype(self, X):
        return X.dtype if self.dtype is None else float_dtype(self.dtype, "dtype")

    def _auto_batch(self, X, Y, dtype, kernel):
        """batch_size="auto" (:func:`_auto_batch`): beyond 4096 rows the whole system only for
        the iterative solvers on the host (the path of :class:`_WholeSystem`) within max_memory."""
        n, d = X.shape
        k = Y.shape[1] if Y.ndim == 2 else 1
        budget = parse_memory(self.max_memory)

        def fits(J):
            return (self.solver in _ITERATIVE and self.device is None
                    and lssvm_fit_memory(n, d, k, J, dtype, kernel, self.solver, self.n_averaged) <= budget)
        return _auto_batch(n, fits)

    #: every attribute a fit may set (a refit deletes those it does not set again)
    _FITTED = ("kernel_", "X_fit_", "intercept_", "dual_coef_", "n_iter_", "batch_size_", "n_regularized_",
               "n_updates_", "residual_history_", "update_history_", "objective_history_", "classes_",
               *INPUT_ATTRIBUTES)

    def _fit_system(self, X, Y, sample_weight, fitted, squeeze=False):
        """Validate weights, resolve the kernel, solve; commit ``fitted`` plus the fitted state in
        one step (a 1-d ``dual_coef_`` and a scalar ``intercept_`` with ``squeeze``)."""
        dtype = self._work_dtype(X)
        parse_memory(self.max_memory)
        rng = check_random_state(self.random_state)
        if is_dask(X):  # dask arrays with X's row chunks (kernelscale.dask.fit), weights checked there
            from .distributed import prepare

            X, Y, sample_weight = prepare(X, Y, sample_weight, dtype, self.max_memory)
            kernel = resolve_kernel(self.kernel, X, rng, sample_weight)  # numpy's draw of rows
        else:
            if sample_weight is not None:
                sample_weight = check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
                if not np.any(sample_weight > 0):
                    raise ValueError(
                        "sample_weight has no positive entry: all weights are zero; pass at least one "
                        "non-zero weight."
                    )
                keep = sample_weight > 0
                if not keep.all():
                    X, Y, sample_weight = X[keep], Y[keep], sample_weight[keep]
            X = np.ascontiguousarray(X, dtype=dtype)
            kernel = resolve_kernel(self.kernel, X, rng, sample_weight)
        init, init_count, done = None, 0, 0
        same_classes = "classes_" not in fitted or np.array_equal(fitted["classes_"], getattr(self, "classes_", None))
        if self.warm_start and hasattr(self, "dual_coef_") and self.solver != "exact" and same_classes:
            prev = self.dual_coef_.reshape(self.dual_coef_.shape[0], -1)
            if prev.shape == Y.shape:
                init = (np.asarray(self.intercept_).reshape(-1), prev)
                init_count, done = int(getattr(self, "n_updates_", 0)), self.n_iter_
            else:
                logger.info(
                    "warm_start: previous solution has shape %s, data %s; starting cold", prev.shape, Y.shape
                )
        n_iter = self.n_iter if init is None else warm_start_iterations(self.n_iter, done)
        if n_iter == 0:
            return self
        seed = rng if not isinstance(self.random_state, Integral) else self.random_state
        sol = solve_lssvm(
            kernel,
            X,
            Y,
            self.C,
            self.solver,
            sample_weight=sample_weight,
            batch_size=self._auto_batch(X, Y, dtype, kernel) if self.batch_size == "auto" else self.batch_size,
            n_iter=n_iter,
            tol=self.tol,
            n_averaged=self.n_averaged,
            init=init,
            init_count=init_count,
            random_state=seed,
            max_memory=self.max_memory,
            verbose=self.verbose,
            callback=self.callback,
        )
        intercept, dual_coef = sol.intercept, sol.dual_coef
        if squeeze:
            dual_coef, intercept = dual_coef[:, 0], intercept[0]
        if is_dask(X):
            X = X.compute()  # the model holds the training rows, as numpy's does (predictions need them)
        fitted.update(
            kernel_=kernel,
            X_fit_=X,
            intercept_=intercept,
            dual_coef_=dual_coef,
            n_iter_=done + sol.n_iter,
            batch_size_=sol.batch_size,
            n_regularized_=sol.n_regularized,
            n_updates_=init_count + (0 if self.solver == "exact" else self.n_averaged * sol.n_iter),
        )
        if sol.residual_history is not None:
            fitted["residual_history_"] = sol.residual_history
        if sol.update_history is not None:
            fitted["update_history_"] = sol.update_history
        runs = sol.residual_history if sol.residual_history is not None else sol.update_history
        if runs is not None:  # the library's convention: 1-d for one run, a list of 1-d for several
            runs = [h[~np.isnan(h)] for h in runs]
            previous = getattr(self, "objective_history_", None) if init is not None else None
            if previous is not None:  # a warm start continues the history, as n_iter_ continues
                before = previous if isinstance(previous, list) else [previous]
                skip = int(sol.residual_history is not None)  # a new residual history repeats the last one
                runs = [np.concatenate([a, b[skip:]]) for a, b in zip(before, runs)] if len(before) == len(runs) else runs
            fitted["objective_history_"] = runs[0] if len(runs) == 1 else runs
        return commit_fit(self, fitted, stale=self._FITTED)

    def _scores(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        # computed in the fit dtype, returned in the dtype of X (float64 in, float64 out)
        scores = kernel_predict(
            self.kernel_,
            X.astype(self.X_fit_.dtype, copy=False),
            self.X_fit_,
            self.dual_coef_,
            self.intercept_,
            max_memory=self.max_memory,
        )
        return check_finite_result(scores.astype(X.dtype, copy=False), "decision values")


_PARAMS_DOC = """
    kernel : Kernel or str, default="gaussian"
        ``sigma="median"`` (the default bandwidth) is resolved in ``fit`` (weighted by
        ``sample_weight``); the resolved copy is ``kernel_``. The paper's setting is the
        polynomial kernel <x, x'>^4 (eq. 64) on centred unit-norm inputs
        (:class:`kernelscale.preprocessing.CenterNormalize`), with float32: see
        ``benchmarks/bench_lssvm.py``.
    C : float > 0, default=10
        Regularisation, the paper's gamma: D = I / C in Theta (eq. 17); C = 1 is scikit-learn's
        ``KernelRidge(alpha=1)`` plus the bias. The paper's 1e4 (with its polynomial kernel on
        MNIST) interpolates small data sets with the default Gaussian kernel (diabetes, 331
        points: normalised test RMSE 1.73 against 0.87 at C = 10) and makes the system ill
        conditioned (94 iterations to reach tol at n = 3200 against 14); C = 10 was within
        1.1x of kernel ridge's error or better on the robustness suite's data sets
        (benchmarks/bench_robustness.py).
    solver : {"matching_pursuit", "kaczmarz", "kaczmarz_mp", "nystrom", "exact"}
        See :mod:`kernelscale.lssvm.estimators`. "exact" builds the n x n kernel matrix.
    batch_size : int >= 1 or "auto", default="auto"
        J, the number of rows of Theta per block; a number is clipped with a warning to
        n_samples + 1. "auto": n_samples + 1 up to 4096 rows, and up to 24576 rows when the
        iterative solvers run on the host (``device=None``) and the n x n system fits
        ``max_memory``; else 2000. With J = n_samples + 1 one block is the whole system and one
        iteration solves it, by a Cholesky factorisation of K + D (n^3 / 3 flops, about 0.3 s in
        all at n = 4000 on 2 cores; see :mod:`kernelscale.lssvm.estimators`), far less than the 10 to 60
        iterations of J = 2000 blocks (4 J^2 n flops each) that C = 10 needs to reach tol (at
        n = 16512, California housing at sigma = sqrt(10): 99 s for 100 iterations of blocks,
        20.3 s as one system, as long as exact kernel ridge, on 2 cores; the same RMSE).
    n_iter : int >= 1, default=100
        T, the most iterations per run (committee members for "nystrom"); ignored by "exact".
    tol : float > 0 or None, default=1e-4
        A run stops once the residual ||Z - Theta W||_F is at most tol ||Z||_F (matching
        pursuit, kaczmarz_mp) or the update ||W(t+1) - W(t)||_F at most tol ||W||_F
        (kaczmarz); ``n_iter_`` counts the iterations run. None runs all n_iter iterations.
        "nystrom" ignores it.
    n_averaged : int >= 1, default=1
        S, independently seeded solutions averaged (eq. 68).
    dtype : np.float32, np.float64 or None, default=None
        Dtype of every array of the fit and of predictions. None follows the input: float32
        stays float32, anything else float64 (the paper computes in float32).
    max_memory : int, str or None
        Memory budget ("2GB", bytes; None is half the available memory). ``fit`` estimates its
        memory (:func:`lssvm_fit_memory`) before allocating and fails naming batch_size / dtype;
        predictions run in row blocks within it.
    device : None, "auto", "cpu", "cuda" or "cuda:N", default=None
        Where kernel and feature blocks are computed (README, "GPUs"): None is numpy on the host
        (a torch tensor as input selects its device); the others need torch.
    random_state : int, RandomState or None
        Seeds the block draws (and the median heuristic).
    verbose : int, default=0
        1 shows a progress bar with the residual (or update) norm.
    callback : callable or None
        Called after every iteration with a dict ("iteration", "objective" — the residual or
        update norm, None for "nystrom" —, "run", "step", "residual"/"update", "coef");
        returning True stops the fit (the average of the runs so far is kept).
    warm_start : bool, default=False
        Start from the previous solution when the new problem has the same shape and run the
        iterations missing to reach ``n_iter`` in total (new blocks are drawn; for "nystrom" new
        members join the committee). The residual of the warm start costs one blocked pass over
        the kernel matrix.

    Conventions: sample_weight weights the squared errors (D = diag(1 / (C s_i)), see the
    module docstring); zero weights drop samples. float32 is kept end to end when asked.
"""

_ATTRS_DOC = """
    kernel_ : Kernel
    X_fit_ : ndarray (n_fit, n_features), the training points with positive weight (gathered at
        the end of a fit on a dask X, as predictions need them).
    dual_coef_ : ndarray, A of eq. 19.
    intercept_ : ndarray, b of eq. 19.
    n_iter_ : int, iterations run so far (per run of ``n_averaged``), warm starts included.
    n_updates_ : int, block updates (committee members) so far, warm starts included.
    batch_size_ : int, J actually used.
    n_regularized_ : int, block solves that needed a ridge.
    residual_history_ : ndarray (n_averaged, n_iter + 1), ||Z - Theta W||_F (matching pursuit
        and kaczmarz_mp); non-increasing (eq. 60).
    update_history_ : ndarray (n_averaged, n_iter), ||W(t+1) - W(t)||_F (kaczmarz and
        kaczmarz_mp); its squares sum to at most ||W(0) - W*||^2 (eq. 44).
    objective_history_ : ndarray or list of ndarray, the rows of residual_history_ if present,
        else of update_history_, without the iterations a callback cut: 1-d for one run
        (n_averaged=1), else one array per run.
    n_features_in_ : int
"""


class LSSVMClassifier(ClassifierMixin, _LSSVMBase):
    __doc__ = (
        """Multi-class LS-SVM (one-hot {0, 1} targets with bias, eqs. 3, 16-19), randomized solvers.

    ``decision_function`` gives the scores K(x, X) A + b (eq. 68 with the averaged W; for two
    classes, the difference of the two scores); ``predict`` their argmax (eq. 14);
    ``predict_proba`` their projection onto the probability simplex, as for every least-squares
    classifier of the library (eq. 15 as printed is not a normalised softmax).

    Parameters
    ----------"""
        + _PARAMS_DOC
        + """    class_weight : dict, "balanced" or None
        Multiplies the sample weights per class.

    Attributes
    ----------
    classes_ : ndarray (n_classes,)"""
        + _ATTRS_DOC
    )

    _parameter_constraints: dict = {
        **_LSSVMBase._parameter_constraints,
        "class_weight": [StrOptions({"balanced"}), dict, None],
    }

    def __init__(
        self,
        kernel="gaussian",
        *,
        C=10.0,
        solver="matching_pursuit",
        batch_size="auto",
        n_iter=100,
        tol=1e-4,
        n_averaged=1,
        dtype=None,
        max_memory=None,
        device=None,
        random_state=None,
        verbose=0,
        callback=None,
        warm_start=False,
        class_weight=None,
    ):
        self.kernel = kernel
        self.C = C
        self.solver = solver
        self.batch_size = batch_size
        self.n_iter = n_iter
        self.tol = tol
        self.n_averaged = n_averaged
        self.dtype = dtype
        self.max_memory = max_memory
        self.device = device
        self.random_state = random_state
        self.verbose = verbose
        self.callback = callback
        self.warm_start = warm_start
        self.class_weight = class_weight

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit on X (n, d) and class labels y (n,), with optional sample weights."""
        X, y, fitted = validate_fit_data(self, X, y, dtype=[np.float64, np.float32])
        classes, codes = encode_classes(y)
        sample_weight = fit_weights(sample_weight, self.class_weight, X, codes, classes)
        dtype = self._work_dtype(X)
        need = _class_bytes(X.shape[0], classes.size, np.dtype(dtype).itemsize, self.solver, self.n_averaged)
        check_class_memory(need, self.max_memory, classes.size, "the one-hot targets and the LS-SVM state")
        Y = one_hot(codes, classes.size, dtype)
        return self._fit_prepared(X, Y, classes, sample_weight, fitted)

    def _fit_prepared(self, X, Y, classes, sample_weight, fitted):
        """The fit on validated X, one-hot targets Y (n, k) and weights: numpy arrays, or dask
        arrays with X's row chunks (:mod:`kernelscale.dask.fit`), solved over the chunks."""
        fitted["classes_"] = classes
        return self._fit_system(X, Y, sample_weight, fitted)

    def decision_function(self, X):
        """Scores (n, n_classes); for two classes the (n,) difference score_1 - score_0."""
        scores = self._scores(X)
        if self.classes_.size == 2:
            return scores[:, 1] - scores[:, 0]
        return scores

    def predict(self, X):
        """The class with the largest score (eq. 14)."""
        scores = self._scores(X)
        return self.classes_[np.argmax(scores, axis=1)]

    def predict_proba(self, X):
        """The scores (least-squares fits of one-hot codes) projected onto the probability
        simplex, the library's rule for least-squares scores (paper 5); its argmax is
        ``predict``."""
        return project_simplex(self._scores(X))

    def predict_log_proba(self, X):
        with np.errstate(divide="ignore"):  # a projection puts exact zeros: log 0 = -inf
            return np.log(self.predict_proba(X))


class LSSVMRegressor(MultiOutputMixin, FiniteR2Mixin, RegressorMixin, _LSSVMBase):
    __doc__ = (
        """LS-SVM regression with bias (eqs. 16-19 with real-valued targets), randomized solvers.

    Native multi-output: y of shape (n, k) solves the k systems together.

    Parameters
    ----------"""
        + _PARAMS_DOC
        + """
    Attributes
    ----------"""
        + _ATTRS_DOC
    )

    def __init__(
        self,
        kernel="gaussian",
        *,
        C=10.0,
        solver="matching_pursuit",
        batch_size="auto",
        n_iter=100,
        tol=1e-4,
        n_averaged=1,
        dtype=None,
        max_memory=None,
        device=None,
        random_state=None,
        verbose=0,
        callback=None,
        warm_start=False,
    ):
        self.kernel = kernel
        self.C = C
        self.solver = solver
        self.batch_size = batch_size
        self.n_iter = n_iter
        self.tol = tol
        self.n_averaged = n_averaged
        self.dtype = dtype
        self.max_memory = max_memory
        self.device = device
        self.random_state = random_state
        self.verbose = verbose
        self.callback = callback
        self.warm_start = warm_start

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit on X (n, d) and y (n,) or (n, k), with optional sample weights."""
        X, y, fitted = validate_fit_data(self, X, y, dtype=[np.float64, np.float32], multi_output=True,
                                         y_numeric=True)
        Y = np.asarray(y, dtype=self._work_dtype(X)).reshape(X.shape[0], -1)
        return self._fit_system(X, Y, sample_weight, fitted, squeeze=np.ndim(y) == 1)

    def _fit_prepared(self, X, y, classes, sample_weight, fitted):
        """The fit on dask arrays with X's row chunks (:mod:`kernelscale.dask.fit`), over the chunks."""
        Y = y[:, None] if y.ndim == 1 else y
        return self._fit_system(X, Y, sample_weight, fitted, squeeze=y.ndim == 1)

    def predict(self, X):
        """K(X, X_fit_) dual_coef_ + intercept_, in blocks under ``max_memory``."""
        return self._scores(X)
