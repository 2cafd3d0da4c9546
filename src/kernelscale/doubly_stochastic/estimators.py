"""Doubly stochastic functional gradients (ALGORITHMS.md section 2, Dai et al. 2014).

Problem: min_f E_w[l(f(x), y)] + (nu / 2) |f|_H^2 for a kernel with random features
k(x, x') = E_omega[phi_omega(x) . phi_omega(x')]. Iteration t (t = 0, 1, ...) draws a mini-batch
B_t and the feature block omega_t FROM SEED (seed, t)
(:func:`kernelscale.ops.feature_blocks.block_rng`), so the model is f(x) = sum_t phi_t(x) . alpha_t
with phi_t the regenerated block t; every pass of blocks over rows is a
:class:`kernelscale.ops.features.FeatureOperator` verb (``scores`` for f, ``transform`` for phi_t).

``solver="sgd"`` (Algorithm 1 of the paper, with mini-batches)::

    f(x_b) = sum_{j<t} phi_j(x_b) . alpha_j                      (prediction, all earlier blocks)
    alpha_t = -gamma_t * sum_{b in B_t} w_b phi_t(x_b)^T l'(f(x_b), y_b) / |B_t|
    alpha_j <- (1 - gamma_t nu) alpha_j   for j < t

``solver="preconditioned"`` (the authors' released MNIST8M code, ALGORITHMS.md section 2): the same,
but the new block's step is preconditioned by its weighted feature covariance,
alpha_t = -gamma_t (Phi^T W Phi / |B| + r I)^{-1} Phi^T W l' / |B|, with r = ``precond_ridge``
times the mean diagonal of that covariance. The authors add 1e-7 I to features [cos; sin] /
sqrt(4096), whose covariance has mean diagonal 1/8192: a relative ridge of 8.2e-4, hence the
regressor's default 1e-3 (ours have the same 1/block_size scale). With the squared loss and
gamma_t = 1 the step is the ridge fit of the batch residual on the new block. The classifier's
losses have no curvature to set that length: their defaults are half the step with ten times the
ridge (step_size "auto" 0.5, precond_ridge 1e-2; a study on training data, estimator docstring).
The authors use nu = 0, blocks of 4096 cos/sin pairs (``feature_method="cossin"``), mini-batches
of 32768, gamma_t = 1 / (1 + 1e-4 t) and the regressor's step and ridge; pass those for their
setting.
It fits each block's coefficients once (no later block revisits them except through the
decay) and its preconditioned step does not follow the functional gradient of the regularised
objective, so its limit is not kernel ridge regression: it trades that guarantee for far fewer,
larger iterations (tested: its first step is the block's ridge fit; on sinc it beats "sgd" at equal
iterations).

Step sizes: gamma_t = step_size / (1 + t / t0), t counted in iterations. For t >> t0 this is the
paper's theta / t with theta = step_size * t0. t0 = "auto" (resolved once, when a model starts,
and kept in ``t0_``): 100 for "sgd"; for "preconditioned", the number of mini-batches in one pass
over the data, ceil(n / batch_size), so gamma_t ~ step_size / (passes done): the paper's theta / t
decay with t counted in epochs, and within the first pass the step stays within a factor 2 of
step_size, as in the authors' run. ``partial_fit`` does not know n: its first call counts as one
pass (t0 = the mini-batches of that call); pass t0 explicitly when the first chunk is not a
pass-sized sample (then ``partial_fit`` over chunks equals ``fit`` with the same t0).
Why not the authors' t0 = 1e4 (gamma_t = 1 / (1 + 1e-4 t)): with 32768-point batches on MNIST8M's
8.1M points that is about 40 passes, and their run stops after ~100 iterations, 0.4 of a pass, so
the step is never decayed there; on the data sets we run over many passes it is a constant step,
under which the error does not converge but random-walks: over 18 passes on QM7 (2 iterations per
pass) the test MAE went from 36 to 486 kcal/mol, and adult's test error from 16.8% to 17.8%;
with t0 = one pass the QM7 MAE fell from 30 to 25 over 12 passes (t0 = 4 passes: flat at 35;
benchmarks/bench_dsg.py, tests/test_doubly_stochastic.py).
The "auto" sizes and sgd step (estimator docstring) were set from the one-pass results of
benchmarks/bench_dsg.py: the former defaults (step 1, batch = block = 256 for both solvers) left
sgd with the hinge loss at the trivial classifier on adult and made the preconditioned step
interpolate each batch (44.6% test error on adult).

Sizes that scale with the data (``n_iter="auto"``, the default; issues #17 and #18). A fit's
work is about batch * n_iter^2 * block_size / 2 feature evaluations (iteration t scores its batch
on all t earlier blocks) and a prediction's is proportional to n_iter * block_size, so the
former fixed 200 iterations of 256 x 256 (51200 features whatever n) took 11-40 s on sets of
100-4000 points where the exact solvers take 0.01-1 s. "auto" resolves, from the n of ``fit``
(:func:`dsg_auto_sizes`): for "sgd", two passes, n_iter = ceil(2 n / b), kept within [128, 256]
iterations, and, when block_size is "auto" too, blocks of ceil(F / n_iter) features (at most
256) for F = 4 n total features within [4096, 51200] (51200 is the former 200 x 256, so no
model is larger or predicts slower than before); for "preconditioned", four passes, at most 200
iterations, its block of 1024 (2048 for the squared loss on at most 8192 rows with batch_size
"auto" too: four full-batch steps, each the ridge fit of the whole residual on a fresh block;
QM7's validation MAE 18.8 -> 13.6 kcal/mol). A small set gets 128 iterations of small blocks (iris,
diabetes: 128 x 32 = 4096 features), n = 4000 128 x 125, adult (n = 32561) 255 x 201 and MNIST
256 x 200. Why (benchmarks/bench_dsg_defaults.py on held-out parts of the TRAINING data;
benchmarks/README.md, "Doubly stochastic defaults"): the error of "sgd" follows the number of
ITERATIONS (each is one mean-gradient step on the function) first: on digits' held-out part
16-64 iterations left 7-12.5% validation error whatever the features (1024-8192), 128-200
iterations of 4096 features 5.3-5.9% (the former 200 x 256: 4.7%); QM7's validation MAE was
85 / 71 / 63 / 57 kcal/mol at (iterations x block) 64 x 128 / 128 x 64 / 128 x 180 / 200 x 256;
so iterations stay at 128 or more even on tiny sets, where they are cheap. Then the features: at
128 iterations, 4096 / 8192 / 16384 features put friedman1 (n_fit 3000) at 1.73 / 1.56 / 1.43
times the exact peer's validation RMSE, hence F = 4 n; on adult (204 iterations) blocks of 128
left 16.51% validation error, blocks of 256 16.09%, and 3 passes did not help (16.26%), hence
two passes and blocks near 256 for large n. The price was fits of 0.5-1 s (n < 1000) and 3-4 s
(n = 4000) instead of 11-40 s; the running scores below take them to 0.03-0.07 s and 1-1.5 s.
``partial_fit`` does not know n: its "auto" blocks are 256, as before. An explicit n_iter keeps
the former "auto" block (256 for "sgd"), so explicit settings give the same results as before.

The solver (``solver="auto"``, the default; issues #17 and #18): the preconditioned solver for a
``fit`` on 2048 samples or more, sgd on fewer and for ``partial_fit`` (which does not know n).
On held-out parts of the training data (benchmarks/bench_dsg_defaults.py, part "solver";
benchmarks/README.md, "Doubly stochastic defaults") the preconditioned solver overfits sets of a
few hundred rows (diabetes: 1.98x the exact peer's RMSE, sgd 1.01x) and is as good or better
from 3000 rows (friedman1 0.66x vs 1.45x, 30 classes 19.6% vs 24.0%, MNIST 3.2% vs 10.8%),
except adult with the hinge loss (16.66% vs 16.25%, within the validation noise; 15.60% since
the classifier's step and ridge of session 15).

The regressor's intercept (issue #18, "targets centred internally"). Algorithm 1 has no constant
term, and a Gaussian model pays for one in its ridge and its steps. ``DoublyStochasticRegressor``
(``fit_intercept=True``, the default) fits f to the targets less ``intercept_``, their weighted
mean on the model's first mini-batch (``partial_fit``: its first call's first chunk), and
``predict`` adds it back. The first mini-batch holds the same rows for numpy and dask input
(unless a dask pass exceeds one fetch: then its windows order the rows), so the intercept is the
same too. On QM7's energies, whose mean lies 7 standard deviations from zero, the validation MAE
at the defaults fell from 21.4 to 18.8 kcal/mol. ``fit_intercept=False`` is the paper's
algorithm.

Running scores (issue #18, the time goal). Rescoring each mini-batch on all t earlier blocks costs
batch * t * block_size feature evaluations at iteration t, batch * n_iter^2 * block_size / 2 in
all; on a small set it is cheaper to keep the unscaled scores S = sum_j phi_j(x_i) a_j of EVERY
training row and add each new block's phi_t(X) a_t to them (n * block_size evaluations per
iteration, n * n_iter * block_size in all: the cost of one prediction on the training set), the
mini-batch's f being scale_ * S[batch]. ``fit`` does so (:func:`_use_running_scores`) when it
starts a model on numpy X, 4 n <= batch * n_iter (at least twice cheaper) and the n x k scores
plus one block's features over n rows fit in half the memory left beside the iteration. The
iterates are those of regeneration up to rounding (the same products summed in another order:
tested to 1e-12), and the "auto" sizes are unchanged: it is used for n <= 8192 at the defaults
and never for n > 16384 (adult, MNIST, the paper benchmarks run as before, bit for bit).
Profile (cProfile, defaults; regeneration): on diabetes (n = 331, 128 x 32) 95% of the 1.0 s fit
was the grouped GEMMs (63%) and cosines (32%) of rescoring batches of 256 on up to 4096
earlier features, the Python overhead of the 128 iterations about 0.03 s; running scores take
the fit to 0.04-0.07 s (iris, wine, breast_cancer 0.04-0.06 s). At n = 4000 (128 x 125) the
2.6-3.5 s became 1.0-2 s on a loaded 2-core machine: n x 16384 cosines (most of it) and
n x d x 16384 GEMM work, one (n, block_size) array per iteration, small enough that the threaded
cosine loses much of its speed when the cores are shared (digits: 1.0 s with numpy's cosine, 2.5
s with the threaded one at a load of 4). The new blocks' features on all rows are computed several
blocks at a time (:class:`_FeaturesAhead`, within 8 MB: one GEMM and one cosine pass per group of
Fourier blocks), since on a few hundred rows one call per iteration cost more than its
arithmetic (wine, 128 x 32: about 40 ms a fit, 22 ms after). ``partial_fit`` and warm starts
rescore as before.

Why the sgd step is so much smaller per sample than Pegasos' 1 / (nu t): a mini-batch mean
gradient step changes f along the kernel's top eigenfunction by gamma lambda_1, and with the
median-rule bandwidth lambda_1(K_B) / b is about 0.39 on adult, MNIST and QM7 (the kernel matrix is
nearly a constant plus a small part), so gamma is capped near 1 / (curvature * 0.39) whatever b;
the same mean-gradient steps on 2048 FIXED random features reached the same error as ours (MNIST
10-class, 20000 points, one pass, step 10: 14.2% fixed, 13.6% ours), i.e. batches of 256 are far
above the critical batch size (about 1 / 0.39 points) and one pass of mini-batch functional
gradient is slow on such problems: the preconditioned solver is the fast one there.
The steps were chosen on held-out parts of the training data (the study is recorded in
benchmarks/README.md, "Doubly stochastic defaults").
The squared loss has a curvature to read the step from: on a mini-batch, a step gamma multiplies
the residual along the top eigenvector of Phi^T W Phi / b by 1 - gamma lambda_1, so a step above
2 / lambda_1 diverges, and lambda_1 depends on the kernel (about 0.4 with the median bandwidth, up
to 1 for wide ones, more for unnormalised kernels). Its "auto" step is 1.5 / (lambda_1 + nu), with
lambda_1 from block 0's covariance on the first mini-batch, at most 0.5 / nu, resolved when a model
starts (``step_size_``).

Storage. Only the coefficient blocks (n_iter_, block_size, k) and the integer seed are kept:
memory O(t), independent of the input dimension d; every block's random weights are regenerated
from (seed_, t) for each prediction, at O(t * n * block_size * d) work (that is the method; nothing
growing with d is kept in the fitted state). Within one ``fit`` / ``partial_fit`` call the
regenerated frequencies are kept in a transient cache while it fits in ``max_memory`` (beside the
iteration's own workspace), and blocks are evaluated in groups of about 4096 columns (one GEMM
each): regenerating every earlier block at every iteration cost as much as the GEMMs themselves
for blocks of 256 features (profiled on MNIST), and small per-block GEMMs run far below peak.
The iterates are bit-for-bit those of pure regeneration (tested).
Streaming on a GPU (issue #17). With ``device="cuda"`` the products run on the GPU and the draws
on the host (the same blocks on every device), so redrawing all t earlier blocks at every
``partial_fit`` call of a stream would cost far more than the GPU's arithmetic. There a stream of
``partial_fit`` calls shares one operator: each group of blocks is drawn once, moved to the GPU
when complete and kept there while it fits in the cache budget (half of what a call leaves
spare of ``max_memory``, itself half the GPU's free memory by default). Host memory stays flat;
GPU memory grows with the blocks kept, O(t d), until the budget is reached, after which the
remaining blocks are redrawn per call. Predictions on the GPU keep theirs likewise (a second
operator, evaluating block by block as numpy does; within half of ``max_memory``): the first
call draws, later ones run the device's arithmetic only. The two share the budget: a call
counts what the other operator keeps, first cut to a quarter of the call's budget. On numpy and
on torch's CPU kernels every call redraws its blocks, as before (there the draws cost little
beside the products, and host memory stays flat). The kept blocks are not part of the model:
save, pickle and copies drop them, a fresh fit drops them, and results are the same with or
without them.
The decay of all earlier coefficients is ONE running scalar: the stored (unscaled) blocks a_j give
alpha_j = scale_ * a_j; a new block is stored as alpha_t / scale after the decay is applied to
scale. When scale drops below 1e-10 it is folded into the blocks
(one O(t) pass, rare: scale decays like (t0 / t)^(step_size t0 nu)).

Divergence: when the coefficients or predictions are not finite, or a mini-batch loss exceeds 1e6
times the loss of f = 0, the run stops with a ValueError asking for a smaller step_size (the
estimator keeps its previous state).

Dask (issue #15). ``fit`` and ``partial_fit`` take a dask X chunked by rows
(:mod:`kernelscale.dask.fit`): the batch indices are drawn as on numpy; the rows of a group of
consecutive batches (one pass at most, and what fits a quarter of the budget left beside the
iterations, at most ``FETCH_MAX_BYTES`` = 256 MB) are fetched with one dask compute
(:func:`_batch_rows`). When one pass holds more rows than one fetch, ``fit`` draws each pass
window by window (:func:`_epoch_windows`): the row chunks in a random order, cut into windows of
at most one fetch less a batch, each window's rows permuted, and fetches the rows window by
window, a batch that runs past a window taking its rest from the next. Each row still comes once
per pass, and each chunk is computed once per pass instead of for every fetch (a lazily
generated or out-of-core X would be regenerated or read in full per fetch); the client holds a
window of rows and the rest of a batch: before windows, a fetch of one pass of 1M virtual digits
(3.1 GB) took the client to 8.5 GB (1.45 GB with them; benchmarks/bench_scale.py). Until
session 12 a fetch was a group of whole batches, which ran over a window's end into the next
window and so computed the chunks of two windows: on 250k virtual digits not persisted (two
workers, batches of 1954, 256 iterations) 86 chunk computations in 6 fetches (36 s of fetching
in a 188 s fit) against 50 in 8 fetches now (28 s of 183 s); the rest of the fit is the
mini-batch scoring. When a pass fits one fetch the order is
numpy's permutation, so the model is numpy's. Without a distributed client
(the synchronous or threaded scheduler) every iteration then runs here on those rows exactly as on
numpy. With one (:class:`_DistributedScores`), the part that is nearly all of the work, scoring the
mini-batch on the t earlier blocks (batch x t x block_size x d multiply-adds at iteration t), runs
on the workers: the batch rows are scattered once per iteration to the workers used, the runs of
blocks that ``FeatureOperator.scores`` evaluates together (groups of GROUP_COLUMNS = 4096 columns,
one GEMM per row chunk) are cut into one contiguous range per worker of about equal columns, and
each task regenerates its blocks from (seed, block) (kept for the fit in a cache of at most an
eighth of its worker's memory limit: at 51200 x 784 float32 frequencies, 160 MB for the whole
model, so a worker rarely redraws) and returns one (batch, k) term per run. The client adds the
terms in the order ``scores`` adds them, so f, and the model, are numpy's bit for bit; meanwhile it
computes the new block's features on the batch (batch x block_size, for the gradient) and keeps
the O(t) coefficient update. A batch's features exist only one group at a time, in a task (one
row chunk of at most 64 MB of projections, ``PROJECTION_BYTES``); the client holds the batch rows,
its new block's features and the k-column terms. A small iteration (under 2e8 multiply-adds of
scoring, ``_DISTRIBUTED_SCORE_WORK``: a round trip costs milliseconds; the first t = 2-3 of
MNIST's 256 iterations at n = 60000) is scored here, with the same result. Measured
(benchmarks/bench_scale.py --part dsg, n = 60000, batch 469, 256 iterations of 200 features, on
the 2-core machine of the benchmarks): the workers' scoring made 1 -> 2 workers 1.15-1.2x faster
(50-53 s -> 42-46 s), where the client-side scoring was 1.0x (27-28 s both); the client's two
BLAS threads had both cores already, and one-thread workers on the same two cores scored about
1.4x slower per task than one process alone (the client's work between tasks, about 6 s per fit:
rows, the new block, the scatter; and uneven whole-group ranges), so on one 2-core host the
client-side fit was faster; the split pays where the workers have cores of their own. So the
workers score only when their threads outnumber the cores of the client's host
(:func:`_workers_outnumber_cores`); otherwise the client scores, as without a client. The
regenerated frequencies are not small next to the GEMM at these sizes (one thread, d = 784: 128
blocks of 200 drawn in 0.26 s, their scores on 469 rows 0.15 s cached, 0.46 s redrawn), hence the
workers' cache. The model is numpy's
bit for bit (with sample weights, up to the last bit of their total, summed over the chunks)
where numpy rescores its batches; a dask X never keeps running scores (they need every row at
every iteration), so on a set small enough for numpy to keep them ("Running scores") the two
agree up to rounding. n-sized inputs of the fit come from the chunks: n, the weights' total, the
labels, the median bandwidth (numpy's subsample gathered).

Losses: "squared" l = |f - y|^2 / 2 (multi-output); "hinge" l = max(0, 1 - y f) with y in {-1, +1}
per class (one-vs-rest); "logistic": log(1 + exp(-y f)) for two classes, the softmax
cross-entropy for more. At the stationary point of the squared loss,
(1/n) sum (f(x_i) - y_i) k(x_i, .) + nu f = 0, i.e. kernel ridge regression
(K + n nu I) c = y: ``ExactKernelRidge(alpha=n * nu)`` (tested).

Weights: ``fit`` rescales sample_weight to mean 1, so the objective is the weighted mean loss
sum_i w_i l_i / sum_i w_i (and a full batch equals repeating samples); ``partial_fit`` uses the
weights as given (mean 1 is the neutral scale).
"""

