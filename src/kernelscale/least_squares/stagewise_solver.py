"""Stagewise regression on seeded feature blocks: Algorithm 3 of paper 5 (docs/algorithms.md
section 5.2), as plain functions on arrays; the estimators are in
:mod:`kernelscale.least_squares.stagewise`.

For t = 1..T: GEN a block of p features from (seed, t), fit what the current predictions miss
on that block, update the predictions. Blocks are never stored: block t is regenerated from
``(seed, t)`` by :mod:`kernelscale.ops.feature_blocks` and applied to rows by
:class:`kernelscale.ops.features.FeatureOperator`, so a fitted model holds the seed, the PCA map
and the block weights only, and prediction regenerates every block (:func:`replay_stage`).

GEN (:func:`feature_spec`: a kernel and a feature method) works on the data after the PCA the
estimators apply (appendix A.2.1). The kernel is a kernelscale kernel or its name; the feature
method picks the feature form (:mod:`kernelscale.ops.feature_blocks`), None the kernel's
default (:data:`DEFAULT_METHOD`):

- Gaussian (default ``"cos"``): random Fourier features sqrt(2/p) cos(z w + b) of
  exp(-|z - z'|^2 / (2 sigma^2)); ``"logit"``: random logits sigmoid(z w + b - pi) with the
  frequencies w ~ N(0, I / sigma^2) and phases b ~ U[0, 2 pi] of the same Fourier block, i.e.
  thresholds uniform in [-pi, pi] on random directions scaled by sigma; ``"cossin"`` also works
  (as for Laplacian and Matern kernels);
- Polynomial (default ``"tensorsketch"``): TensorSketch features of (gamma <z, z'> + coef0)^degree
  (``"maclaurin"`` also works);
- Linear (default ``"sample"``): p of the (reduced) features, drawn without replacement from
  ``block_rng(seed, t)`` (all of them when p >= d); ``"gaussian"`` projections also work.

Updates (``update``), each with an unpenalised intercept and a ridge ``alpha`` (section 5.4):

- ``"linear"``: ridge fit of the residual y - y_hat on the block (the paper's linear stages);
- ``"calibrated"``: the same fit on the block AND the current predictions (the paper's "simplest"
  calibration: "we only use the previous predictions as features in our new batch");
- ``"softmax"`` (classifiers only; the multinomial logistic loss, named as the loss is everywhere
  in the library): ``inner_iter`` steps of Algorithm 1 with the softmax link on the block, the
  current scores as a fixed offset (accelerated steps, the default of
  :func:`kernelscale.least_squares.generalized.generalized_least_squares`; monotone like the
  plain ones).

"No change" is always feasible and the ridge shrinks towards it, so the training residual
sum_i w_i |y_i - y_hat_i|^2 never increases with "linear" and "calibrated", and the training
logistic loss never increases with "softmax" (each stage starts at zero weights and Algorithm 1
is monotone); the squared residual of "softmax" stages is not guaranteed.

The passes over rows are stated against a row executor (:mod:`kernelscale.ops.rows`), so the same
code runs on numpy arrays and over the row chunks of dask arrays. On numpy arrays a stage's block
(n x p) is generated once and used by all its passes. Over dask chunks the least-squares updates
keep no block: each of a stage's two passes regenerates the block from Z in pieces of
``PIECE_ROWS`` rows inside its task, so what a task holds does not grow with its chunk's rows.
The first pass sums the moments of the block (and of P) about a shift per chunk, the mean of
its first piece; the tree merges them to one shift and the client centres them at the weighted
mean (the same moments as a pass for the mean and one about it, without the first pass and
without the cancellation of raw moments). The second pass updates the predictions as
P + F A + P B + c (the uncentred model, as :func:`replay_stage`). Both equal the numpy path up to
rounding. Softmax stages, whose inner iterations read the block many times, persist it.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from scipy import linalg

from ..base.monitor import IterationMonitor
from ..base.validation import as_float_array
from ..kernels import make_kernel
from ..linalg import factor_spd
from ..losses import softmax_loss
from ..ops.feature_blocks import METHODS, FeatureBlockSpec, kernel_family
from ..ops.features import PIECE_ROWS, FeatureOperator
from ..ops.lapack_threads import one_lapack_thread
from ..ops.memory import default_memory_budget, plan_rows
from ..ops.rows import executor, is_dask, row_weights, weighted_sum
from .generalized import generalized_least_squares, gls_fixed_bytes, squared_error
from .ridge import centred_moments, merge_moments

__all__ = [
    "stagewise_regression",
    "stage_task_rows",
    "stagewise_fit_bytes",
    "feature_spec",
    "feature_method_of",
    "replay_stage",
    "DEFAULT_METHOD",
    "StagewiseResult",
]

#: the feature method of each kernel family for feature_method=None (the linear kernel's column
#: subsets are the paper's "sample" generator)
DEFAULT_METHOD = {"fourier": "cos", "polynomial": "tensorsketch", "linear": "sample"}

StagewiseResult = namedtuple("StagewiseResult", "coef intercept calibration objective_history n_stages")


# ----------------------------------------------------------------------------------------------
# GEN


def feature_method_of(kernel, feature_method=None):
    """The feature method of ``kernel`` (an object or a name): ``feature_method``, or the kernel
    family's default (:data:`DEFAULT_METHOD`) when None; a ValueError naming the argument when the
    kernel has no random features or the method is not one of its family."""
    kernel = make_kernel(kernel, "kernel")
    try:
        family = kernel_family(kernel)
    except ValueError as err:
        raise ValueError(f"kernel={kernel!r} cannot be used by the stagewise method: {err}") from None
    if feature_method is None:
        return DEFAULT_METHOD[family]
    if METHODS.get(feature_method, (None,))[0] != family:
        available = tuple(k for k, v in METHODS.items() if v[0] == family)
        raise ValueError(
            f"feature_method={feature_method!r} is not available for {type(kernel).__name__}; pass "
            f"one of {available}, or feature_method=None for its default {DEFAULT_METHOD[family]!r}."
        )
    return feature_method


def feature_spec(kernel, n_features, block_size, seed, feature_method=None, dtype=np.float64):
    """GEN of Algorithm 3 as a seeded feature map: block t of features of data with
    ``n_features`` columns is regenerated from ``(seed, t)`` only.

    ``kernel``: a resolved kernel (no sigma="median") or a name; ``feature_method``: see the
    module docstring (None: the kernel's default, e.g. "sample" for the linear kernel).
    """
    method = feature_method_of(kernel, feature_method)
    return FeatureBlockSpec(make_kernel(kernel, "kernel"), n_features, block_size, seed, dtype, method)


# ----------------------------------------------------------------------------------------------
# Algorithm 3


def _stage_update(F, Pc, A, B, c0):
    """F A (+ (P - pbar) B) + c0: a fitted stage's change of the predictions, per row."""
    update = F @ A
    if B is not None:
        update += Pc @ B
    update += c0
    return update


def _fit_stage_ls(op, F, P, Y, w, uniform, alpha, calibrated):
    """Ridge fit of R = Y - P on [F, P] ("calibrated") or F ("linear"), intercept unpenalised,
    on host arrays (``op``: :class:`~kernelscale.ops.rows.HostRows`). Centres F in place.
    Returns (A (p, k), B (k, k) or None, c (k,)) in float64 for the uncentred model
    y_hat + F A + y_hat B + c, and the update itself (n, k) in F's dtype.
    """
    dtype = F.dtype
    p, k = F.shape[1], Y.shape[1]
    R = Y - P
    f_mean = op.weighted_mean(F, w)
    F -= f_mean.astype(dtype)
    blocks = [F]
    p_mean = None
    if calibrated:
        p_mean = op.weighted_mean(P, w)
        blocks.append(P - p_mean.astype(dtype))
    sizes = [b.shape[1] for b in blocks]
    total = sum(sizes)
    gram = np.empty((total, total))
    cross = np.empty((total, k))
    edges = np.cumsum([0] + sizes)
    for i, Bi in enumerate(blocks):
        cross[edges[i] : edges[i + 1]], *grams = op.weighted_grams(
            Bi, w, [R] + [None if j == i else blocks[j] for j in range(i, len(blocks))], uniform=uniform)
        for j, g in zip(range(i, len(blocks)), grams):
            gram[edges[i] : edges[i + 1], edges[j] : edges[j + 1]] = g
            gram[edges[j] : edges[j + 1], edges[i] : edges[i + 1]] = g.T
    c0 = weighted_sum(R, w)
    A, B, c = _solve_stage(gram, cross, c0, f_mean, p_mean, alpha, p, dtype)
    update = op.map(_stage_update, F, blocks[1] if calibrated else None, A=A.astype(dtype),
                    B=None if B is None else B.astype(dtype), c0=c0.astype(dtype), width=k, dtype=dtype)
    return A, B, c, update


def _solve_stage(gram, cross, r_mean, f_mean, p_mean, alpha, p, dtype):
    """The stage's ridge solution from the weighted moments of the centred [F, P - pbar] (``gram``,
    ``cross`` with R = Y - P): (A (p, k), B (k, k) or None, c (k,)) in float64 for the
    uncentred model y_hat + F A + y_hat B + c, c from the coefficients rounded to ``dtype``
    (``gram`` gets alpha on its diagonal in place)."""
    gram[np.diag_indices_from(gram)] += alpha
    factor = factor_spd(gram, "the Gram matrix of a feature block", "use alpha > 0 (e.g. 1e-6)")
    with one_lapack_thread(gram.shape[0]):
        sol = linalg.cho_solve(factor, cross, check_finite=False)
    A = sol[:p]
    c = r_mean - f_mean @ A.astype(dtype).astype(np.float64)
    B = None
    if p_mean is not None:
        B = sol[p:]
        c -= p_mean @ B.astype(dtype).astype(np.float64)
    return A, B, c


def _shifted_moments(Z, w, Y, P, *, op, t, calibrated):
    """One row chunk's weighted moments of C = [phi_t(z), p ("calibrated")] about a shift s of
    the chunk's own (the mean of its first piece), with R = Y - P: the tuple (sum_i w_i, s,
    sum_i w_i (c_i - s), sum_i w_i (c_i - s)(c_i - s)^T, sum_i w_i (c_i - s) r_i^T, sum_i w_i r_i),
    float64, the features regenerated piece by piece. Close to the chunk's mean, s keeps the
    centred moments free of cancellation (:func:`~kernelscale.least_squares.ridge.merge_moments`)."""
    p, k = op.spec.n_features_out, Y.shape[1]
    q = p + (k if calibrated else 0)
    total, gram, cross = 0.0, np.zeros((q, q)), np.zeros((q, k))
    shift, first, r_sum = np.zeros(q), np.zeros(q), np.zeros(k)
    for s in range(0, Z.shape[0], PIECE_ROWS):
        piece = slice(s, s + PIECE_ROWS)
        C = np.empty((min(Z.shape[0], s + PIECE_ROWS) - s, q), dtype=Y.dtype)
        C[:, :p] = op.transform(Z[piece], [t])
        if calibrated:
            C[:, p:] = P[piece]
        if s == 0:  # in C's dtype, as it is subtracted
            shift = C.mean(axis=0, dtype=np.float64).astype(C.dtype).astype(np.float64)
        C -= shift.astype(C.dtype)
        R = Y[piece] - P[piece]
        wp = w[piece]
        total += float(wp.sum())
        first += wp.astype(C.dtype) @ C
        r_sum += wp @ R.astype(np.float64)
        root = np.sqrt(wp).astype(C.dtype)[:, None]
        C *= root
        R *= root
        gram += np.dot(C.T, C)  # a symmetric rank-k update
        cross += np.dot(C.T, R)
    return total, shift, first, gram, cross, r_sum


def _fit_stage_pieces(rows, op, Z, t, P, Y, w, alpha, calibrated, dtype):
    """:func:`_fit_stage_ls` over the row chunks of dask arrays in two passes: the moments of
    [F, P] about a shift per chunk and with the residual (:func:`_shifted_moments`, merged up the
    tree and centred here), then the new predictions P + F A + P B + c (:func:`replay_stage`).
    Each pass regenerates the features of stage t from Z in pieces of ``PIECE_ROWS`` rows, never
    held for a whole chunk. Returns (A, B, c) as :func:`_fit_stage_ls` and the new predictions."""
    p = op.spec.n_features_out
    mean, gram, cross, r_sum = centred_moments(rows.reduce(_shifted_moments, Z, w, Y, P, op=op, t=t,
                                                           calibrated=calibrated, combine=merge_moments))
    A, B, c = _solve_stage(gram, cross, r_sum, mean[:p], mean[p:] if calibrated else None, alpha, p, dtype)
    P = rows.map(_replay_chunk, Z, P, op=op, t=t, coef=A.astype(dtype), intercept=c.astype(dtype),
                 calibration=None if B is None else B.astype(dtype), width=Y.shape[1], dtype=dtype)
    return A, B, c, P


def replay_stage(op, Z, t, P, coef, intercept, calibration):
    """y_hat + F_t A + y_hat B + c for the fitted stage t (B absent for linear/logistic stages),
    F_t = block t of the features of Z."""
    out = op.scores(Z, coef[None], [t])
    if calibration is not None:
        out += P @ calibration
    out += intercept
    out += P
    return out


def _replay_chunk(Z, P, op, t, coef, intercept, calibration):
    return replay_stage(op, Z, t, P, coef, intercept, calibration)


def _constant_rows(Z, value):
    P = np.empty((Z.shape[0], value.shape[0]), dtype=Z.dtype)
    P[:] = value
    return P


def _features(Z, op, t):
    """Block t of the features of the rows Z, regenerated from (seed, t) where the task runs."""
    return op.transform(Z, [t])


def _apply_step(F, P, A, c, in_place):
    step = F @ A
    step += c
    return _add(P, step, in_place)


def _add(P, step, in_place):
    """P + step; in place on host arrays (a dask task leaves its input chunks as they are)."""
    if not in_place:
        return P + step
    P += step
    return P


def _objective(P, Y, w, update):
    if update == "softmax":
        return softmax_loss(P, Y, w)[1]
    return squared_error(Y, P, w)


def stage_task_rows(Z, update):
    """Rows whose features a stage holds at once: all of a host Z; of a dask Z, a task's chunk, or
    ``PIECE_ROWS`` of it where the stage regenerates its features piece by piece (every update but
    "softmax", whose inner iterations keep the block)."""
    if not is_dask(Z):
        return Z.shape[0]
    rows = max(Z.chunks[0])
    return rows if update == "softmax" else min(rows, PIECE_ROWS)


def stagewise_fit_bytes(n, k, spec, update, itemsize):
    """Bytes Algorithm 3 holds while fitting one stage (the block of the map ``spec``, its Gram
    and the n x k arrays), not counting the data itself."""
    p = spec.n_features_out
    q = p + (k if update == "calibrated" else 0)
    need = itemsize * n * p * (spec.workspace + 1) + 3 * 8 * q * q + itemsize * n * k * 7
    if update == "softmax":
        need += gls_fixed_bytes(n, p, k, itemsize, with_offset=True)
    return need


def stage_store_bytes(p, k, update, itemsize):
    """Bytes one fitted stage keeps: its p x k coefficients, k intercepts and (``"calibrated"``)
    k x k calibration, twice (the list of stages, then the stacked result) plus the arrays'
    headers. A fit of many stages (the front door's, stopped by its clock) holds n_stages of them."""
    values = p * k + k + (k * k if update == "calibrated" else 0)
    return 2 * values * itemsize + 3 * 112


def stagewise_regression(
    Z,
    Y,
    spec,
    *,
    update="linear",
    n_stages=8,
    inner_iter=50,
    alpha=1e-6,
    init=None,
    sample_weight=None,
    stages=None,
    budget=None,
    monitor=None,
):
    """Algorithm 3 on data Z (n, d) (already PCA-reduced) and targets Y (n, k), GEN the
    feature map ``spec`` (a FeatureBlockSpec, e.g. :func:`feature_spec`).

    ``init`` (k,) is the stage-0 prediction (logistic: scores); ``stages`` = (coef, intercept,
    calibration) of an earlier fit on the same data, replayed before continuing (warm start).
    Fits stages until ``n_stages`` in total or until ``monitor.update`` returns True, holding
    at most ``budget`` bytes (an int; None: :func:`kernelscale.ops.memory.default_memory_budget`).

    Returns
    -------
    StagewiseResult(coef (T, p, k), intercept (T, k), calibration (T, k, k) or None, in Z's
    dtype; objective_history (T + 1,): the weighted squared residual ("linear",
    "calibrated") or softmax loss ("softmax") after every stage; n_stages = T).
    """
    distributed = is_dask(Z)
    if not distributed:
        Z = as_float_array(Z, "Z", accept_sparse=True)
        Y = np.asarray(Y, dtype=Z.dtype)
    n = Z.shape[0]
    dtype = Z.dtype
    k = Y.shape[1]
    uniform = sample_weight is None
    budget = default_memory_budget() if budget is None else int(budget)
    rows_n = stage_task_rows(Z, update)
    need = (stagewise_fit_bytes(rows_n, k, spec, update, dtype.itemsize)
            + n_stages * stage_store_bytes(spec.n_features_out, k, update, dtype.itemsize))
    plan_rows(
        1, 1, need, budget,
        f"a stagewise fit of {n_stages} stages ({rows_n} x {spec.n_features_out} features per block)",
        "reduce block_size or n_stages, pass float32 data (halves it), or increase max_memory",
    )
    rows = executor(budget, Z)
    w = row_weights(rows, Z, sample_weight, n)
    op = FeatureOperator(spec.astype(dtype), budget)
    p = spec.n_features_out
    P = rows.map(_constant_rows, Z, value=np.zeros(k) if init is None else np.asarray(init, dtype=dtype),
                 dtype=dtype, width=k)
    coefs, intercepts, calibrations = [], [], []
    if stages is not None:
        for t in range(stages[0].shape[0]):
            cal = None if stages[2] is None else stages[2][t]
            P = rows.map(_replay_chunk, Z, P, op=op, t=t, coef=stages[0][t], intercept=stages[1][t],
                         calibration=cal, width=k, dtype=dtype)
            coefs.append(stages[0][t])
            intercepts.append(stages[1][t])
            calibrations.append(cal)
    history = [rows.sum(_objective, P, Y, w, update=update)]
    monitor = monitor if monitor is not None else IterationMonitor()
    for t in range(len(coefs), n_stages):
        if update == "softmax":
            # the inner iterations read the block many times: kept (persisted over dask chunks)
            F = rows.map(_features, Z, op=op, t=t, width=p, dtype=dtype)
            result = generalized_least_squares(
                F, Y, link="softmax", alpha=alpha, max_iter=inner_iter, tol=0.0,
                sample_weight=w, offset=P, budget=budget,
            )
            A, B, c = result.coef.T, None, result.intercept
            P = rows.map(_apply_step, F, P, A=A.astype(dtype), c=c.astype(dtype), in_place=not distributed,
                         width=k, dtype=dtype)
            del F
        elif distributed:
            # every pass regenerates the block from Z piece by piece: a worker holds no n x p array
            A, B, c, P = _fit_stage_pieces(rows, op, Z, t, P, Y, w, alpha, update == "calibrated", dtype)
        else:
            A, B, c, step = _fit_stage_ls(rows, _features(Z, op, t), P, Y, w, uniform, alpha, update == "calibrated")
            P = _add(P, step, in_place=True)
        coefs.append(A.astype(dtype))
        intercepts.append(c.astype(dtype))
        calibrations.append(None if B is None else B.astype(dtype))
        history.append(rows.sum(_objective, P, Y, w, update=update))
        if monitor.update(objective=history[-1], stage=t):
            break
    T = len(coefs)
    coef = np.asarray(coefs, dtype=dtype).reshape(T, p, k)
    intercept = np.asarray(intercepts, dtype=dtype).reshape(T, k)
    calibration = np.asarray(calibrations, dtype=dtype).reshape(T, k, k) if update == "calibrated" else None
    return StagewiseResult(coef, intercept, calibration, np.asarray(history), T)
