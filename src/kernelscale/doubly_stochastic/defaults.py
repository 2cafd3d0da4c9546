"""What the doubly stochastic estimators' "auto" parameters resolve to (docs/algorithms.md section 2.4).

Every rule here is a plain function of the training set's size and the loss. It is resolved once,
when a model starts (``fit``, or the first ``partial_fit`` call), and the estimator keeps the
result in ``solver_``, ``t0_`` and ``step_size_``. The numbers were chosen on held-out parts of
the training data (benchmarks/studies/dsg_defaults.py, benchmarks/papers/dsg.py). The measurements
and the history behind each constant are in benchmarks/studies/doubly_stochastic.md.

``solver="auto"``: "preconditioned" for a ``fit`` on at least :data:`AUTO_PRECONDITIONED_ROWS`
samples, "sgd" on fewer and for ``partial_fit`` (which does not know n). The preconditioned step
overfits sets of a few hundred rows and is as good or better from a few thousand.

Sizes (``n_iter="auto"``, :func:`dsg_auto_sizes`). A fit costs about
batch x n_iter^2 x block_size / 2 feature evaluations (iteration t scores its batch on all t
earlier blocks), and a prediction costs n_iter x block_size per row, so the sizes follow n:

- "sgd": two passes, n_iter = ceil(2 n / b), kept within [128, 256] iterations. When block_size
  is "auto" too, blocks of ceil(F / n_iter) features (at most 256) for F = 4 n total features
  within [4096, 51200]. The error of "sgd" follows the number of iterations first (each is one
  mean-gradient step on the function), so even tiny sets get 128 of them, where they are cheap.
  Examples: iris and diabetes 128 x 32, n = 4000 128 x 125, adult 255 x 201, MNIST 256 x 200.
- "preconditioned": four passes, at most 200 iterations, blocks of 1024 and batches of
  4 x block_size (the authors' 32768 points per 8192 columns). With the squared loss on at most
  8192 rows and batch_size "auto" too, blocks of 2048: its four steps are full-batch steps, each
  the ridge fit of the whole residual on a fresh block.
- ``partial_fit`` does not know n: its "auto" block is :data:`AUTO_BLOCK` of the solver. An
  explicit n_iter keeps that block too.

Step sizes: gamma_t = step_size / (1 + t / t0) (the schedule of :mod:`.solver`).

- ``t0="auto"``: 100 for "sgd". For "preconditioned", the mini-batches of one pass,
  ceil(n / batch_size), so gamma_t is about step_size / (passes done): the paper's theta / t with
  t counted in epochs, and within the first pass the step stays within a factor 2 of step_size,
  as in the authors' run. The first ``partial_fit`` call counts as one pass; pass t0 explicitly
  when the first chunk is not a pass-sized sample (then ``partial_fit`` over chunks equals
  ``fit`` with the same t0). The authors' gamma_t = 1 / (1 + 1e-4 t) is nearly constant over the
  many passes we run, and under a constant step the error random-walks instead of converging.
- ``step_size="auto"`` of "preconditioned": 1 with the squared loss (the step is then the
  block's ridge fit of the batch residual); 0.5 with the classification losses, whose
  subgradients have no curvature to set that length (with ``precond_ridge=1e-2``, ten times the
  regressor's).
- ``step_size="auto"`` of "sgd" with the squared loss (:func:`curvature_step`): on a mini-batch a
  step gamma multiplies the residual along the top eigenvector of Phi^T W Phi / b by
  1 - gamma lambda_1, so a step above 2 / lambda_1 diverges, and lambda_1 depends on the kernel
  (about 0.4 with the median bandwidth, up to 1 for wide ones, more for unnormalised kernels).
  The step is 1.5 / (lambda_1 + nu), lambda_1 read from block 0's covariance on the first
  mini-batch, at most 0.5 / nu.
- ``step_size="auto"`` of "sgd" with the hinge and two-class logistic losses (derivative bounded
  by 1): 10; with the softmax over more than two classes, whose derivative is only about 1/k per
  wrong class: 30. These steps are far smaller per sample than Pegasos' 1 / (nu t): with the
  median-rule bandwidth the kernel matrix is nearly a constant plus a small part, and its
  lambda_1(K_B) / b (about 0.39) caps gamma whatever the batch size; the preconditioned solver is
  the fast one on such problems (docs/algorithms.md section 2.3).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import linalg

from ..ops.features import FeatureOperator

__all__ = ["dsg_auto_sizes", "auto_solver", "auto_t0", "auto_sgd_step", "curvature_step"]

# "notes": benchmarks/studies/doubly_stochastic.md, the section named (the measurements behind each constant)

#: solver="auto": "preconditioned" for a ``fit`` on at least this many rows, "sgd" below it, where
#: the preconditioned step overfits (notes, "The solver")
AUTO_PRECONDITIONED_ROWS = 2048
#: t0="auto" of "sgd": the step halves over 100 iterations (notes, "Step sizes")
AUTO_T0_SGD = 100.0
#: block_size="auto" where n does not size it (partial_fit, an explicit n_iter): the former fixed
#: sgd block; "preconditioned"'s block of a study on training data (notes, "Sizes that scale with the data")
AUTO_BLOCK = {"sgd": 256, "preconditioned": 1024}
#: the preconditioned block for the squared loss on at most AUTO_FULL_BATCH_ROWS rows with
#: batch_size "auto": four full-batch steps (notes, "Sizes that scale with the data")
AUTO_BLOCK_SQUARED_SMALL = 2048
AUTO_FULL_BATCH_ROWS = 8192
#: batch_size="auto" of "sgd" (notes, "Sizes that scale with the data")
AUTO_BATCH = 256
#: batch_size="auto" of "preconditioned": this many points per feature of a block, the authors'
#: 32768 points per 8192 columns (a batch no larger than the block makes its covariance singular)
AUTO_BATCH_PER_FEATURE = 4
#: "sgd" with the hinge or two-class logistic loss, whose derivative is bounded by 1 (notes, "Step sizes")
AUTO_STEP_LIPSCHITZ = 10.0
#: "sgd" with the softmax over more than two classes: its derivative is about 1/k per wrong class
#: (notes, "Step sizes")
AUTO_STEP_SOFTMAX = 30.0
#: "sgd" with the squared loss: step = this / (lambda_1 + nu); 2 / lambda_1 is the edge of
#: stability of that quadratic (notes, "Step sizes")
AUTO_STEP_CURVATURE = 1.5
#: "preconditioned" with the squared loss: the block's ridge fit of the batch residual
AUTO_PRECONDITIONED_STEP_SQUARED = 1.0
#: "preconditioned" with the classification losses, with precond_ridge 1e-2 (notes, "Step sizes")
AUTO_PRECONDITIONED_STEP_CLASSIFIER = 0.5
#: n_iter="auto" of "sgd": ceil(AUTO_PASSES n / batch) within [AUTO_MIN_ITER, AUTO_MAX_ITER] and,
#: with block_size "auto", F = AUTO_FEATURES_PER_SAMPLE n total features within
#: [AUTO_MIN_FEATURES, AUTO_MAX_FEATURES] (notes, "Sizes that scale with the data")
AUTO_PASSES = 2.0
AUTO_MIN_ITER = 128
AUTO_MAX_ITER = 256
AUTO_FEATURES_PER_SAMPLE = 4.0
AUTO_MIN_FEATURES = 4096
AUTO_MAX_FEATURES = 51200  # the former fixed 200 x 256: no model predicts slower than before
#: n_iter="auto" of "preconditioned": this many passes, at most AUTO_MAX_ITER_PRECOND iterations
AUTO_PASSES_PRECOND = 4.0
AUTO_MAX_ITER_PRECOND = 200


def auto_solver(n):
    """solver="auto" for a ``fit`` on n samples."""
    return "preconditioned" if n >= AUTO_PRECONDITIONED_ROWS else "sgd"


def dsg_auto_sizes(n, solver="sgd", batch_size="auto", block_size="auto", loss=None):
    """(n_iter, batch_size, block_size) that ``n_iter="auto"`` resolves to for ``n`` training
    samples (module docstring, "Sizes"); explicit sizes are kept.

    solver="sgd": b = min(batch, n) points per iteration, n_iter = ceil(2 n / b) (2 passes) within
    [128, 256], and an "auto" block of ceil(features / n_iter) features, at most 256, with
    features = 4 n within [4096, 51200].
    solver="preconditioned": its batch and block (4096 x 1024 unless given; with
    ``loss="squared"``, n <= 8192 and neither given, 8192 x 2048: four full-batch steps), and
    ceil(4 n / b) iterations (4 passes), at most 200.
    """
    n = int(n)
    if solver == "sgd":
        batch = AUTO_BATCH if batch_size == "auto" else int(batch_size)
        b = min(batch, n)
        n_iter = int(min(max(math.ceil(AUTO_PASSES * n / b), AUTO_MIN_ITER), AUTO_MAX_ITER))
        if block_size == "auto":
            features = min(max(AUTO_FEATURES_PER_SAMPLE * n, AUTO_MIN_FEATURES), AUTO_MAX_FEATURES)
            block = int(min(math.ceil(features / n_iter), AUTO_BLOCK["sgd"]))
        else:
            block = int(block_size)
        return n_iter, batch, block
    if block_size != "auto":
        block = int(block_size)
    elif solver == "preconditioned" and loss == "squared" and batch_size == "auto" and n <= AUTO_FULL_BATCH_ROWS:
        block = AUTO_BLOCK_SQUARED_SMALL
    else:
        block = AUTO_BLOCK[solver]
    batch = AUTO_BATCH_PER_FEATURE * block if batch_size == "auto" else int(batch_size)
    n_iter = int(min(max(math.ceil(AUTO_PASSES_PRECOND * n / min(batch, n)), 1), AUTO_MAX_ITER_PRECOND))
    return n_iter, batch, block


def auto_t0(solver, n, batch):
    """t0="auto" for a model started on n samples in mini-batches of ``batch``: AUTO_T0_SGD for
    "sgd"; the mini-batches of one pass for "preconditioned" (module docstring)."""
    if solver == "sgd":
        return AUTO_T0_SGD
    return float(-(-n // min(batch, n)))


def auto_sgd_step(loss):
    """step_size="auto" of "sgd" for the classification losses ("hinge", "logistic", "softmax")."""
    return AUTO_STEP_SOFTMAX if loss == "softmax" else AUTO_STEP_LIPSCHITZ


def curvature_step(Xb, wb, spec, budget, nu):
    """step_size="auto" of "sgd" with the squared loss: 1.5 / (lambda_1 + nu), lambda_1 the top
    eigenvalue of block 0's weighted feature covariance Phi^T W Phi / b on the first mini-batch
    (``Xb``, weights ``wb``), at most 0.5 / nu (the decay 1 - gamma nu stays >= 1/2). A first
    mini-batch of zero weights takes its rows' unweighted covariance: their weights carry no
    curvature, and nu alone made the step 0.5 / nu, which blew up the next batches."""
    Phi = FeatureOperator(spec, budget).transform(Xb, [0]).astype(np.float64)
    if wb is not None and np.any(np.asarray(wb) > 0):
        Phi *= np.sqrt(wb)[:, None]
    b, D = Phi.shape
    G = Phi @ Phi.T if b < D else Phi.T @ Phi  # the same nonzero eigenvalues; the smaller one
    curvature = max(linalg.eigvalsh(G, subset_by_index=[G.shape[0] - 1] * 2)[0] / b, 0.0) + nu
    if curvature <= np.finfo(np.float64).tiny:
        return 1.0
    step = AUTO_STEP_CURVATURE / curvature
    return float(min(step, 0.5 / nu)) if nu > 0 else float(step)