from __future__ import annotations

import collections
import logging
import math
import os
import threading
import time
import uuid
import warnings
from numbers import Integral, Real

import numpy as np
from scipy import linalg
from scipy.special import expit, log_expit
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, _fit_context
from sklearn.utils import check_random_state
from sklearn.utils._available_if import available_if
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.class_weight import compute_sample_weight
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, column_or_1d

from ..base.classifier import check_class_memory, one_hot, one_vs_rest_targets, require_two_classes
from ..base.monitor import IterationMonitor
from ..base.estimator import FiniteR2Mixin, commit_fit, resolve_kernel, target_means, warm_start_iterations
from ..losses import softmax
from ..base.device import DeviceMixin
from ..base.params import DEVICE_CONSTRAINT, KERNEL_CONSTRAINT, MEMORY_CONSTRAINT
from ..base.validation import check_finite_result, check_sample_weight, validate_data
from ..kernels import make_kernel
from ..ops.feature_blocks import FeatureBlockSpec, kernel_family, seed_from
from ..ops.backend import NUMPY, current_backend, device_type
from ..ops.features import GROUP_COLUMNS, FeatureOperator
from ..ops.memory import format_bytes, parse_memory
from ..ops.rows import DaskRows, executor, is_dask, total

__all__ = [
    "DoublyStochasticRegressor",
    "DoublyStochasticClassifier",
    "dsg_iterations",
    "dsg_auto_sizes",
    "dsg_predict",
    "dsg_memory",
    "SOLVERS",
]

logger = logging.getLogger(__name__)

