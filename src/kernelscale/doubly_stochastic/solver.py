"""Doubly stochastic functional gradients on arrays (docs/algorithms.md section 2, Dai et al. 2014).

Problem (docs/algorithms.md section 2.1, eq. 1): min_f E_w[l(f(x), y)] + (nu / 2) |f|_H^2 for a
kernel with random features k(x, x') = E_omega[phi_omega(x) . phi_omega(x')]. Iteration t
(t = 0, 1, ...) draws a mini-batch B_t and the feature block omega_t FROM SEED (seed, t)
(:func:`kernelscale.ops.feature_blocks.block_rng`), so the model is f(x) = sum_t phi_t(x) . alpha_t
with phi_t the regenerated block t; every pass of blocks over rows is a
:class:`kernelscale.ops.features.FeatureOperator` verb (``scores`` for f, ``transform`` for phi_t).

``solver="sgd"`` (Algorithm 1 of the paper with mini-batches and blocks of features,
docs/algorithms.md section 2.2)::

    f(x_b) = sum_{j<t} phi_j(x_b) . alpha_j                      (prediction, all earlier blocks)
    alpha_t = -gamma_t * sum_{b in B_t} w_b phi_t(x_b)^T l'(f(x_b), y_b) / |B_t|
    alpha_j <- (1 - gamma_t nu) alpha_j   for j < t

``solver="preconditioned"`` (the authors' released MNIST8M code, docs/algorithms.md section 2.2):
the same, but the new block's step is preconditioned by its weighted feature covariance,
alpha_t = -gamma_t (Phi^T W Phi / |B| + r I)^{-1} Phi^T W l' / |B|, with r = ``precond_ridge``
times the mean diagonal of that covariance (a relative ridge: docs/algorithms.md section 2.4).
With the squared loss and gamma_t = 1 the step is the ridge fit of the batch residual on the new
block. It fits each block's coefficients once (no later block revisits them except through the
decay) and its preconditioned step does not follow the functional gradient of the regularised
objective, so its limit is not kernel ridge regression: it trades that guarantee for far fewer,
larger iterations (tested: its first step is the block's ridge fit; on sinc it beats "sgd" at
equal iterations). The authors use nu = 0, blocks of 4096 cos/sin pairs
(``feature_method="cossin"``), mini-batches of 32768, gamma_t = 1 / (1 + 1e-4 t) and the
regressor's step and ridge; pass those for their setting.

Step sizes: gamma_t = step_size / (1 + t / t0) (:func:`_step_size`), t counted in iterations; for
t >> t0 this is the paper's theta / t with theta = step_size * t0. What "auto" resolves to is in
:mod:`.defaults`.

Losses (:func:`_loss_and_grad`): "squared" l = |f - y|^2 / 2 (multi-output); "hinge"
l = max(0, 1 - y f) with y in {-1, +1} per class (one-vs-rest); "logistic" log(1 + exp(-y f))
per output; "softmax" the softmax cross-entropy over one-hot targets. At the stationary point of
the squared loss, (1/n) sum (f(x_i) - y_i) k(x_i, .) + nu f = 0, i.e. kernel ridge regression
(K + n nu I) c = y: ``ExactKernelRidge(alpha=n * nu)`` (tested).

Storage. Only the coefficient blocks (n_blocks, block_size, k) and the integer seed are kept:
memory O(t), independent of the input dimension d; every block's random weights are regenerated
from (seed, t) for each prediction (:func:`dsg_predict`), at O(t * n * block_size * d) work (that
is the method; nothing growing with d is kept in the fitted state). Within one call of
:func:`dsg_iterations` the regenerated frequencies are kept in a transient cache while it fits in
``cache_bytes``, and blocks are evaluated in groups of about GROUP_COLUMNS = 4096 columns (one
GEMM each): regenerating every earlier block at every iteration cost as much as the GEMMs, and
small per-block GEMMs run far below peak. The iterates are bit for bit those of pure regeneration
(tested).

The decay of all earlier coefficients is ONE running scalar (docs/algorithms.md section 2.3): the
stored (unscaled) blocks a_j give alpha_j = scale * a_j; a new block is stored as alpha_t / scale
after the decay is applied to scale. When scale drops below 1e-10 it is folded into the blocks
(one O(t) pass, rare: scale decays like (t0 / t)^(step_size t0 nu)).

Running scores (``running_scores=True``, :func:`_use_running_scores`). Rescoring each mini-batch
on all t earlier blocks costs batch * t * block_size feature evaluations at iteration t,
batch * n_iter^2 * block_size / 2 in all; on a small set it is cheaper to keep the unscaled scores
S = sum_j phi_j(x_i) a_j of EVERY training row and add each new block's phi_t(X) a_t to them
(n * block_size evaluations per iteration, n * n_iter * block_size in all: the cost of one
prediction on the training set), the mini-batch's f being scale * S[batch]. The iterates are
those of regeneration up to rounding (the same products summed in another order: tested to
1e-12). The new blocks' features on all rows are computed several blocks at a time
(:class:`_FeaturesAhead`: one GEMM and one cosine pass per group of Fourier blocks), since on a
few hundred rows one call per iteration costs more than its arithmetic. Both passes over the n
rows go through :mod:`kernelscale.ops`: the features are a ``transform``, and the update of S is a
map of the row executor (:func:`_block_scores`).

Divergence: when the coefficients or predictions are not finite, or a mini-batch loss exceeds 1e6
times the loss of f = 0, the run stops with a ValueError asking for a smaller step_size (the
caller's blocks are left intact).

A dask X runs the same iterations where its row chunks are (:mod:`.distributed`): each
mini-batch's scores and the new block's moments are sums over its rows, computed by the tasks of
the chunks that hold them; the step below (:func:`_new_block`, :func:`_check_step`,
:func:`_store_block`) is shared.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import expit, log_expit

from ..losses import softmax
from ..ops.backend import NUMPY
from ..ops.features import GROUP_COLUMNS, FeatureOperator, group_blocks
from ..ops.memory import parse_memory, release_freed
from ..ops.rows import HostRows, is_dask

__all__ = ["dsg_iterations", "dsg_predict", "dsg_memory"]

# "notes": benchmarks/studies/doubly_stochastic.md, the section named

#: a mini-batch loss over this many times the loss of f = 0 stops the run as a blow-up
_BLOWUP = 1e6
#: the running decay scalar is folded into the blocks below this
_RENORMALIZE_BELOW = 1e-10
#: bytes of new blocks' features on every row that the running scores compute ahead, in one call
#: (notes, "Running scores")
_AHEAD_BYTES = 8 * 2**20


# ----------------------------------------------------------------------------------------------
# losses: per-sample value and derivative with respect to the scores F (b, k)


def _loss_and_grad(loss, F, Y):
    """(per-sample loss (b,) float64, dl/dF (b, k) in F's dtype).

    ``loss``: "squared" (Y real), "hinge" (Y in {-1, +1}), "logistic" (k = 1, Y in {-1, +1}),
    "softmax" (Y one-hot).
    """
    if loss == "squared":
        G = F - Y
        return 0.5 * np.einsum("ij,ij->i", G, G, dtype=np.float64), G
    if loss == "hinge":
        margin = Y * F
        active = margin < 1
        value = np.where(active, 1 - margin, 0).sum(axis=1, dtype=np.float64)
        return value, np.where(active, -Y, 0).astype(F.dtype)
    if loss == "logistic":
        z = Y * F
        return -log_expit(z.astype(np.float64)).sum(axis=1), (-Y * expit(-z)).astype(F.dtype)
    m = F.max(axis=1, keepdims=True)
    lse = (m + np.log(np.exp(F - m).sum(axis=1, keepdims=True)))[:, 0]
    value = lse.astype(np.float64) - np.einsum("ij,ij->i", Y, F, dtype=np.float64)
    return value, softmax(F) - Y


def _zero_loss(loss, Y):
    """The mean over the rows of Y of the loss of f = 0: what ``_loss_and_grad(loss, 0, Y)``
    averages, in closed form (hinge: 1 per output; logistic: log 2 per output; softmax: log k)."""
    k = Y.shape[1]
    if loss == "squared":
        return 0.5 * float(np.einsum("ij,ij->", Y, Y, dtype=np.float64)) / Y.shape[0]
    return float({"hinge": k, "logistic": k * math.log(2.0), "softmax": math.log(k)}[loss])


# ----------------------------------------------------------------------------------------------
# sizes and rules of a run


def dsg_memory(batch_size, spec, k, n_blocks, solver="sgd"):
    """(held, need): bytes one iteration holds outside the feature operator — the coefficient
    store (n_blocks, D, k), the batch's scores and gradients, (preconditioned) the D x D
    covariance — and the least it needs in all, adding the operator's work: the parameters of a
    group of Fourier blocks (one block otherwise), the batch's new block of features and one row
    of a projection (FeatureOperator cuts the batch into row chunks that fit what it gets)."""
    D, item = spec.block_size, spec.dtype.itemsize
    held = n_blocks * D * k * item + batch_size * item * 4 * k
    if solver == "preconditioned":
        held += 2 * D * D * 8 + 2 * D * k * 8
    fourier = spec.method in ("cos", "cossin")
    group = group_blocks(spec) if fourier else 1
    columns = GROUP_COLUMNS if group == max(1, GROUP_COLUMNS // D) else group * D  # fewer on wide inputs
    row = item * (2 * max(columns, D) if fourier else D * (spec.workspace + 1))
    work = group * spec.block_bytes + batch_size * item * D * (spec.workspace + 1) + row
    return held, held + work


def _use_running_scores(n, batch, n_iter):
    """Whether a ``fit`` that starts a model on n numpy rows keeps running scores of all n rows
    (module docstring, "Running scores"): when 4 n <= batch * n_iter, i.e. n x n_iter block
    evaluations cost at most half the batch x n_iter^2 / 2 of rescoring each mini-batch on every
    earlier block. At the sgd solver's "auto" sizes: exactly for n <= 8192 (128 iterations of 256
    points; batch <= 256 and n_iter <= 256 rule out n >= 16385). At the preconditioned solver's
    (batches of 4096 or 8192, four passes): for every n up to its 200 iterations (n <= 204800)."""
    return 4 * n <= batch * n_iter


def _block_scores(Phi, coef):
    """phi_t(x_i) . a_t of one block on the rows of its features ``Phi``: the running scores'
    update, stated as a map over the rows (:class:`kernelscale.ops.rows.HostRows`)."""
    return Phi @ coef


def _step_size(step_size, t0, t):
    """gamma_t = step_size / (1 + t / t0)."""
    return step_size / (1.0 + t / t0)


# ----------------------------------------------------------------------------------------------
# the iterations


def grown_coef(coef, n_done, n_new, D, k, dtype):
    """The (blocks, D, k) coefficient buffer with room for ``n_new`` more blocks after the
    first ``n_done`` (doubled when it grows, so that warm starts append in amortised O(1))."""
    if coef is not None and coef.shape[0] >= n_done + n_new:
        return coef
    buf = np.zeros((max(n_done + n_new, 2 * n_done if coef is not None else 0), D, k), dtype=dtype)
    if coef is not None:
        buf[:n_done] = coef[:n_done]
    return buf


def dsg_iterations(
    X, Y, spec, *, loss, batches, coef=None, n_done=0, scale=1.0, sample_weight=None, nu=1e-5,
    step_size=1.0, t0=100.0, solver="sgd", precond_ridge=1e-3, monitor=None, cache_bytes=0, max_memory=None,
    running_scores=False, operator=None,
):
    """Run one iteration per entry of ``batches`` (index arrays or slices into X), continuing
    from ``n_done`` fitted blocks.

    Parameters
    ----------
    X : (n, d), C-contiguous, in spec.dtype
    Y : (n, k) targets in the loss's coding (see :func:`_loss_and_grad`)
    spec : FeatureBlockSpec
        Block t has the features of ``spec.block(t)``.
    coef : (capacity, D, k) buffer or None
        Unscaled blocks; the first ``n_done`` are the fitted ones. Never changed in place beyond
        row ``n_done`` (a renormalisation makes a new buffer), so a failed run leaves the first
        ``n_done`` blocks intact.
    scale : float
        The running decay scalar: alpha_j = scale * coef[j].
    cache_bytes : int
        Regenerated block parameters are kept (for this call only) while they fit in this many
        bytes; 0 regenerates every block at every use, as in the paper. Same result either way.
    max_memory : int, str or None
        Budget of a mini-batch's feature products (row chunks; see :mod:`kernelscale.ops.memory`).
    running_scores : bool, default=False
        (numpy X only) Keep the unscaled scores S = sum_j phi_j(X) coef[j] of EVERY row of X and
        add each new block's phi_t(X) coef[t] to them (n x block_size features per iteration,
        whose batch rows also give the gradient),
        so that a mini-batch's f is scale * S[batch] instead of a pass over all t earlier blocks
        (batch x t x block_size): cheaper when n < batch * t / 2 (module docstring, "Running
        scores"). The same iterates up to rounding (the sums are added in another order).
    operator : FeatureOperator of ``spec`` or None
        An operator an earlier call used, kept with its cached parameters (``partial_fit`` on a
        torch device: each block is drawn and copied to the device once in a stream of calls);
        its budget and cache size are set to this call's (dropping what no longer fits). None: a
        new one.

    Returns
    -------
    coef, n_done, scale, objective history (list, the weighted mini-batch loss before each
    update), stopped (True when the monitor's callback asked to stop).
    """
    n_new = len(batches)
    k = Y.shape[1]
    D = spec.block_size
    dtype = X.dtype
    coef = grown_coef(coef, n_done, n_new, D, k, dtype)
    if is_dask(X):
        raise ValueError("dsg_iterations takes numpy arrays; a dask X runs in "
                         "kernelscale.doubly_stochastic.distributed.chunk_iterations.")
    budget = parse_memory(max_memory)
    if operator is None:
        op = FeatureOperator(spec, budget, cache_bytes=cache_bytes)
    else:
        op = operator
        op.limit(budget, cache_bytes)
    S = op.scores(X, coef[:n_done], range(n_done)) if running_scores else None
    return _iterate(
        X, Y, spec, op, S, coef=coef, n_done=n_done, scale=scale, loss=loss, batches=batches,
        sample_weight=sample_weight, nu=nu, step_size=step_size, t0=t0, solver=solver,
        precond_ridge=precond_ridge, monitor=monitor,
    )


def _new_block(backend, grad, C, gamma, solver, precond_ridge, D, dtype):
    """alpha_t from the new block's mean gradient ``grad`` (D, k) and (preconditioned) its
    weighted covariance ``C``: -gamma grad, or -gamma (C + r I)^{-1} grad with the relative ridge r."""
    if solver == "preconditioned":
        ridge = precond_ridge * max(float(C.diagonal().sum()) / D, np.finfo(np.float64).tiny)
        step = backend.ridge_solve(C, grad.astype(np.float64), ridge, overwrite=True)
        return (-gamma * step).astype(dtype)
    return -gamma * grad


def _check_step(alpha, scores_finite, value, zero_loss, t, step_size):
    """A ValueError when the iterates blew up at iteration t: non-finite coefficients or scores,
    or a mini-batch loss ``value`` over _BLOWUP times the largest loss of f = 0 seen."""
    finite = np.all(np.isfinite(alpha)) and scores_finite and math.isfinite(value)
    if not finite or value > _BLOWUP * max(zero_loss, np.finfo(np.float64).tiny):
        raise ValueError(
            f"the iterates blew up at iteration {t} (non-finite coefficients, or a mini-batch "
            f"loss of {value:.3g}, over {_BLOWUP:g} times the loss of f = 0): "
            f"step_size={step_size!r} is too large for this problem; pass a smaller step_size "
            f"(e.g. {step_size / 10:g}) or a larger t0."
        )


def _store_block(coef, t, alpha, scale, decay):
    """The decay applied to the running scale and alpha_t stored as coef[t] = alpha_t / scale:
    (coef, scale, factor), ``factor`` the scale folded into coef[:t] (a new buffer) when it fell
    below _RENORMALIZE_BELOW, else None."""
    dtype = coef.dtype
    scale *= decay
    factor = None
    if scale < _RENORMALIZE_BELOW:
        factor = np.asarray(scale, dtype=dtype)
        coef = coef.copy()  # new buffer: the caller's blocks stay valid if a later step fails
        coef[:t] *= factor
        scale = 1.0
    coef[t] = alpha / np.asarray(scale, dtype=dtype)
    return coef, scale, factor


def _iterate(X, Y, spec, op, S, *, coef, n_done, scale, loss, batches, sample_weight, nu, step_size, t0,
             solver, precond_ridge, monitor):
    """The loop of :func:`dsg_iterations`."""
    D = spec.block_size
    dtype = X.dtype
    history = []
    stopped = False
    zero_loss = 0.0  # largest mini-batch loss of f = 0 seen: the scale that flags a blow-up
    ahead = _FeaturesAhead(op, X, n_done + len(batches)) if S is not None else None
    every_row = HostRows.wrap(op) if S is not None else None  # the running scores' per-row update
    for batch in batches:
        Xb, Yb, wb = X[batch], Y[batch], None if sample_weight is None else sample_weight[batch]
        t = n_done
        if S is not None:  # the new block on every row: the batch's rows now, the running scores after the step
            F = S[batch] * np.asarray(scale, dtype=dtype)
            Phi_all = ahead(t)
            Phi = Phi_all[batch]
        else:
            F = op.scores(Xb, coef[:t], range(t))
            Phi = op.transform(Xb, [t], on_device=op.backend is not NUMPY)
            F *= np.asarray(scale, dtype=dtype)
        values, G = _loss_and_grad(loss, F, Yb)
        if wb is not None:
            values = values * wb
            G = G * wb.astype(dtype)[:, None]
        history.append(float(values.mean()))
        zero_loss = max(zero_loss, _zero_loss(loss, Yb))
        gamma = _step_size(step_size, t0, t)
        grad, C = _block_moments(op.backend, Phi, G, wb, solver == "preconditioned")
        alpha = _new_block(op.backend, grad, C, gamma, solver, precond_ridge, D, dtype)
        _check_step(alpha, np.all(np.isfinite(F)), history[-1], zero_loss, t, step_size)
        coef, scale, factor = _store_block(coef, t, alpha, scale, 1.0 - gamma * nu)
        if S is not None and factor is not None:
            S *= factor
        if S is not None:
            S += every_row.map(_block_scores, Phi_all, coef=coef[t])
            Phi_all = None  # a view of the features computed ahead (their window is replaced next)
        n_done = t + 1
        release_freed()
        if monitor is not None and monitor.update(
            objective=history[-1], step_size=gamma, scale=scale, n_blocks=n_done
        ):
            stopped = True
            break
    return coef, n_done, scale, history, stopped


class _FeaturesAhead:
    """phi_t(X) on every row of X for the blocks t < ``stop`` of the running scores, computed
    for several blocks at once when they are small (one GEMM and one cosine pass per group of
    Fourier blocks, instead of one call per iteration: on a few hundred rows the calls cost
    more than their arithmetic), within _AHEAD_BYTES and an eighth of the operator's budget."""

    def __init__(self, op, X, stop):
        self.op, self.X, self.stop = op, X, stop
        self.width = op.spec.n_features_out
        per_block = X.shape[0] * self.width * X.dtype.itemsize + op.spec.block_bytes  # features and parameters
        self.count = max(1, min(_AHEAD_BYTES, op.budget // 8) // per_block)
        self.first, self.Phi = 0, None

    def __call__(self, t):
        if self.Phi is None or not self.first <= t < self.first + self.Phi.shape[1] // self.width:
            # the caller is done with its views of the former window: the next one is written
            # into its buffer when it has the same size (a new array of the features of every row
            # was faulted in page by page at every iteration)
            blocks = range(t, min(t + self.count, self.stop))
            same = self.Phi is not None and self.Phi.shape[1] == len(blocks) * self.width
            buf = self.Phi if same and self.op.backend is NUMPY else None
            self.Phi = None  # one window is held at a time
            self.first, self.Phi = t, self.op.transform(self.X, blocks, out=buf)
        j = t - self.first
        return self.Phi[:, j * self.width : (j + 1) * self.width]


def _block_moments(backend, Phi, G, wb, preconditioned, divisor=None):
    """The new block's gradient Phi^T G / b (in Phi's dtype, a host array) and, for the
    preconditioned solver, its weighted covariance Phi^T W Phi / b (float64; else None), where
    Phi is; b is ``divisor`` (default: the rows of Phi; 1 for the sums of a dask task). Phi
    (b, D) is a host array, or the backend's array on a torch device: there the products run
    where Phi is, and only the D x k gradient crosses to the host (the covariance goes to
    ``backend.ridge_solve``, which solves on the device or the host by its size)."""
    b = Phi.shape[0] if divisor is None else divisor
    host = isinstance(Phi, np.ndarray)
    mm = np.matmul if host else backend.xp.matmul  # transposed operands as they are (no copy)
    grad = mm(Phi.T, G if host else backend.asarray(G))
    grad = grad if host else backend.to_numpy(grad)
    grad /= b
    if not preconditioned:
        return grad, None
    if wb is not None:
        root = np.sqrt(wb).astype(G.dtype)[:, None]
        if host:
            Phi = Phi * root
        else:
            Phi *= backend.asarray(root)  # the caller's Phi is not used again
    C = mm(Phi.T, Phi)
    if host:
        return grad, C.astype(np.float64) / b
    C = backend.asarray(C, np.float64)  # a new array: C was in Phi's dtype, or is the product just made
    C /= b
    return grad, C


# ----------------------------------------------------------------------------------------------
# predictions


def dsg_predict(X, spec, coef, scale, max_memory=None, operator=None):
    """f(X) (n, k) in X's dtype: Algorithm 2, every block regenerated once from its seed and
    applied to row chunks that fit in ``max_memory``. ``operator``: an estimator's kept operator
    of ``spec`` on a torch device (:mod:`.estimators`, "Streaming on a GPU"), whose blocks are
    drawn at its first use and kept on the device within half of ``max_memory``."""
    budget = parse_memory(max_memory)
    if operator is None:
        op = FeatureOperator(spec.astype(X.dtype), budget, group=False)
    else:
        op = operator
        op.limit(budget // 2, budget // 2)
    F = op.scores(X, coef, range(coef.shape[0]))
    F *= np.asarray(scale, dtype=X.dtype)
    return F
