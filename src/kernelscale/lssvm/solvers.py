"""The solvers of the multi-class LS-SVM of paper 4 (docs/algorithms.md section 4): the Nystrom
committee, block Kaczmarz, block matching pursuit, their hybrid, and the exact dense solve, on the
system Theta W = Z of eqs. 16-19 (:mod:`kernelscale.lssvm.system`).

The randomized solvers draw blocks s of J indices from ALL n + 1 rows of Theta, bias row
included, as the paper does (its blocks come from a permutation of the N + 1 indices, eq. 26 ff.;
docs/algorithms.md section 4.2): a random permutation is cut into floor((n + 1) / J) contiguous
blocks, then reshuffled. Each block's rows Theta[s, :] are computed on the fly under the budget;
its J x J Gram matrix G = Theta[s, :] Theta[s, :]^T is scaled to unit diagonal (the paper's
unit-norm rows, eqs. 35-37, which leave the block projection unchanged) and factorised by Cholesky
in float64 (:class:`kernelscale.lssvm.cholesky.BlockGramCholesky`):

- ``"kaczmarz"`` (eqs. 39-47): W <- W + Theta[s, :]^T G^{-1} (Z_s - Theta[s, :] W), the block
  projection of the row-normalised system; ||W - W*|| never increases (eq. 44).
- ``"matching_pursuit"`` (eqs. 56-60): R = Z - Theta W kept; Q = pinv(Theta[:, s]) R =
  G^{-1} Theta[s, :] R; W_s <- W_s + Q; R <- R - Theta[:, s] Q; ||R|| never increases (eq. 60).
- ``"kaczmarz_mp"``: one Kaczmarz step then one matching-pursuit step on the same block and the
  same factorisation. The Kaczmarz update Theta[s, :]^T V is dense, so keeping R = Z - Theta W
  exact needs Theta times it: one full blocked kernel product per iteration (about (n + 1) / J
  extra kernel blocks). No cheaper exact update exists (it would need rows of Theta^2).
  Deviation (docs/algorithms.md sections 4.3-4.4): the paper's two unit steps can DIVERGE
  (Kaczmarz contracts ||W - W*||, matching pursuit ||Theta (W - W*)||, and their composition
  contracts neither; e.g. n = 200, J = 20, Gaussian kernel, see tests). Here the Kaczmarz
  direction gets the step length that minimises ||R|| (free, as Theta times the update is
  computed anyway), so the residual never increases.
- ``"nystrom"`` (eqs. 26-28): committee members W_t = pinv(Theta_JN) Theta_JJ pinv(Theta_NJ) Z
  = Theta[s, :]^T G^{-1} Theta[s, s] G^{-1} Theta[s, :] Z, one block per member. Deviation: the
  committee is the AVERAGE of the members: eq. 28 prints their sum, which has the same argmax
  but T times the scale, wrong for regression and for probabilities.
- ``"exact"``: the dense Cholesky solve of :func:`kernelscale.exact.exact_lssvm` (n x n memory;
  with sample weights :func:`exact_weighted_lssvm`).

When one block is the whole system (J = n + 1, what ``batch_size="auto"`` gives up to 4095
samples, and up to 24575 when the n x n arrays fit the budget:
:func:`kernelscale.lssvm.memory.auto_batch_size`), the three iterative solvers' steps coincide:
W <- W + Theta^{-1} (Z - Theta W). It is then computed without the Gram matrix G = Theta Theta^T,
by one in-place float64 Cholesky of H = K + D and the bias by its Schur complement
(:class:`kernelscale.lssvm.cholesky.WholeSystemCholesky`), each iteration a pair of triangular
solves and a product with H (4 n^2 k flops), with the same line search, histories and stopping
rules. When H is not positive definite or singular to float64 precision the block path runs
instead, with its ridge and line search. "nystrom" keeps the block path.

sample_weight with integer weights is exactly equivalent to repeating samples for the LS-SVM
solution, which the iterative solvers converge to; the Nystrom committee is an approximation
whose blocks depend on the rows, so for it the equivalence holds only as J -> n + 1.

Each update is scaled per output column by an exact line-search factor alpha, computable from
quantities the step already has (docs/algorithms.md section 4.4): the step length minimising
||W - W*|| for Kaczmarz (Theta[s, :] W* = Z_s is known) and ||R|| for matching pursuit. With an
exact J x J solve alpha = 1, the paper's step; when the solve had to be regularised (a singular
block, e.g. duplicate samples, or float32 rounding) it keeps eqs. 44 and 60 true. A block Gram
matrix that is singular to working precision gets a ridge (one RuntimeWarning per fit; the count
is ``n_regularized``).

``n_averaged`` = S > 1 averages S independently seeded solutions (eq. 68).

On a dask X chunked by rows (:mod:`kernelscale.lssvm.distributed`) the same solvers run over the
chunks: the blocks drawn are numpy's, the J sampled rows of X (J x d) are shipped to every chunk
task, each chunk keeps its part K(X_c, X_J) + D of the block and returns its part of the J x J
Gram matrix G and of Theta[s, :] W; W and the residual R stay partitioned like X; the J x J
factorisation and solves run here. The hybrid's full product Theta dW is one task per pair of row
chunks. The model equals numpy's up to the order of the sums (1e-8 relative in float64). When one
block is the whole system (``solver="exact"``, or J = n + 1) the rows are gathered and numpy's
solve runs on them: it needs an n x n block anyway. Either way the fitted model holds the training
rows and the dual coefficients (n x d and n x k), as numpy's does, since predictions need them:
they are gathered once, at the end of the fit.

Cost of one iteration (n samples, d features, J = batch_size, k outputs): the J x n kernel block
(2 J n d flops, one GEMM) and its Gram matrix G (J^2 n flops, a symmetric rank-k update) dominate;
both are needed by the exact block projections (pinv of a J x n block). The float64 J x J
Cholesky factorisation (J^3 / 3) and the k-column products add little (a profile on MNIST is in
benchmarks/studies/lssvm.md). The hybrid also needs one full product with Theta (2 n^2 d), about
(n + 1) / J times the cost of a block.

The solvers take the memory budget in bytes; :func:`solve_lssvm`, a public entry, also accepts
the user's forms of ``max_memory`` and resolves them once.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np
from sklearn.utils import check_random_state

from ..base.monitor import IterationMonitor, check_callback
from ..base.validation import as_float_array, check_positive
from ..exact import exact_lssvm, kernel_ridge_dual
from ..kernels import make_kernel
from ..ops.backend import NUMPY
from ..ops.kernel import row_width
from ..ops.memory import parse_memory
from ..ops.rows import executor, is_dask
from .cholesky import BlockGramCholesky, WholeSystemCholesky
from .distributed import DaskSystem
from .memory import check_fit_memory, state_bytes
from .system import ThetaSystem, lssvm_diagonal

__all__ = ["SOLVERS", "ITERATIVE", "LSSVMSolution", "solve_lssvm", "exact_weighted_lssvm"]

SOLVERS = ("matching_pursuit", "kaczmarz", "kaczmarz_mp", "nystrom", "exact")
#: the solvers that iterate on one system (their steps coincide on a whole-system block)
ITERATIVE = ("matching_pursuit", "kaczmarz", "kaczmarz_mp")


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
    X = as_float_array(X, "X", accept_sparse=True)
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
    max_memory : int (bytes), str or None. The budget in bytes, as the estimators pass it after
        resolving their ``max_memory`` once; a direct call may also give "2GB" or None (half of
        the memory available), resolved once here. The fit fails at once, naming batch_size, when
        it cannot run within this budget (see :func:`kernelscale.lssvm.memory.lssvm_fit_memory`).
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
        n = X.shape[0]
        check_fit_memory(n, X.shape[1], Y.shape[1] if Y.ndim == 2 else 1, min(int(batch_size), n + 1), X.dtype,
                         kernel, solver, n_averaged, budget)
        X, Y, sample_weight = executor(budget, X).value(X, Y, sample_weight)
        distributed = False
    if distributed:
        dtype = X.dtype
        n, d = X.shape
        if Y.ndim not in (1, 2) or Y.shape[0] != n:
            raise ValueError(f"Y must have shape ({n},) or ({n}, k) to match X, got {Y.shape}.")
    else:
        X = as_float_array(X, "X", accept_sparse=True)
        dtype = X.dtype
        n, d = X.shape[0], row_width(X)  # memory estimates: a sparse row counts its stored values
        Y = np.asarray(Y, dtype=dtype)
        if Y.ndim not in (1, 2) or Y.shape[0] != n:
            raise ValueError(f"Y must have shape ({n},) or ({n}, k) to match X, got {Y.shape}.")
        Y = Y.reshape(n, -1)
        if sample_weight is not None:
            sample_weight = np.asarray(sample_weight, dtype=np.float64)
            if sample_weight.shape != (n,) or not np.all(sample_weight > 0):
                raise ValueError("sample_weight must have shape (n,) with positive entries; drop zero weights first.")
    k = Y.shape[1] if Y.ndim == 2 else 1  # a 1-d dask Y becomes a column in the system's vector Z

    if solver == "exact":
        check_fit_memory(n, d, k, n, dtype, kernel, solver, n_averaged, budget)
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
    check_fit_memory(max(X.chunks[0]) if distributed else n, d, k, J, dtype, kernel, solver, n_averaged, budget)

    if distributed:  # the same solvers on W, R, Z split into the bias row and the row chunks
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
        held = state_bytes(n, k, J, dtype.itemsize, solver, n_averaged)
        system = ThetaSystem(kernel, X, lssvm_diagonal(n, C, sample_weight, dtype), budget, held)
    small = BlockGramCholesky()

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
    if not distributed and J == n + 1 and solver in ITERATIVE and system.op.backend is NUMPY:  # host Cholesky
        whole = WholeSystemCholesky(system)
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
                steps_done = _run_whole(whole, Z, W, solver, T, monitor, run, hist_r, hist_u, tol)
            elif solver == "nystrom":
                W, steps_done = _nystrom_committee(system, Z, blocks, T, small, monitor, run)
            else:
                W = _zeros_like(Z) if W0 is None else W0.copy()
                hist_r = None if res_hist is None else res_hist[run]
                hist_u = None if upd_hist is None else upd_hist[run]
                steps_done = _run_blocks(system, Z, W, solver, blocks, T, small, monitor, run, hist_r, hist_u, tol)
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


def _run_whole(whole, Z, W, solver, T, monitor, run, hist_r, hist_u, tol):
    """One run from W (updated in place): T iterations W <- W + alpha Theta^{-1} R with the
    residual R = Z - Theta W, the matching-pursuit step with the whole system as its block;
    Kaczmarz's and the hybrid's steps are the same step there. alpha minimises ||R|| (1 up to
    rounding). Histories and stopping rules as in :func:`_run_blocks`."""
    use_k = solver in ("kaczmarz", "kaczmarz_mp")
    use_mp = solver in ("matching_pursuit", "kaczmarz_mp")
    z_norm = float(np.linalg.norm(Z))
    R = Z.copy() if not W.any() else Z - whole.dot(W)
    if use_mp:
        hist_r[0] = np.linalg.norm(R)
    for t in range(T):
        Q = whole.solve(R)
        dR = whole.dot(Q)
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


def _run_blocks(system, Z, W, solver, blocks, T, small, monitor, run, hist_r, hist_u, tol=None):
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
        rows = system.rows(block, dot=R if use_mp and not use_k else None)  # the product ahead: one round trip
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


def _nystrom_committee(system, Z, blocks, T, small, monitor, run):
    """The average of T committee members W_t = pinv(Theta_JN) Theta_JJ pinv(Theta_NJ) Z (eq. 27)."""
    total = _zeros_like(Z)
    for t in range(T):
        rows = factor = None  # release the previous block and factor before the next ones
        rows = system.rows(next(blocks), dot=Z)
        factor = small.factor(rows.gram())
        x = small.solve(factor, rows.square() @ small.solve(factor, rows.dot(Z)))
        total += rows.tdot(x)
        # "coef" is the committee so far (an (n + 1) x k copy: negligible next to the J x n block)
        if monitor.update(run=run, step=t + 1, objective=None, coef=_live(total / (t + 1)) if monitor.callback else None):
            return total / (t + 1), t + 1
    return total / T, T


# ----------------------------------------------------------------------------------------------
# the steps' arithmetic on (n + 1) x k vectors


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