SOLVERS = ("auto", "sgd", "preconditioned")
#: solver="auto": the preconditioned solver for a ``fit`` on at least this many rows, sgd below it
#: and for ``partial_fit`` (chosen on training data: benchmarks/bench_dsg_defaults.py, part "solver")
_AUTO_PRECONDITIONED_ROWS = 2048
_AUTO_T0_SGD = 100.0  # "preconditioned": the mini-batches of one pass (module docstring)
_AUTO_BLOCK = {"sgd": 256, "preconditioned": 1024}
#: the preconditioned solver's "auto" block for the squared loss on at most _AUTO_FULL_BATCH_ROWS
#: rows, whose four steps then take every row (batch 4 x 2048): QM7's validation MAE 18.8 -> 13.6
#: kcal/mol (exact kernel ridge: 12.4), the n = 3000 regression sets within +-3% or better
#: (benchmarks/bench_dsg_defaults.py, part "small-blocks")
_AUTO_BLOCK_SQUARED_SMALL = 2048
_AUTO_FULL_BATCH_ROWS = 8192
_AUTO_BATCH = 256  # sgd; "preconditioned": 4 * block_size, as the authors' 32768 points per 8192 columns
_AUTO_STEP_LIPSCHITZ = 10.0  # sgd with the hinge or two-class logistic loss (bounded derivative)
#: sgd with the softmax (logistic, > 2 classes): its derivative p - y is about 1/k per wrong class
#: where the one-vs-rest hinge's is 1 on every class (chosen on MNIST 10-class, module docstring)
_AUTO_STEP_SOFTMAX = 30.0
#: sgd with the squared loss: step = this / (lambda_1 + nu), lambda_1 from the first block's
#: covariance on the first mini-batch (2 / lambda_1 is the edge of stability for that quadratic)
_AUTO_STEP_CURVATURE = 1.5
#: n_iter="auto" (module docstring, "Sizes that scale with the data"): sgd runs
#: ceil(_AUTO_PASSES * n / batch) iterations within [_AUTO_MIN_ITER, _AUTO_MAX_ITER] and (block_size
#: "auto" too) blocks of ceil(features / n_iter) features, at most _AUTO_BLOCK["sgd"], with
#: features = _AUTO_FEATURES_PER_SAMPLE * n within [_AUTO_MIN_FEATURES, _AUTO_MAX_FEATURES];
#: "preconditioned" runs _AUTO_PASSES_PRECOND passes, at most _AUTO_MAX_ITER_PRECOND iterations
#: (its block: _AUTO_BLOCK, or _AUTO_BLOCK_SQUARED_SMALL).
_AUTO_PASSES = 2.0
_AUTO_MIN_ITER = 128
_AUTO_MAX_ITER = 256
_AUTO_FEATURES_PER_SAMPLE = 4.0
_AUTO_MIN_FEATURES = 4096
_AUTO_MAX_FEATURES = 51200  # the former 200 x 256: no model predicts slower than before
_AUTO_PASSES_PRECOND = 4.0
_AUTO_MAX_ITER_PRECOND = 200
_RENORMALIZE_BELOW = 1e-10
#: torch device types on which partial_fit and predictions keep their drawn blocks between calls
#: (module docstring, "Streaming on a GPU"); elsewhere the host's draws cost little beside the
#: products, and kept blocks would grow host memory with the stream
_KEEP_ON_DEVICES = frozenset({"cuda"})
_BLOWUP = 1e6
#: most bytes of rows (with their targets and weights) that one fetch from a dask X brings here;
#: a pass over more is drawn window by window of row chunks (module docstring, "Dask")
FETCH_MAX_BYTES = 256 * 2**20
_FLOAT_DTYPES = [np.float64, np.float32]


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
# the method on arrays


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
    group = max(1, GROUP_COLUMNS // D) if fourier else 1
    row = item * (2 * max(GROUP_COLUMNS, D) if fourier else D * (spec.workspace + 1))
    work = group * spec.block_bytes + batch_size * item * D * (spec.workspace + 1) + row
    return held, held + work


def dsg_auto_sizes(n, solver="sgd", batch_size="auto", block_size="auto", loss=None):
    """(n_iter, batch_size, block_size) that ``n_iter="auto"`` resolves to for ``n`` training
    samples (module docstring, "Sizes that scale with the data"); explicit sizes are kept.

    solver="sgd": b = min(batch, n) points per iteration, n_iter = ceil(2 n / b) (2 passes) within
    [128, 256], and an "auto" block of ceil(features / n_iter) features, at most 256, with
    features = 4 n within [4096, 51200].
    solver="preconditioned": its batch and block (4096 x 1024 unless given; with
    ``loss="squared"``, n <= 8192 and neither given, 8192 x 2048: four full-batch steps), and
    ceil(4 n / b) iterations (4 passes), at most 200.
    """
    n = int(n)
    if solver == "sgd":
        batch = _AUTO_BATCH if batch_size == "auto" else int(batch_size)
        b = min(batch, n)
        n_iter = int(min(max(math.ceil(_AUTO_PASSES * n / b), _AUTO_MIN_ITER), _AUTO_MAX_ITER))
        if block_size == "auto":
            features = min(max(_AUTO_FEATURES_PER_SAMPLE * n, _AUTO_MIN_FEATURES), _AUTO_MAX_FEATURES)
            block = int(min(math.ceil(features / n_iter), _AUTO_BLOCK["sgd"]))
        else:
            block = int(block_size)
        return n_iter, batch, block
    if block_size != "auto":
        block = int(block_size)
    elif solver == "preconditioned" and loss == "squared" and batch_size == "auto" and n <= _AUTO_FULL_BATCH_ROWS:
        block = _AUTO_BLOCK_SQUARED_SMALL
    else:
        block = _AUTO_BLOCK[solver]
    batch = 4 * block if batch_size == "auto" else int(batch_size)
    n_iter = int(min(max(math.ceil(_AUTO_PASSES_PRECOND * n / min(batch, n)), 1), _AUTO_MAX_ITER_PRECOND))
    return n_iter, batch, block


def _use_running_scores(n, batch, n_iter):
    """Whether a ``fit`` that starts a model on n numpy rows keeps running scores of all n rows
    (:func:`dsg_iterations`, module docstring "Running scores"): when 4 n <= batch * n_iter, i.e.
    n x n_iter block evaluations cost at most half the batch x n_iter^2 / 2 of rescoring each
    mini-batch on every earlier block. At the sgd solver's "auto" sizes: exactly for n <= 8192
    (128 iterations of 256 points; batch <= 256 and n_iter <= 256 rule out n >= 16385). At the
    preconditioned solver's (batches of 4096 or 8192, four passes): for every n up to its 200
    iterations (n <= 204800), adult's and MNIST's fits included."""
    return 4 * n <= batch * n_iter


def _step_size(step_size, t0, t):
    return step_size / (1.0 + t / t0)


def _fetch_bytes(spare):
    """Bytes of rows one fetch from a dask X holds: a quarter of the budget left beside the
    iterations (``spare``), at most FETCH_MAX_BYTES."""
    return min(max(spare, 0) // 4, FETCH_MAX_BYTES)


def _epoch_windows(row_chunks, window, rng):
    """One epoch of the rows of a dask X of ``row_chunks`` larger than a fetch, as windows: the
    chunks in a random order, cut into windows of consecutive chunks holding at most ``window``
    rows (one chunk at least), each window's rows permuted. The epoch's order is the windows one
    after the other: every row comes once, as in a full permutation, but a window needs only its
    own chunks, so fetching it computes (regenerates, reads) those chunks once
    (:func:`_batch_rows`). A chunk larger than a window makes a window of its own."""
    offsets = np.cumsum((0,) + tuple(row_chunks))
    windows, rows, held = [], [], 0
    for c in rng.permutation(len(row_chunks)):
        size = int(offsets[c + 1] - offsets[c])
        if held and held + size > window:
            windows.append(rng.permutation(np.concatenate(rows)))
            rows, held = [], 0
        rows.append(np.arange(offsets[c], offsets[c + 1]))
        held += size
    windows.append(rng.permutation(np.concatenate(rows)))
    return windows


def _batch_len(batch, n):
    return len(range(n)[batch]) if isinstance(batch, slice) else len(batch)


def _batch_rows(X, Y, sample_weight, batches, fetch_bytes=0, windows=None):
    """Yield (X[b], Y[b], sample_weight[b]) for each batch b (index array or slice; None for
    None). Dask arrays (module docstring, "Dask"): consecutive batches are fetched in groups,
    each with ONE compute of the rows it holds (:meth:`kernelscale.ops.rows.DaskRows.taker`); a
    group holds at most ``fetch_bytes`` of rows (one batch at least) and at most n rows. With
    ``windows`` (index arrays whose concatenation is that of the batches) the rows are fetched
    window by window instead, each with one compute of its chunks: a batch that runs past a
    window takes its rest from the next one, so every chunk is computed once per window that
    holds it, and the rows held are a window and about two batches."""
    if not is_dask(X):
        for b in batches:
            yield X[b], None if Y is None else Y[b], None if sample_weight is None else sample_weight[b]
        return
    n = X.shape[0]
    take = DaskRows(X.chunks[0], 0).taker(X, Y, sample_weight)
    if windows is not None:
        yield from _window_rows(take, batches, iter(windows), n)
        return
    width = X.dtype.itemsize * X.shape[1] + (0 if Y is None else Y.dtype.itemsize * Y.shape[1])
    limit = min(n, max(int(fetch_bytes) // (width + (0 if sample_weight is None else 8)), 1))
    start = 0
    while start < len(batches):
        stop, held = start + 1, _batch_len(batches[start], n)
        while stop < len(batches) and held + _batch_len(batches[stop], n) <= limit:
            held += _batch_len(batches[stop], n)
            stop += 1
        groups = [np.arange(*b.indices(n)) if isinstance(b, slice) else b for b in batches[start:stop]]
        yield from take(groups)
        start = stop


def _window_rows(take, batches, windows, n):
    """:func:`_batch_rows` window by window: each batch is copied out of the fetched window (or
    the end of one and the start of the next), so nothing keeps a window alive once its rows are
    used, and the next window is fetched only then."""
    held, used = None, 0
    for b in batches:
        size, parts = _batch_len(b, n), []
        while size:
            if held is None or used == held[0].shape[0]:
                parts = [tuple(None if a is None else a.copy() for a in p) for p in parts]  # off the old window
                held = None
                (held,) = take([next(windows)])
                used = 0
            step = min(size, held[0].shape[0] - used)
            parts.append(tuple(None if a is None else a[used:used + step] for a in held))
            used, size = used + step, size - step
        yield tuple(None if p[0] is None else np.concatenate(p) for p in zip(*parts))


# ----------------------------------------------------------------------------------------------
# a dask X on a distributed client: each mini-batch scored by the workers (module docstring, "Dask")

#: multiply-adds of a mini-batch's projection on the earlier blocks (batch x t x block_size x d)
#: below which the client scores it itself: a round trip to the workers costs a few milliseconds
_DISTRIBUTED_SCORE_WORK = 2e8
#: worker side: token of a fit -> its FeatureOperator (regenerated frequencies cached for the fit)
_WORKER_OPS = collections.OrderedDict()
_WORKER_LOCK = threading.Lock()
#: worker side: runs (groups of Fourier blocks, or blocks) and tasks scored by this process
_WORKER_STATS = collections.Counter()
_WORKER_OPS_KEPT = 2


def _worker_op(token, spec, budget, cache_bytes):
    with _WORKER_LOCK:
        op = _WORKER_OPS.get(token)
        if op is None:
            while len(_WORKER_OPS) >= _WORKER_OPS_KEPT:
                _WORKER_OPS.popitem(last=False)
            try:  # the frequencies cached on a worker: at most an eighth of its memory limit
                from distributed import get_worker

                limit = get_worker().memory_manager.memory_limit
                cache_bytes = min(cache_bytes, limit // 8) if limit else cache_bytes
            except (ImportError, ValueError, AttributeError):
                pass
            op = _WORKER_OPS[token] = FeatureOperator(spec, budget, cache_bytes=cache_bytes, backend=NUMPY)
        return op


def _worker_scores(token, spec, budget, cache_bytes, Xb, coef, first):
    """One task: the terms of f(Xb) of blocks [first, first + len(coef)) (whole runs), one
    (b, k) array per run, computed as :meth:`FeatureOperator.scores` computes them."""
    start = time.perf_counter()
    # arrays unpickled from a message can be unaligned (coef in 3 tasks of 4, measured); aligned
    # C-ordered copies (small: batch x d and blocks x D x k) keep every GEMM on BLAS's usual path
    Xb, coef = np.require(Xb, requirements="CA"), np.require(coef, requirements="CA")
    op = _worker_op(token, spec, budget, cache_bytes)
    parts = op.run_scores(Xb, coef, range(first, first + coef.shape[0]))
    with _WORKER_LOCK:
        _WORKER_STATS.update(runs=len(parts), tasks=1, seconds=time.perf_counter() - start)
        _WORKER_STATS["cached_bytes"] = op._used
    return parts


def _drop_worker_op(token):
    with _WORKER_LOCK:
        _WORKER_OPS.pop(token, None)


def _worker_stats():
    return dict(_WORKER_STATS)


def _scoring_client(X):
    """The distributed client that scores the mini-batches of a dask X, or None: no client is
    current, dask's scheduler is set to another, or the blocks run on a torch device."""
    if not is_dask(X) or current_backend() is not NUMPY:
        return None
    import dask

    from ..dask.dispatch import current_client

    if dask.config.get("scheduler", None) not in (None, "dask.distributed", "distributed"):
        return None
    client = current_client()
    return client if client is not None and _workers_outnumber_cores(client) else None


def _workers_outnumber_cores(client):
    """Whether the workers have more threads than this process's host has cores. Otherwise the
    client's own BLAS threads score a mini-batch faster than the workers (module docstring,
    "Dask": on one 2-core host, 2 one-thread workers took 42-46 s where the client took 27 s)."""
    threads = sum(client.nthreads().values())  # every worker (scheduler_info may list only a few)
    return threads > (os.cpu_count() or 1)


class _DistributedScores:
    """f(Xb) = sum_{j<t} phi_j(Xb) coef[j] of each mini-batch, split by runs of blocks (groups of
    GROUP_COLUMNS columns for Fourier blocks) into one task per worker over a contiguous range of
    runs with about equal columns; the batch rows are scattered once per iteration to the workers
    used; every task regenerates its blocks from (seed, block) (cached for the fit on its worker)
    and returns one (b, k) term per run, which the client adds in the order of
    :meth:`FeatureOperator.scores`: numpy's scores bit for bit."""

    def __init__(self, client, spec, budget, cache_bytes):
        self.client, self.spec, self.budget, self.cache_bytes = client, spec, int(budget), int(cache_bytes)
        self.workers = sorted(client.nthreads())
        self.token = f"kernelscale-dsg-{uuid.uuid4().hex}"
        self.planner = FeatureOperator(spec, budget)  # the runs only (nothing drawn)

    def worth(self, b, t):
        return bool(self.workers) and b * t * self.spec.block_size * self.spec.n_features_in >= _DISTRIBUTED_SCORE_WORK

    def ranges(self, t):
        """[(first, stop)] of blocks: the runs of range(t) cut into at most one contiguous range
        per worker of about t / workers blocks each (whole runs)."""
        runs = self.planner.runs(range(t))
        parts = min(len(self.workers), len(runs))
        out = []
        for start, stop in runs:
            slot = min(parts - 1, int((start + stop) / 2 * parts / t))
            if len(out) <= slot:
                out.append([start, stop])
            else:
                out[-1][1] = stop
        return [tuple(r) for r in out]

    def submit(self, Xb, coef, t):
        ranges = self.ranges(t)
        workers = self.workers[: len(ranges)]
        rows = self.client.scatter(np.ascontiguousarray(Xb), workers=workers, broadcast=True, hash=False)
        return [
            self.client.submit(_worker_scores, self.token, self.spec, self.budget, self.cache_bytes, rows,
                               np.ascontiguousarray(coef[a:b]), a, workers=[w], allow_other_workers=False,
                               pure=False, key=f"{self.token}-{t}-{a}")
            for (a, b), w in zip(ranges, workers)
        ]

    def gather(self, futures, shape, dtype):
        F = np.zeros(shape, dtype=dtype)
        for parts in self.client.gather(futures):
            for P in parts:
                F += P
        return F

    def close(self):
        try:
            self.client.run(_drop_worker_op, self.token)
        except Exception:  # noqa: BLE001 (the cache goes with the next fit anyway)
            logger.debug("could not drop the workers' block caches", exc_info=True)


def dsg_iterations(
    X, Y, spec, *, loss, batches, coef=None, n_done=0, scale=1.0, sample_weight=None, nu=1e-5,
    step_size=1.0, t0=100.0, solver="sgd", precond_ridge=1e-3, monitor=None, cache_bytes=0, max_memory=None,
    fetch_bytes=0, fetch_windows=None, running_scores=False, operator=None,
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
    fetch_bytes : int
        Dask X, Y and sample_weight (X's row chunks): the bytes of batch rows fetched at once
        (:func:`_batch_rows`); the iterations are those numpy runs on the same rows.
    fetch_windows : list of index arrays or None
        Dask X: fetch the rows window by window (:func:`_batch_rows`).
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
    if coef is None or coef.shape[0] < n_done + n_new:
        capacity = max(n_done + n_new, 2 * n_done if coef is not None else 0)
        buf = np.zeros((capacity, D, k), dtype=dtype)
        if coef is not None:
            buf[:n_done] = coef[:n_done]
        coef = buf
    if running_scores and is_dask(X):
        raise ValueError("running_scores needs X as a numpy array.")
    client = None if running_scores else _scoring_client(X)
    budget = parse_memory(max_memory)
    scorer = None if client is None else _DistributedScores(client, spec, budget, cache_bytes)
    # the workers cache the blocks they score; here each new block is used once (and the small
    # first iterations scored here redraw their few blocks), so nothing O(t d) is kept here
    cache_bytes = 0 if scorer is not None else cache_bytes
    if operator is None:
        op = FeatureOperator(spec, budget, cache_bytes=cache_bytes)
    else:
        op = operator
        op.limit(budget, cache_bytes)
    S = op.scores(X, coef[:n_done], range(n_done)) if running_scores else None
    try:
        return _iterate(
            X, Y, spec, op, S, scorer, coef=coef, n_done=n_done, scale=scale, loss=loss, batches=batches,
            sample_weight=sample_weight, nu=nu, step_size=step_size, t0=t0, solver=solver,
            precond_ridge=precond_ridge, monitor=monitor, fetch_bytes=fetch_bytes, fetch_windows=fetch_windows,
        )
    finally:
        if scorer is not None:
            scorer.close()


def _iterate(X, Y, spec, op, S, scorer, *, coef, n_done, scale, loss, batches, sample_weight, nu, step_size, t0,
             solver, precond_ridge, monitor, fetch_bytes, fetch_windows):
    """The loop of :func:`dsg_iterations`; ``scorer`` (:class:`_DistributedScores` or None)
    scores the mini-batches on the workers."""
    D = spec.block_size
    dtype = X.dtype
    history = []
    stopped = False
    zero_loss = 0.0  # largest mini-batch loss of f = 0 seen: the scale that flags a blow-up
    rows = _batch_rows(X, Y, sample_weight, batches, fetch_bytes, fetch_windows)
    ahead = _FeaturesAhead(op, X, n_done + len(batches)) if S is not None else None
    for batch, (Xb, Yb, wb) in zip(batches, rows):
        t = n_done
        b = Xb.shape[0]
        if S is not None:  # the new block on every row: the batch's rows now, the running scores after the step
            F = S[batch] * np.asarray(scale, dtype=dtype)
            Phi_all = ahead(t)
            Phi = Phi_all[batch]
        else:
            if scorer is not None and t and scorer.worth(b, t):
                futures = scorer.submit(Xb, coef[:t], t)
                Phi = op.transform(Xb, [t])  # the new block here while the workers score the earlier ones
                F = scorer.gather(futures, (b, Yb.shape[1]), dtype)
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
        if solver == "preconditioned":
            ridge = precond_ridge * max(float(C.diagonal().sum()) / D, np.finfo(np.float64).tiny)
            step = op.backend.ridge_solve(C, grad.astype(np.float64), ridge, overwrite=True)
            alpha = (-gamma * step).astype(dtype)
        else:
            alpha = -gamma * grad
        decay = 1.0 - gamma * nu
        finite = np.all(np.isfinite(alpha)) and np.all(np.isfinite(F)) and math.isfinite(history[-1])
        if not finite or history[-1] > _BLOWUP * max(zero_loss, np.finfo(np.float64).tiny):
            raise ValueError(
                f"the iterates blew up at iteration {t} (non-finite coefficients, or a mini-batch "
                f"loss of {history[-1]:.3g}, over {_BLOWUP:g} times the loss of f = 0): "
                f"step_size={step_size!r} is too large for this problem; pass a smaller step_size "
                f"(e.g. {step_size / 10:g}) or a larger t0."
            )
        scale *= decay
        if scale < _RENORMALIZE_BELOW:
            coef = coef.copy()  # new buffer: the caller's blocks stay valid if a later step fails
            coef[:t] *= np.asarray(scale, dtype=dtype)
            if S is not None:
                S *= np.asarray(scale, dtype=dtype)
            scale = 1.0
        coef[t] = alpha / np.asarray(scale, dtype=dtype)
        if S is not None:
            S += Phi_all @ coef[t]
            Phi_all = None  # a view of the features computed ahead (their window is replaced next)
        n_done = t + 1
        if monitor is not None and monitor.update(
            objective=history[-1], step_size=gamma, scale=scale, n_blocks=n_done
        ):
            stopped = True
            break
    return coef, n_done, scale, history, stopped


#: bytes of new blocks' features on every row that the running scores compute ahead, in one call
_AHEAD_BYTES = 8 * 2**20


class _FeaturesAhead:
    """phi_t(X) on every row of X for the blocks t < ``stop`` of the running scores, computed
    for several blocks at once when they are small (one GEMM and one cosine pass per group of
    Fourier blocks, instead of one call per iteration: on a few hundred rows the calls cost
    more than their arithmetic), within _AHEAD_BYTES and an eighth of the operator's budget."""

    def __init__(self, op, X, stop):
        self.op, self.X, self.stop = op, X, stop
        self.width = op.spec.n_features_out
        per_block = X.shape[0] * self.width * X.itemsize + op.spec.block_bytes  # features and parameters
        self.count = max(1, min(_AHEAD_BYTES, op.budget // 8) // per_block)
        self.first, self.Phi = 0, None

    def __call__(self, t):
        if self.Phi is None or not self.first <= t < self.first + self.Phi.shape[1] // self.width:
            # the caller is done with its views of the former window: the next one is written
            # into its buffer when it has the same size (a new array of the features of every row,
            # 266 MB a block on adult, was faulted in page by page at every iteration)
            blocks = range(t, min(t + self.count, self.stop))
            same = self.Phi is not None and self.Phi.shape[1] == len(blocks) * self.width
            buf = self.Phi if same and self.op.backend is NUMPY else None
            self.Phi = None  # one window is held at a time
            self.first, self.Phi = t, self.op.transform(self.X, blocks, out=buf)
        j = t - self.first
        return self.Phi[:, j * self.width : (j + 1) * self.width]


def _block_moments(backend, Phi, G, wb, preconditioned):
    """The new block's gradient Phi^T G / b (in Phi's dtype, a host array) and, for the
    preconditioned solver, its weighted covariance Phi^T W Phi / b (float64; else None), where
    Phi is. Phi (b, D) is a host array, or the backend's array on a torch device: there the
    products run where Phi is, and only the D x k gradient crosses to the host (the covariance
    goes to ``backend.ridge_solve``, which solves on the device or the host by its size)."""
    b = Phi.shape[0]
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


def dsg_predict(X, spec, coef, scale, max_memory=None, operator=None):
    """f(X) (n, k) in X's dtype: Algorithm 2, every block regenerated once from its seed and
    applied to row chunks that fit in ``max_memory``. ``operator``: an estimator's kept operator
    of ``spec`` on a torch device (module docstring, "Streaming on a GPU"), whose blocks are
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


# ----------------------------------------------------------------------------------------------
# estimators

_BALANCED_PARTIAL = ("class_weight='balanced' needs the whole training set and is not available in partial_fit; "
                     "pass class_weight as a dict {label: weight} or use fit.")


def _code_chunk(block, labels, classes, soft, dtype):
    """Targets of one row chunk in the classifier's coding: ``block`` holds labels, or (``labels``
    given) one-hot rows over ``labels``; one-hot over ``classes`` when ``soft``, else +-1."""
    y = block if labels is None else labels[np.argmax(block, axis=1)]
    codes = np.searchsorted(classes, y)
    return (one_hot if soft else one_vs_rest_targets)(codes, classes.size, dtype)


class _DoublyStochasticBase(DeviceMixin, BaseEstimator):
    """Fit / partial_fit / predict logic shared by the regressor and the classifier."""

    #: the preconditioned solver's "auto" step: 1 for the squared loss (the block's ridge fit of
    #: the batch residual)
    _PRECONDITIONED_STEP = 1.0

    _parameter_constraints: dict = {
        "kernel": KERNEL_CONSTRAINT,
        "alpha": [Interval(Real, 0, None, closed="left")],
        "n_iter": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
        "batch_size": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
        "block_size": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
        "step_size": [StrOptions({"auto"}), Interval(Real, 0, None, closed="neither")],
        "t0": [StrOptions({"auto"}), Interval(Real, 0, None, closed="neither")],
        "solver": [StrOptions(set(SOLVERS))],
        "feature_method": [StrOptions({"cos", "cossin", "tensorsketch", "maclaurin", "gaussian"}), None],
        "precond_ridge": [Interval(Real, 0, None, closed="neither")],
        "shuffle": ["boolean"],
        "warm_start": ["boolean"],
        "max_memory": MEMORY_CONSTRAINT,
        "device": DEVICE_CONSTRAINT,
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "callback": [callable, None],
    }

    # subclasses: _loss_name(k) and _targets(y, first) -> (Y coded, k)

    def _solver(self, n=None):
        """The solver in use: a named one; for "auto", the one a ``fit`` on ``n`` samples starts
        a model with (given n), else the one the model started with (``solver_``; "sgd" before a
        model exists: ``partial_fit``)."""
        if self.solver != "auto":
            return self.solver
        if n is not None:
            return "preconditioned" if n >= _AUTO_PRECONDITIONED_ROWS else "sgd"
        return getattr(self, "solver_", "sgd")

    def _block_size(self, n=None, solver=None):
        """The block size; ``n``: the samples of a ``fit`` that starts a model (with n_iter and
        block_size "auto", the block then scales with n: :func:`dsg_auto_sizes`); ``solver``:
        the solver to size for (default: :meth:`_solver`)."""
        if hasattr(self, "coef_"):
            return self.coef_.shape[1]
        if self.block_size != "auto":
            return self.block_size
        solver = solver or self._solver()
        if n is not None and self.n_iter == "auto":
            return dsg_auto_sizes(n, solver, self.batch_size, "auto", self._loss_name(1))[2]
        return _AUTO_BLOCK[solver]

    def _n_iter(self, n):
        """The total iterations of ``fit`` on n samples (n_iter="auto": :func:`dsg_auto_sizes`)."""
        if self.n_iter != "auto":
            return self.n_iter
        return dsg_auto_sizes(n, self._solver(), self.batch_size, self._block_size())[0]

    def _batch_size(self, solver=None, block=None):
        """The batch size; ``block``: the block it goes with (default: :meth:`_block_size`)."""
        if self.batch_size != "auto":
            return self.batch_size
        solver = solver or self._solver()
        return _AUTO_BATCH if solver == "sgd" else 4 * (block or self._block_size(solver=solver))

    def _step(self):
        if self.step_size != "auto":
            return float(self.step_size)
        if self._solver() == "preconditioned":
            return self._PRECONDITIONED_STEP
        if self._loss_name(1) == "squared":
            # resolved from the data when the model started (_run); a model started with a
            # numeric step and continued with "auto" keeps 1
            return float(getattr(self, "step_size_", 1.0))
        k = self.coef_.shape[2] if hasattr(self, "coef_") else 1
        return _AUTO_STEP_SOFTMAX if self._loss_name(k) == "softmax" else _AUTO_STEP_LIPSCHITZ

    #: whether ``fit`` and ``partial_fit`` subtract an offset from the targets (the regressor's ``intercept_``)
    _centres_targets = False

    def _centred_targets(self, Y, first, fresh):
        """Y as the iterations take it (the regressor: less its ``intercept_``); ``first``: the
        targets and weights of the first mini-batch of a ``fresh`` model."""
        return Y

    def _uses_curvature_step(self, k):
        return self.step_size == "auto" and self._solver() == "sgd" and self._loss_name(k) == "squared"

    def _curvature_step(self, Xb, wb, spec, budget):
        """"auto" step of sgd with the squared loss: 1.5 / (lambda_1 + nu), lambda_1 the top
        eigenvalue of block 0's weighted feature covariance Phi^T W Phi / b on the first
        mini-batch (module docstring), at most 0.5 / nu (the decay 1 - gamma nu stays >= 1/2). A
        first mini-batch of zero weights takes its rows' unweighted covariance: their weights
        carry no curvature, and nu alone made the step 0.5 / nu, which blew up the next batches."""
        Phi = FeatureOperator(spec, budget).transform(Xb, [0]).astype(np.float64)
        if wb is not None and np.any(np.asarray(wb) > 0):
            Phi *= np.sqrt(wb)[:, None]
        b, D = Phi.shape
        G = Phi @ Phi.T if b < D else Phi.T @ Phi  # the same nonzero eigenvalues; the smaller one
        curvature = max(linalg.eigvalsh(G, subset_by_index=[G.shape[0] - 1] * 2)[0] / b, 0.0) + self.alpha
        if curvature <= np.finfo(np.float64).tiny:
            return 1.0
        step = _AUTO_STEP_CURVATURE / curvature
        return float(min(step, 0.5 / self.alpha)) if self.alpha > 0 else float(step)

    def _t0(self):
        if self.t0 != "auto":
            return float(self.t0)
        return float(getattr(self, "t0_", _AUTO_T0_SGD))

    def _auto_t0(self, n, block=None):
        """t0="auto" for a model started on n samples with blocks of ``block`` (default:
        :meth:`_block_size`; module docstring)."""
        if self._solver() == "sgd":
            return _AUTO_T0_SGD
        return float(-(-n // min(self._batch_size(block=block), n)))

    def _spec(self, dtype=None):
        dtype = self.coef_.dtype if dtype is None else dtype
        return FeatureBlockSpec(self.kernel_, self.n_features_in_, self._block_size(), self.seed_, dtype,
                                self.feature_method_)

    def _check_first_step(self, gamma0):
        if gamma0 * self.alpha >= 1:
            step = f"step_size={self.step_size!r}"
            if self.step_size == "auto":
                step += f" (resolved to {gamma0:g})"
            raise ValueError(
                f"{step} times alpha={self.alpha:g} is {gamma0 * self.alpha:g} >= 1, which would flip or zero "
                f"every coefficient (the decay factor 1 - gamma_t nu must stay positive); pass a "
                f"smaller step_size or alpha."
            )

    def _start(self, X, sample_weight, rng, n_auto=None):
        """Fresh state: resolved kernel, seed, empty coefficient store (``n_auto``: the samples
        that size an "auto" block, ``fit`` only)."""
        for name in ("coef_", "solver_"):  # "auto" sizes and solver come from the parameters again
            self.__dict__.pop(name, None)
        self.solver_ = self._solver(n_auto)
        kernel = make_kernel(self.kernel, "kernel")
        kernel_family(kernel)  # a clear error for kernels without random features
        if not kernel.is_resolved and X.shape[0] < 2:
            raise ValueError(
                f"sigma='median' needs at least 2 samples to pick a bandwidth, got n_samples="
                f"{X.shape[0]}; pass more data or a number as sigma."
            )
        self.kernel_ = resolve_kernel(kernel, X, rng, sample_weight)  # dask X: numpy's subsample gathered
        self.seed_ = seed_from(self.random_state if isinstance(self.random_state, Integral) else rng)
        # validates block_size / feature_method against the kernel now
        block = self._block_size(n_auto)
        spec = FeatureBlockSpec(self.kernel_, X.shape[1], block, self.seed_, X.dtype, self.feature_method)
        self.feature_method_ = spec.method
        self.scale_ = 1.0
        self.t0_ = self._auto_t0(X.shape[0], block) if self.t0 == "auto" else float(self.t0)
        self.n_iter_ = 0
        self.objective_history_ = np.zeros(0)

    def _buffer_view(self):
        """The coefficient store with its spare rows: ``coef_`` is its leading rows (a view), so
        no other attribute holds it and a failed run's writes past ``n_iter_`` change no state."""
        buf = self.coef_.base
        if (not isinstance(buf, np.ndarray) or buf.shape[1:] != self.coef_.shape[1:] or buf.shape[0] < self.n_iter_
                or buf.strides != self.coef_.strides or buf.ctypes.data != self.coef_.ctypes.data
                or not buf.flags.writeable):
            return self.coef_  # e.g. after load: dsg_iterations grows it
        return buf

    def _run(self, X, Y, sw, batches, fit=False, fetch_windows=None):
        """Run the iterations of ``batches`` and commit the state (only on success); ``fit``:
        the batches are those of a ``fit`` over all rows of X (running scores may be used);
        ``fetch_windows``: fetch a dask X's rows by these windows (:func:`_batch_rows`)."""
        dtype = self.coef_.dtype if self.n_iter_ else X.dtype
        distributed = is_dask(X)
        if distributed:  # cast per chunk, as numpy casts the whole array
            X, Y = X.astype(dtype), Y.astype(dtype)
        else:
            X = np.ascontiguousarray(X, dtype=dtype)
            Y = np.ascontiguousarray(Y, dtype=dtype)
        spec = self._spec(dtype)
        n = X.shape[0]
        budget = parse_memory(self.max_memory)
        held, need = dsg_memory(max(_batch_len(b, n) for b in batches) if batches else 1, spec, Y.shape[1],
                                self.n_iter_ + len(batches), self._solver())
        if need > budget:
            raise ValueError(
                f"max_memory={format_bytes(budget)} is too small for {len(batches)} doubly stochastic "
                f"iterations, which need {format_bytes(need)} ({need} bytes: the coefficient store "
                f"plus batch x block_size features); increase max_memory, or use a smaller "
                f"batch_size, block_size or n_iter."
            )
        if fit or distributed:  # no kept blocks (a fit draws each block once anyway); old ones go
            self.__dict__.pop("_device_ops", None)
            operator = None
        else:
            operator, kept = self._device_operator(spec, min(budget // 4, budget - need))
            budget -= kept
        fresh = not self.n_iter_
        curvature = self._uses_curvature_step(Y.shape[1])
        first = None  # the first mini-batch's targets and weights (Y stands for X: its rows alone are fetched)
        if fresh and batches and self._centres_targets:
            first = next(_batch_rows(Y, None, sw, batches[:1]))[::2]
        Y = self._centred_targets(Y, first, fresh)
        if fresh and curvature and batches:
            Xb, _, wb = next(_batch_rows(X, None, sw, batches[:1]))
            step = self._curvature_step(Xb, wb, spec, budget)
        else:
            step = self._step()
        self._check_first_step(step)
        spare = budget - need  # a quarter for the batch rows fetched at once (dask), half the rest for the cache
        running = fit and fresh and not distributed and _use_running_scores(
            n, max((_batch_len(b, n) for b in batches), default=1), len(batches))
        if running:  # the n x k running scores, and the rows of one block's product over n rows
            extra = n * Y.shape[1] * spec.dtype.itemsize
            running = extra + n * spec.dtype.itemsize * (spec.n_features_out * (spec.workspace + 1)
                                                        + 2 * Y.shape[1]) <= spare // 2
            if running:
                held += extra
                spare -= extra
        fetch = _fetch_bytes(spare) if distributed else 0
        cache = (spare - fetch) // 2
        with IterationMonitor(self.verbose, self.callback, total=len(batches), desc="doubly stochastic") as mon:
            coef, n_done, scale, history, _ = dsg_iterations(
                X, Y, spec, loss=self._loss_name(Y.shape[1]), batches=batches,
                coef=self._buffer_view() if self.n_iter_ else None, n_done=self.n_iter_,
                scale=self.scale_, sample_weight=sw, nu=self.alpha, step_size=step,
                t0=self._t0(), solver=self._solver(), precond_ridge=self.precond_ridge, monitor=mon,
                cache_bytes=cache, max_memory=budget - held - cache - fetch, fetch_bytes=fetch,
                fetch_windows=fetch_windows, running_scores=running,
                operator=operator,
            )
        self.solver_ = self._solver()  # a warm start may name another solver
        if not curvature:
            self.__dict__.pop("step_size_", None)
        elif fresh:
            self.step_size_ = step
        self.coef_ = coef[:n_done]
        self.scale_ = float(scale)
        self.n_iter_ = n_done
        self.objective_history_ = np.concatenate([self.objective_history_, history])
        return self

    def _device_operator(self, spec, room, group=True):
        """The FeatureOperator that ``partial_fit`` and prediction calls share on a torch device,
        or None (numpy: each call redraws its blocks, so host memory stays flat in the stream's
        length). On a device the host's draws would cost more than the device's products, so the
        blocks are drawn once and kept there, within the cache budget of each call (module
        docstring, "Streaming on a GPU"). Not saved, pickled or copied; a fresh start drops it.
        ``group``: blocks evaluated in groups (fits) or one by one (predictions, as on numpy, so
        that both backends sum the same terms in the same order): one kept operator each.

        Returns (operator or None, bytes the other kept operator holds, after cutting it to at
        most ``room``): the caller takes them off its budget. With ``max_memory=None`` the budget
        comes from the GPU's free memory, which already excludes them: then nothing is taken
        off. Operators of another device (or of none: numpy) are dropped."""
        backend = current_backend()
        ops = {g: o for g, o in self.__dict__.get("_device_ops", {}).items() if o.backend == backend}
        if device_type(backend) not in _KEEP_ON_DEVICES:
            self.__dict__.pop("_device_ops", None)
            return None, 0
        op = ops.get(group)
        if op is None or repr(op.spec) != repr(spec):
            op = FeatureOperator(spec, 0, backend=backend, group=group)
        self._device_ops = {**ops, group: op}
        kept = 0
        for other in (o for g, o in self._device_ops.items() if g != group):
            other.limit(other.budget, min(other.cache_bytes, max(room, 0)))
            kept += other._used
        return op, 0 if self.max_memory is None else kept

    def __getstate__(self):
        state = dict(super().__getstate__())  # may be this estimator's own __dict__
        state.pop("_device_ops", None)
        return state

    def _commit_run(self, run, *args, **kwargs):
        """``run(estimator, *args, **kwargs)`` (``_fit`` or ``_partial_fit``) on a scratch copy of
        this estimator, then its state committed here in one step: until the run completes, this
        estimator keeps its previous model (or stays unfitted). The copy shares the fitted arrays,
        which a run never changes in place (new blocks go past ``n_iter_`` of the store)."""
        scratch = object.__new__(type(self))
        scratch.__dict__ = dict(vars(self))
        run(scratch, *args, **kwargs)
        return commit_fit(self, vars(scratch), stale=tuple(vars(self)))

    def _fit_batches(self, n, n_iter, start, row_chunks=None, fetch_rows=1):
        """(mini-batches of fit, windows to fetch them by or None): consecutive chunks of
        batch_size of one epoch order, repeated; each epoch permuted (shuffle=True) by a
        generator of (seed_, start, epoch). With the ``row_chunks`` of a dask X of more than
        ``fetch_rows`` rows (what one fetch holds), the epoch order is :func:`_epoch_windows`'s
        windows of at most fetch_rows - batch_size rows one after the other (a window and the
        rest of a batch are held at once), returned for :func:`_batch_rows`."""
        bs = min(self._batch_size(), n)
        chunks = [slice(s, min(s + bs, n)) for s in range(0, n, bs)]
        windowed = self.shuffle and row_chunks is not None and n > fetch_rows
        window = max(fetch_rows - bs, 1)
        batches, windows = [], []
        epoch = 0
        while len(batches) < n_iter:
            if self.shuffle:
                rng = np.random.default_rng([self.seed_, start, epoch])
                if windowed:
                    epoch_windows = _epoch_windows(row_chunks, window, rng)
                    windows.extend(epoch_windows)
                    order = np.concatenate(epoch_windows)
                else:
                    order = rng.permutation(n)
                batches.extend(order[c] for c in chunks)
            else:
                batches.extend(chunks)
            epoch += 1
        return batches[:n_iter], (windows if windowed else None)

    def _fit(self, X, y, sample_weight):
        first = not (self.warm_start and hasattr(self, "coef_"))
        if not first:
            if X.shape[1] != self.n_features_in_:
                raise ValueError("warm_start=True but X has a different number of features; set warm_start=False.")
        Y, sw = self._targets(X, y, sample_weight, first=first, partial=False)
        return self._fit_coded(X, Y, sw, first)

    def _fit_coded(self, X, Y, sw, first):
        """The fit on X, coded targets Y (n, k) and weights sw: numpy arrays, or dask arrays with
        X's row chunks (the weights' total summed over the chunks)."""
        if sw is not None:
            weight = total(executor(0, sw), sw)
            if not weight > 0:
                raise ValueError("sample_weight sums to zero; give at least one sample a positive weight.")
            sw = sw * (X.shape[0] / weight)
        if first:
            rng = check_random_state(self.random_state)
            self._start(X, sw, rng, n_auto=X.shape[0])
            self.coef_ = np.zeros((0, self._block_size(X.shape[0]), Y.shape[1]), dtype=X.dtype)
        elif Y.shape[1] != self.coef_.shape[2]:
            raise ValueError("warm_start=True but the number of targets changed; set warm_start=False.")
        n_total = self._n_iter(X.shape[0])
        n_new = n_total if first else warm_start_iterations(n_total, self.n_iter_)
        batches, windows = self._fit_batches(X.shape[0], n_new, self.n_iter_, *self._fetch_window(X, Y, sw, n_new))
        return self._run(X, Y, sw, batches, fit=True, fetch_windows=windows)

    def _fetch_window(self, X, Y, sw, n_new):
        """(row chunks, rows one fetch of :meth:`_run` holds) for a dask X; (None, 1) for numpy."""
        if not is_dask(X):
            return None, 1
        dtype = self.coef_.dtype if self.n_iter_ else X.dtype  # _run casts X and Y to it
        _, need = dsg_memory(min(self._batch_size(), X.shape[0]), self._spec(dtype), Y.shape[1],
                             self.n_iter_ + n_new, self._solver())
        row = dtype.itemsize * (X.shape[1] + Y.shape[1]) + 8 * (sw is not None)
        return X.chunks[0], max(_fetch_bytes(parse_memory(self.max_memory) - need) // row, 1)

    def _partial_fit(self, X, y, sample_weight, **target_kw):
        first = not hasattr(self, "coef_")
        X = validate_data(self, X, dtype=_FLOAT_DTYPES, reset=first)
        y = np.asarray(y)
        if y.shape[0] != X.shape[0]:
            raise ValueError(f"y has {y.shape[0]} samples but X has {X.shape[0]}; pass one target per row.")
        Y, sw = self._targets(X, y, sample_weight, first=first, partial=True, **target_kw)
        return self._partial_fit_coded(X, Y, sw, first)

    def _partial_fit_coded(self, X, Y, sw, first):
        """``partial_fit`` on X, coded targets Y and weights sw (numpy, or dask: the batches' rows
        fetched group by group, :func:`_batch_rows`)."""
        if first:
            self._start(X, sw, check_random_state(self.random_state))
            self.coef_ = np.zeros((0, self._block_size(), Y.shape[1]), dtype=X.dtype)
        n = X.shape[0]
        bs = self._batch_size()
        batches = [slice(s, min(s + bs, n)) for s in range(0, n, bs)]
        return self._run(X, Y, sw, batches)

    # -- dask input (kernelscale.dask.fit; module docstring, "Dask")

    def _fit_prepared(self, X, Y, classes, sw, fitted):
        """``fit`` on dask arrays validated chunk by chunk by :mod:`kernelscale.dask.fit`: Y one-hot
        over ``classes`` (classifier) or the targets (regressor), sw with the class weights."""
        return self._commit_run(type(self)._fit_dask, X, Y, classes, sw, fitted["n_features_in_"])

    def _fit_dask(self, X, Y, classes, sw, d):
        first = not (self.warm_start and hasattr(self, "coef_"))
        if not first and d != self.n_features_in_:
            raise ValueError("warm_start=True but X has a different number of features; set warm_start=False.")
        self.n_features_in_ = d
        return self._fit_coded(X, self._dask_fit_targets(Y, classes, first), sw, first)

    def _partial_fit_prepared(self, X, y, sw, **target_kw):
        """``partial_fit`` on dask arrays validated chunk by chunk (:func:`kernelscale.dask.fit.partial_fit`)."""
        first = not hasattr(self, "coef_")
        if first:
            self._validate_params()
        elif X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, but {type(self).__name__} is expecting "
                             f"{self.n_features_in_} features as input.")
        return self._commit_run(type(self)._partial_fit_dask, X, y, sw, first, **target_kw)

    def _partial_fit_dask(self, X, y, sw, first, **target_kw):
        self.n_features_in_ = X.shape[1]
        Y, sw = self._dask_partial_targets(y, sw, first, X.dtype, **target_kw)
        return self._partial_fit_coded(X, Y, sw, first)

    def _outputs(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, dtype=_FLOAT_DTYPES, reset=False)
        spec = self._spec(X.dtype)
        budget = parse_memory(self.max_memory)
        operator, kept = self._device_operator(spec, budget // 4, group=False)
        F = dsg_predict(X, spec, self.coef_, self.scale_, budget - kept, operator=operator)
        return check_finite_result(F, "decision values" if hasattr(self, "classes_") else "predictions")


_DOC_PARAMS = """
    Parameters
    ----------
    kernel : Kernel or str, default="gaussian"
        Gaussian, Laplacian, Matern (random Fourier features), polynomial (TensorSketch or
        Maclaurin features) or linear; ``sigma="median"`` is resolved in ``fit`` (in the first
        ``partial_fit`` call: from its batch).
    alpha : float >= 0, default=1e-5
        The ridge, the paper's nu: regularisation (nu / 2) |f|_H^2; every step decays all
        earlier blocks by 1 - gamma_t nu.
    n_iter : int >= 1 or "auto", default="auto"
        Iterations of ``fit`` in total: with ``warm_start``, a refit runs the iterations missing
        to reach ``n_iter`` (``partial_fit`` adds iterations regardless). "auto"
        (:func:`dsg_auto_sizes`, module docstring): for "sgd" two passes over the n samples of
        ``fit``, ceil(2 n / batch), within [128, 256]; for "preconditioned" four passes, at most
        200. (The former default was 200.) A ``fit`` that starts a model on n <= batch * n_iter / 4
        numpy rows keeps running scores of all n rows instead of rescoring each mini-batch (the
        same iterates up to rounding; module docstring, "Running scores").
    batch_size : int >= 1 or "auto", default="auto"
        Points per iteration (``partial_fit``: one iteration per batch_size chunk of its data).
        "auto": 256 for solver="sgd"; 4 * block_size for "preconditioned" (the authors' ratio;
        a batch no larger than the block makes the block covariance singular and the
        preconditioned step interpolates the batch).
    block_size : int >= 1 or "auto", default="auto"
        Random features drawn per iteration (even for ``feature_method="cossin"``). "auto": 1024
        for "preconditioned" (the regressor's ``fit`` with n_iter and batch_size "auto" on at
        most 8192 samples: 2048, four full-batch steps); for "sgd", 256, except in a ``fit`` with
        n_iter="auto", where the total features follow n: ceil(F / n_iter) with F = 4 n within
        [4096, 51200], at most 256 (iris, diabetes: 32; n = 4000: 125; adult: 201).
    step_size : float > 0 or "auto", default="auto"
        gamma_0; gamma_t = step_size / (1 + t / t0) (for large t the paper's theta / t with
        theta = step_size * t0). "auto": for "preconditioned", 1 with the squared loss and 0.5
        with the classification losses (on held-out training data, with precond_ridge 1e-2:
        adult hinge 15.6% validation error against 16.7% at 1 and 1e-3, MNIST 2.97% against
        3.20%, 30 classes 16.6% against 19.6%; at 0.5 the squared loss's RMSE grew 1.2-3.7x on
        three of four sets; benchmarks/README.md); for "sgd", 1.5 / (lambda_1 + nu) with the
        squared loss (lambda_1 the top eigenvalue of the first block's feature
        covariance on the first mini-batch; 2 / lambda_1 diverges; at most 0.5 / nu; kept in
        ``step_size_``; a warm start that switches from a number to "auto" continues with 1),
        10 with the hinge and logistic losses, whose derivative is bounded by 1 (with 1, one
        pass over adult stays at the trivial classifier), and 30 with the softmax (more than
        two classes), whose derivative is only about 1/k per wrong class (with 10, one pass
        over MNIST 10-class ended at 11.5% validation error, with 30 at 8.9%;
        benchmarks/README.md).
    t0 : "auto" or float > 0, default="auto"
        Iterations over which gamma_t halves. "auto" (resolved in ``t0_``): 100 for solver="sgd";
        for "preconditioned" the mini-batches of one pass, ceil(n / batch_size) (first
        ``partial_fit`` call: its own mini-batches), so gamma_t ~ step_size / passes; the
        authors' nearly constant 1 / (1 + 1e-4 t) made the error grow over many passes (module
        docstring).
    solver : {"auto", "sgd", "preconditioned"}, default="auto"
        Algorithm 1, or the authors' preconditioned block variant (module docstring). "auto"
        (resolved in ``solver_``): "preconditioned" for a ``fit`` on at least 2048 samples, "sgd"
        on fewer and for ``partial_fit`` (a study on training data, module docstring).
    feature_method : str or None, default=None
        Random-feature form (kernelscale.ops.feature_blocks): "cos" or "cossin" for shift-invariant
        kernels, "tensorsketch" or "maclaurin" for polynomial; None is the kernel's default.
    precond_ridge : float > 0, default=1e-3 (DoublyStochasticClassifier: 1e-2)
        Ridge of the preconditioner, relative to the mean diagonal of the block covariance (the
        authors' 1e-7 I on their feature scale is 8.2e-4; 1e-7, read as relative, let the
        variant overfit each batch: QM7 test MAE rose from 41 to 95 over 4 passes). The
        classifier's larger default damps the block fits of its subgradients (see step_size).
    shuffle : bool, default=True
        Permute the data each epoch in ``fit``; False takes batch_size chunks in order (then
        ``fit`` equals ``partial_fit`` over the same chunks).
    warm_start : bool, default=False
        ``fit`` continues the previous fit (iteration counter, seeds, step sizes).
    max_memory : int, str or None
        Budget for the coefficient store and one iteration's batch x block_size features,
        checked before allocating; predictions run over row chunks within it.
    device : None, "auto", "cpu", "cuda" or "cuda:N", default=None
        Where kernel and feature blocks are computed (README, "GPUs"): None is numpy on the host
        (a torch tensor as input selects its device); the others need torch.
    random_state : int, RandomState or None
        An int is the seed of the feature blocks (``seed_``); otherwise one seed is drawn.
        Mini-batch order comes from (seed_, iteration count, epoch).
    verbose : int; callback : callable or None
        Progress per iteration; the callback gets {"iteration", "objective", "step_size",
        "scale", "n_blocks"} and stops the run by returning True.
"""

_DOC_ATTRS = """
    Attributes
    ----------
    kernel_, seed_ : the resolved kernel; block t is regenerated from (seed_, t).
    feature_method_ : str
    coef_ : (n_iter_, block_size, k)
        Unscaled coefficient blocks; the model is f(x) = scale_ * sum_t phi_t(x) coef_[t].
    solver_ : str
        The solver of the model, "sgd" or "preconditioned" (``solver="auto"`` resolved when the
        model started).
    t0_ : float
        The t0 of the step sizes, resolved when the model started ("auto": module docstring).
    step_size_ : float
        Only for solver="sgd" with the squared loss and step_size="auto": the step resolved from
        the first mini-batch when the model started.
    scale_ : float
        The running decay prod_t (1 - gamma_t nu) (renormalised into coef_ below 1e-10).
    n_iter_ : int
        Iterations run in total (= number of blocks).
    objective_history_ : (n_iter_,)
        The weighted mean loss on each iteration's mini-batch before its update (progressive
        validation loss; the RKHS norm term is not computed: it would need all pairs of blocks).
    n_features_in_ : int
"""


class DoublyStochasticRegressor(FiniteR2Mixin, RegressorMixin, _DoublyStochasticBase):
    __doc__ = (
        """Kernel ridge regression by doubly stochastic functional gradients (paper 2).

    Squared loss (1/n) sum_i |f(x_i) + b - y_i|^2 / 2 + (nu / 2) |f|_H^2, one or several targets,
    with b = ``intercept_`` fixed before the iterations (``fit_intercept``); with b = 0 the
    minimiser is ExactKernelRidge with alpha = n * nu. Memory O(n_iter * block_size * k),
    independent of d.
"""
        + _DOC_PARAMS
        + """    fit_intercept : bool, default=True
        Regressor only: fit f to the targets less their weighted mean on the model's first
        mini-batch (``intercept_``, added back by ``predict``). Read when a model starts: warm
        starts and later ``partial_fit`` calls keep the offset. The paper's Algorithm 1 has no
        intercept (False), but its model has no constant term either, and targets far from zero
        cost it its ridge and its steps: on QM7's energies (a mean 7 standard deviations from
        zero) the validation MAE at the defaults was 21.4 kcal/mol without it and 18.8 with it
        (part ``intercept`` of benchmarks/bench_dsg_defaults.py). With ``shuffle=True`` (fit)
        the first mini-batch is a random sample; with ``shuffle=False`` and in ``partial_fit``
        it is the first rows, whose mean is only as good an offset as they are a sample. A
        model saved before this parameter existed loads with fit_intercept=True but no offset.
"""
        + _DOC_ATTRS
        + """    intercept_ : (k,) float64
        Regressor only: the targets' offset, fixed when the model started (zeros if
        fit_intercept was False then).
"""
    )

    _parameter_constraints: dict = {
        **_DoublyStochasticBase._parameter_constraints,
        "loss": [StrOptions({"squared"})],
        "fit_intercept": ["boolean"],
    }

    def __init__(
        self, kernel="gaussian", *, loss="squared", alpha=1e-5, n_iter="auto", batch_size="auto",
        block_size="auto", step_size="auto", t0="auto", solver="auto", feature_method=None, precond_ridge=1e-3,
        fit_intercept=True, shuffle=True, warm_start=False, random_state=None, max_memory=None, device=None,
        verbose=0, callback=None,
    ):
        self.kernel = kernel
        self.loss = loss
        self.fit_intercept = fit_intercept
        self.alpha = alpha
        self.n_iter = n_iter
        self.batch_size = batch_size
        self.block_size = block_size
        self.step_size = step_size
        self.t0 = t0
        self.solver = solver
        self.feature_method = feature_method
        self.precond_ridge = precond_ridge
        self.shuffle = shuffle
        self.warm_start = warm_start
        self.random_state = random_state
        self.max_memory = max_memory
        self.device = device
        self.verbose = verbose
        self.callback = callback

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

    def _loss_name(self, k):
        return "squared"

    def _columns(self, y, first):
        """y (n,) or (n, k), numpy or dask, as columns (n, k); checks the width of a warm start."""
        if y.ndim not in (1, 2):
            raise ValueError(f"y must have shape (n,) or (n, k), got {y.shape}.")
        if first:
            self.single_output_ = y.ndim == 1
        Y = y[:, None] if y.ndim == 1 else y
        if not first and Y.shape[1] != self.coef_.shape[2]:
            raise ValueError(
                f"y has {Y.shape[1]} targets but the model was fitted with {self.coef_.shape[2]}; "
                f"pass targets of the same width."
            )
        return Y

    def _dask_fit_targets(self, Y, classes, first):
        return self._columns(Y, first)

    def _dask_partial_targets(self, y, sw, first, dtype):
        return self._columns(y, first).astype(dtype), sw

    @property
    def _centres_targets(self):
        return bool(self.fit_intercept)

    def _centred_targets(self, Y, first, fresh):
        """Y less ``intercept_`` (``fit_intercept``): the weighted mean of the targets of a
        ``fresh`` model's first mini-batch (``first``: its targets and weights); zeros where that
        batch's weights are all zero or the mean is not finite (targets near the float range)."""
        if fresh:
            self.intercept_ = np.zeros(Y.shape[1]) if first is None else target_means(*first)
        offset = getattr(self, "intercept_", None)  # absent from models saved before it existed
        return Y if offset is None or not np.any(offset) else Y - offset.astype(Y.dtype)

    def _targets(self, X, y, sample_weight, *, first, partial):
        Y = self._columns(np.asarray(y), first)
        sw = None
        if sample_weight is not None:
            sw = check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
        return Y, sw

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit on X (n, d) and y (n,) or (n, k); n_iter iterations of batch_size points."""
        return self._commit_run(type(self)._validated_fit, X, y, sample_weight)

    def _validated_fit(self, X, y, sample_weight):
        warm = self.warm_start and hasattr(self, "coef_")
        X, y = validate_data(self, X, y, dtype=_FLOAT_DTYPES, multi_output=True, y_numeric=True,
                             reset=not warm)
        return self._fit(X, np.asarray(y, dtype=X.dtype), sample_weight)

    def partial_fit(self, X, y, sample_weight=None):
        """One iteration per batch_size chunk of (X, y), in order, continuing the iteration
        counter and the seeded blocks; equals ``fit(shuffle=False)`` over the same chunks."""
        if not hasattr(self, "coef_"):
            self._validate_params()
        y = np.asarray(y)
        if y.dtype.kind not in "biuf":
            raise ValueError(f"y must be numeric, got dtype {y.dtype}.")
        if not np.all(np.isfinite(y)):
            raise ValueError("y contains NaN or infinity; drop or impute those targets.")
        return self._commit_run(type(self)._partial_fit, X, y, sample_weight)

    def predict(self, X):
        """f(X) + ``intercept_``: (n,) or (n, k), in X's dtype (float32 stays float32)."""
        F = self._outputs(X)
        offset = getattr(self, "intercept_", None)
        if offset is not None and np.any(offset):
            F += offset.astype(F.dtype)
            check_finite_result(F, "predictions")
        return F[:, 0] if self.single_output_ else F


class DoublyStochasticClassifier(ClassifierMixin, _DoublyStochasticBase):
    __doc__ = (
        """Kernel classifier by doubly stochastic functional gradients (paper 2).

    ``loss="hinge"``: kernel SVM, one-vs-rest for more than two classes (no ``predict_proba``:
    the hinge loss estimates no probabilities). ``loss="logistic"``: kernel logistic regression,
    one-vs-rest for more than two classes (binary logistic losses on +-1 codes, as in
    RegularizedKernelClassifier; ``predict_proba`` normalises the sigmoids). ``loss="softmax"``:
    multinomial logistic regression (the paper's K-logistic; the same as "logistic" for two
    classes; ``predict_proba`` is the softmax). ``predict_proba`` agrees with ``predict``.
    ``partial_fit`` needs ``classes=`` on its first call.
"""
        + _DOC_PARAMS
        + """    class_weight : "balanced", dict or None
        Multiplies the sample weights (``fit``; "balanced" is not available in partial_fit,
        which sees one batch at a time: pass a dict).
"""
        + _DOC_ATTRS
        + "    classes_ : (n_classes,)\n"
    )

    _parameter_constraints: dict = {
        **_DoublyStochasticBase._parameter_constraints,
        "loss": [StrOptions({"hinge", "logistic", "softmax"})],
        "class_weight": [StrOptions({"balanced"}), dict, None],
    }
    # the preconditioned solver's "auto" step for the classification losses (with precond_ridge
    # 1e-2): a study on training data, benchmarks/README.md "Doubly stochastic defaults"
    _PRECONDITIONED_STEP = 0.5

    def __init__(
        self, kernel="gaussian", *, loss="hinge", alpha=1e-5, n_iter="auto", batch_size="auto",
        block_size="auto", step_size="auto", t0="auto", solver="auto", feature_method=None, precond_ridge=1e-2,
        class_weight=None, shuffle=True, warm_start=False, random_state=None, max_memory=None, device=None,
        verbose=0, callback=None,
    ):
        self.kernel = kernel
        self.loss = loss
        self.alpha = alpha
        self.n_iter = n_iter
        self.batch_size = batch_size
        self.block_size = block_size
        self.step_size = step_size
        self.t0 = t0
        self.solver = solver
        self.feature_method = feature_method
        self.precond_ridge = precond_ridge
        self.class_weight = class_weight
        self.shuffle = shuffle
        self.warm_start = warm_start
        self.random_state = random_state
        self.max_memory = max_memory
        self.device = device
        self.verbose = verbose
        self.callback = callback

    def _loss_name(self, k):
        if self.loss_ == "softmax":
            return "logistic" if k == 1 else "softmax"
        return self.loss_

    def _check_labels(self, labels, *, first, partial, classes=None):
        """Set (first call) or check ``classes_`` and ``loss_`` for the sorted unique ``labels`` of y."""
        with warnings.catch_warnings():
            # scikit-learn warns when over half the samples are distinct classes: here every
            # entry of ``labels`` is (the unique labels), so it warned for any 21 classes or more
            warnings.filterwarnings("ignore", message="The number of unique classes", category=UserWarning)
            check_classification_targets(labels)
        if first:
            if partial:
                if classes is None:
                    raise ValueError(
                        "classes must be passed on the first call to partial_fit (all the labels "
                        "the stream will contain), e.g. partial_fit(X, y, classes=np.unique(y_all))."
                    )
                all_classes = np.unique(np.asarray(classes))
            else:
                all_classes = labels
            require_two_classes(all_classes)
            self.classes_ = all_classes
            self.loss_ = self.loss
        elif classes is not None and not np.array_equal(np.unique(np.asarray(classes)), self.classes_):
            raise ValueError(
                f"classes={classes!r} differs from the classes of the first partial_fit call "
                f"({self.classes_!r}); classes cannot change after the first call."
            )
        elif not partial and self.loss != self.loss_:
            raise ValueError("warm_start=True but loss changed; set warm_start=False.")
        unknown = np.setdiff1d(labels, self.classes_)
        if unknown.size:
            raise ValueError(
                f"y contains labels {unknown.tolist()!r} not in classes_={self.classes_.tolist()!r}; "
                f"new classes cannot be added after the first call (pass all labels as classes= "
                f"on the first partial_fit, or refit)."
            )

    def _coding(self):
        """(n_classes, softmax): one-hot targets for the softmax over more than two classes, else +-1."""
        k = self.classes_.size
        return k, not (k == 2 or self.loss_ != "softmax")

    def _dask_fit_targets(self, Y, classes, first):
        """The one-hot Y over ``classes`` (kernelscale.dask.fit) coded per chunk for ``classes_``."""
        if not first and np.setdiff1d(classes, self.classes_).size:
            raise ValueError("warm_start=True but y has new classes; set warm_start=False.")
        self._check_labels(classes, first=first, partial=False)
        k, soft = self._coding()
        return Y.map_blocks(_code_chunk, classes, self.classes_, soft, Y.dtype, dtype=Y.dtype,
                            chunks=(Y.chunks[0], (1 if k == 2 else k,)))

    def _dask_partial_targets(self, y, sw, first, dtype, classes=None):
        """The labels y coded per chunk (in ``dtype``); the weights times the class weights per chunk."""
        from ..dask.fit import class_weight_chunk, sum_labels

        self._check_labels(sum_labels(y), first=first, partial=True, classes=classes)
        k, soft = self._coding()
        Y = y.map_blocks(_code_chunk, None, self.classes_, soft, dtype, dtype=dtype, new_axis=1,
                         chunks=(y.chunks[0], (1 if k == 2 else k,)))
        if self.class_weight is not None:
            if self.class_weight == "balanced":
                raise ValueError(_BALANCED_PARTIAL)
            weights = compute_sample_weight(self.class_weight, self.classes_)
            sw = y.map_blocks(class_weight_chunk, sw, self.classes_, weights, dtype=np.float64, meta=np.empty(0))
        return Y, sw

    def _targets(self, X, y, sample_weight, *, first, partial, classes=None):
        check_classification_targets(y)
        self._check_labels(np.unique(y), first=first, partial=partial, classes=classes)
        codes = np.searchsorted(self.classes_, y)
        k = self.classes_.size
        # the coded targets, the batch's scores and gradients and the coefficient store per class
        columns = 1 if k == 2 else k
        solver = self._solver(codes.size if first and not partial else None)
        batch = min(self._batch_size(solver), codes.size)
        check_class_memory(X.dtype.itemsize * columns * (codes.size + 4 * batch + self._block_size(solver=solver)),
                           self.max_memory, k,
                           "the coded targets, one mini-batch's scores and one coefficient block")
        if k == 2 or self.loss_ != "softmax":
            Y = one_vs_rest_targets(codes, k, X.dtype)
        else:
            Y = one_hot(codes, k, X.dtype)
        sw = None
        if sample_weight is not None or self.class_weight is not None:
            sw = check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
            if self.class_weight is not None:
                if partial and self.class_weight == "balanced":
                    raise ValueError(_BALANCED_PARTIAL)
                sw = sw * compute_sample_weight(self.class_weight, y)
        return Y, sw

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit on X (n, d) and labels y (n,); n_iter iterations of batch_size points."""
        return self._commit_run(type(self)._validated_fit, X, y, sample_weight)

    def _validated_fit(self, X, y, sample_weight):
        warm = self.warm_start and hasattr(self, "coef_")
        X, y = validate_data(self, X, y, dtype=_FLOAT_DTYPES, reset=not warm)
        if warm:
            if np.setdiff1d(np.unique(y), self.classes_).size:
                raise ValueError("warm_start=True but y has new classes; set warm_start=False.")
        return self._fit(X, y, sample_weight)

    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """One iteration per batch_size chunk of (X, y), in order, continuing the iteration
        counter and seeds. ``classes`` (every label of the stream) is required on the first call."""
        if not hasattr(self, "coef_"):
            self._validate_params()
        y = column_or_1d(np.asarray(y), warn=True)  # as fit's validate_data: (n, 1) -> (n,), (n, 2) refused
        return self._commit_run(type(self)._partial_fit, X, y, sample_weight, classes=classes)

    def decision_function(self, X):
        """Scores: (n,) for two classes (positive means classes_[1]), else (n, n_classes)."""
        F = self._outputs(X)
        return F[:, 0] if F.shape[1] == 1 else F

    def _is_logistic(self):
        return getattr(self, "loss_", self.loss) in ("logistic", "softmax")

    @available_if(_is_logistic)
    def predict_proba(self, X):
        """Class probabilities ("logistic" and "softmax" only): the sigmoid for two classes, the
        softmax ("softmax") or the normalised one-vs-rest sigmoids ("logistic") for more."""
        F = self._outputs(X)
        if F.shape[1] == 1:
            p = expit(F[:, 0])
            return np.stack([1 - p, p], axis=1)
        if self.loss_ == "softmax":
            return softmax(F)
        P = expit(F)
        P /= P.sum(axis=1, keepdims=True)
        return P

    @available_if(_is_logistic)
    def predict_log_proba(self, X):
        return np.log(self.predict_proba(X))

    def predict(self, X):
        F = self._outputs(X)
        if F.shape[1] == 1:
            return self.classes_[(F[:, 0] > 0).astype(int)]
        return self.classes_[np.argmax(F, axis=1)]
