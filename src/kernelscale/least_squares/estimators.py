"""The classifiers of paper 5's Algorithms 1 and 2 (docs/algorithms.md section 5):
:class:`GeneralizedLeastSquaresClassifier` and :class:`CalibratedLeastSquaresClassifier`.

They validate the data, encode the classes as one-hot targets (or take a multi-label indicator
matrix), parse ``max_memory`` once into bytes, and hand the arrays to the solver functions:
:func:`kernelscale.least_squares.generalized.generalized_least_squares` (Algorithm 1) and
:func:`kernelscale.least_squares.calibrated.calibrated_least_squares` (Algorithm 2). The
mathematics, and where it departs from the paper, is described in those modules and in
:mod:`kernelscale.least_squares.ridge` (the ``alpha="auto"`` ridge).
"""

from __future__ import annotations

import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, _fit_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import check_is_fitted, column_or_1d

from ..base.classifier import check_class_memory, encode_classes, one_hot
from ..base.boundary import BoundaryMixin
from ..base.estimator import INPUT_ATTRIBUTES, commit_fit, fit_weights, validate_fit_data
from ..base.monitor import IterationMonitor
from ..base.params import DEVICE_CONSTRAINT, MEMORY_CONSTRAINT
from ..base.validation import check_finite_result, validate_data
from ..losses import softmax
from ..ops.features import PIECE_ROWS
from ..ops.memory import parse_memory, plan_rows
from ..simplex import project_simplex
from .calibrated import calibrated_least_squares, calibrated_predict, check_basis, cls_fixed_bytes
from .generalized import LINKS, SOLVERS, generalized_least_squares, gls_fixed_bytes

__all__ = ["GeneralizedLeastSquaresClassifier", "CalibratedLeastSquaresClassifier"]


class _LeastSquaresClassifierBase(ClassifierMixin, BoundaryMixin, BaseEstimator):
    """Parameters and validation shared by the two classifiers."""

    _parameter_constraints: dict = {
        "alpha": [Interval(Real, 0, None, closed="left"), StrOptions({"auto"})],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "class_weight": [StrOptions({"balanced"}), dict, None],
        "warm_start": ["boolean"],
        "max_memory": MEMORY_CONSTRAINT,
        "device": DEVICE_CONSTRAINT,
        "verbose": ["verbose"],
        "callback": [callable, None],
    }

    def _set_common_params(self, alpha, max_iter, tol, class_weight, warm_start, max_memory, device, verbose, callback):
        self.alpha = alpha
        self.max_iter = max_iter
        self.tol = tol
        self.class_weight = class_weight
        self.warm_start = warm_start
        self.max_memory = max_memory
        self.device = device
        self.verbose = verbose
        self.callback = callback

    def _validate_fit_data(self, X, y, sample_weight, budget, allow_multilabel=False):
        """X, y, the targets Y (n, k), classes, weights, whether y is multi-label, and the
        attributes validation would set (for :func:`commit_fit`); the estimator is not touched.
        ``budget``: ``max_memory`` in bytes."""
        X, y, fitted = validate_fit_data(
            self, X, y, dtype=[np.float64, np.float32], multi_output=allow_multilabel,
        )
        multilabel = False
        if allow_multilabel and y.ndim == 2:
            if y.shape[1] == 1:
                y = column_or_1d(y, warn=True)
            else:
                kind = type_of_target(y, input_name="y")
                if kind != "multilabel-indicator":
                    raise ValueError(
                        f"2-d y must be a multi-label indicator matrix of 0/1 (got type {kind!r}); "
                        f"pass a 1-d array of class labels for multi-class problems."
                    )
                multilabel = True
        if multilabel:
            if self.class_weight is not None:
                raise ValueError(
                    "class_weight is not supported for multi-label targets; pass per-sample "
                    "weights as sample_weight instead."
                )
            classes = np.arange(y.shape[1])
            Y = np.asarray(y, dtype=X.dtype)
            sw = fit_weights(sample_weight, None, X)
        else:
            classes, codes = encode_classes(y)
            # the n x k targets, scores and residuals that gls_fixed_bytes counts (with the rest, later)
            check_class_memory(7 * X.dtype.itemsize * X.shape[0] * classes.size, budget, classes.size,
                               "the one-hot targets, scores and residuals")
            Y = one_hot(codes, classes.size, X.dtype)
            sw = fit_weights(sample_weight, self.class_weight, X, codes, classes)
        return X, y, Y, classes, sw, multilabel, fitted

    def _check_warm_start(self, X, classes):
        if not (self.warm_start and hasattr(self, "classes_")):
            return False
        if self.coef_.shape[-1] != X.shape[1] or not np.array_equal(self.classes_, classes):
            raise ValueError(
                "warm_start=True continues the previous fit, but X or y changed (number of "
                "features or classes); set warm_start=False to fit from scratch."
            )
        return True

    def _warn_not_converged(self):
        warnings.warn(
            f"{type(self).__name__} did not converge in max_iter={self.max_iter} iterations "
            f"(tol={self.tol}); increase max_iter or tol.",
            ConvergenceWarning,
            stacklevel=3,
        )


class GeneralizedLeastSquaresClassifier(_LeastSquaresClassifierBase):
    """Multi-class GLM fitted by generalized least squares (paper 5, Algorithm 1, eq. 14).

    Iterates W <- W - (1/L) Sigma^{-1} E[(g(W x + b) - y) x^T] with g the link, Sigma the
    weighted second moment of the (centred) features plus ``alpha`` I, factorised once; by
    default with Nesterov momentum in the Sigma metric (``solver="accelerated"``, the paper's
    suggested accelerated variant; see :func:`generalized_least_squares`). The softmax link
    minimises the multinomial logistic loss (the calibrated loss of eq. 13) plus
    (alpha/2)|W|^2, decreasing it at every iteration for any L >= 1/2; the identity link is
    ridge regression on one-hot targets, reached in ONE iteration. The intercept is fitted
    unpenalised (see :mod:`kernelscale.least_squares.generalized`).

    Parameters
    ----------
    link : {"softmax", "identity"}, default="softmax"
    L : float, default=1.0
        Lipschitz constant of the link (the inverse step size). 1 is valid for both links; 1/2
        is still valid for softmax (paper footnote 3) and takes longer steps. Smaller values
        (below 1/2 for softmax, 1 for identity) raise a ValueError.
    alpha : float >= 0 or "auto", default="auto"
        Ridge added to Sigma (and (alpha/2)|W|^2 to the objective). Keeps Sigma invertible when
        features have zero variance or are collinear; alpha=0 then raises a ValueError. "auto":
        up to 2048 features, the ridge (relative to the mean feature variance) with the smallest
        generalized cross-validation error of the ridge regression of the one-hot targets;
        above, 1e-6 times the mean feature variance (:mod:`kernelscale.least_squares.ridge`).
        Either way the fit does not depend on the scale of X; a float is an absolute ridge. The
        resolved value is ``alpha_``. On separable training data (e.g. MNIST with 4000 random
        Fourier features) the softmax loss has no unpenalised minimiser: the weights grow until
        the small ridge balances them, and the fit may stop at ``max_iter`` (a ConvergenceWarning
        says so). The paper's parameter-free Algorithm 1 is a fixed number of plain steps:
        ``solver="gls", tol=0, max_iter=...``.
    max_iter : int, default=500
    tol : float >= 0, default=1e-4
        Stop when the guaranteed decrease of a step is at most tol * objective. This bounds
        the objective gap only from below (the gap can be 100x larger when the loss is flat,
        as for confident predictions). The default stops several times sooner than 1e-6 at a
        test error a fraction of a point higher on MNIST (benchmarks/studies/least_squares.md);
        pass 1e-6 to optimise further.
    solver : {"accelerated", "gls"}, default="accelerated"
        "gls": eq. 14 as printed (Algorithm 1). "accelerated": the same step from a
        Nesterov-extrapolated point, restarted whenever it would raise the loss; same cost per
        iteration, far fewer iterations (benchmarks/studies/least_squares.md).
    class_weight : "balanced", dict or None
    warm_start : bool, default=False
        Start from the previous ``coef_`` / ``intercept_`` (same features and classes); the
        momentum of "accelerated" starts afresh.
    max_memory : int, str or None
        Budget for Sigma, its factor and the n x k work arrays; checked before allocating,
        parsed once per fit.
    device : None, "auto", "cpu", "cuda" or "cuda:N", default=None
        Where kernel and feature blocks are computed (docs/gpus.md): None is numpy on the host
        (a torch tensor as input selects its device); the others need torch.
    verbose : int, default=0
    callback : callable or None
        Receives {"iteration", "objective", "decrement"} after every iteration; returning True
        stops the fit.

    Attributes
    ----------
    classes_ : (k,); coef_ : (k, d); intercept_ : (k,) (in X's dtype; binary problems keep both
    softmax rows); n_iter_ : int; objective_history_ : (n_iter_ + 1,) objective at every iterate;
    alpha_ : float, the ridge used; n_features_in_ : int.
    """

    _parameter_constraints: dict = {
        **_LeastSquaresClassifierBase._parameter_constraints,
        "link": [StrOptions(set(LINKS))],
        "L": [Interval(Real, 0, None, closed="neither")],
        "solver": [StrOptions(set(SOLVERS))],
    }

    def __init__(
        self, link="softmax", *, L=1.0, alpha="auto", max_iter=500, tol=1e-4, solver="accelerated",
        class_weight=None, warm_start=False, max_memory=None, device=None, verbose=0, callback=None,
    ):
        self.link = link
        self.L = L
        self.solver = solver
        self._set_common_params(alpha, max_iter, tol, class_weight, warm_start, max_memory, device, verbose, callback)

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit on X (n, d) and class labels y (n,), with optional sample weights."""
        budget = parse_memory(self.max_memory)
        X, y, Y, classes, sw, _, fitted = self._validate_fit_data(X, y, sample_weight, budget)
        return self._fit_prepared(X, Y, classes, sw, fitted, budget=budget)

    def _budget_floor(self, rows, d, k, itemsize):
        """The bytes a fit on row chunks of ``rows`` rows checks its budget for, with its products
        over rows in blocks of PIECE_ROWS rows at least (kernelscale.dask.memory plans a
        distributed fit's budget at least this large: a budget of one row's products passes the
        check and then sums d x d Gram matrices row by row)."""
        return gls_fixed_bytes(rows, d, k, itemsize) + 8 * d * min(rows, PIECE_ROWS)

    def _fit_prepared(self, X, Y, classes, sw, fitted, budget=None):
        """The fit on validated X, one-hot targets Y (n, k) and weights sw: numpy arrays, or dask
        arrays with the same row chunks (:mod:`kernelscale.dask.fit`), fitted over them.
        ``budget``: ``max_memory`` in bytes (parsed here when not given)."""
        budget = parse_memory(self.max_memory) if budget is None else budget
        warm = self._check_warm_start(X, classes)
        with IterationMonitor(self.verbose, self.callback, total=self.max_iter, desc="GLS") as monitor:
            result = generalized_least_squares(
                X, Y, link=self.link, L=self.L, alpha=self.alpha, max_iter=self.max_iter, tol=self.tol,
                solver=self.solver, sample_weight=sw, coef_init=self.coef_ if warm else None,
                intercept_init=self.intercept_ if warm else None, budget=budget, monitor=monitor,
            )
        if not result.converged and not monitor.stopped_by_callback:
            self._warn_not_converged()
        fitted.update(classes_=classes, coef_=result.coef.astype(X.dtype), intercept_=result.intercept.astype(X.dtype),
                      n_iter_=result.n_iter, objective_history_=result.objective_history, alpha_=result.alpha)
        return commit_fit(self, fitted, stale=INPUT_ATTRIBUTES)

    def _scores(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        S = X @ self.coef_.T.astype(X.dtype)
        S += self.intercept_.astype(X.dtype)
        return check_finite_result(S, "decision values")

    def decision_function(self, X):
        """Scores W x + b, (n, k); for two classes the 1-d difference s_1 - s_0."""
        S = self._scores(X)
        if S.shape[1] != 2:
            return S
        with np.errstate(over="ignore"):
            return check_finite_result(S[:, 1] - S[:, 0], "decision values")  # the difference may overflow

    def predict_proba(self, X):
        """softmax(W x + b), or for the identity link W x + b projected onto the simplex (which
        keeps the argmax, so ``predict`` is the argmax of these probabilities)."""
        S = self._scores(X)
        return softmax(S) if self.link == "softmax" else project_simplex(S)

    def predict(self, X):
        S = self._scores(X)
        return self.classes_[np.argmax(S, axis=1)]


class CalibratedLeastSquaresClassifier(_LeastSquaresClassifierBase):
    """Classifier that learns the link function too: calibrated least squares (paper 5,
    Algorithm 2, eqs. 18-19).

    Each iteration fits the residual on x by least squares (Sigma factorised once), refits y on
    the basis ``basis`` of the current predictions, and projects the predictions onto the
    probability simplex (1-d class labels) or onto the hypercube [0, 1]^k (a 2-d multi-label
    indicator y). The weighted squared error never increases (see
    :func:`calibrated_least_squares`). Predictions replay all stages, so the model holds
    ``n_iter_`` weight matrices (d x k each).

    Parameters
    ----------
    basis : tuple of str, default=("y", "y2", "y3")
        Calibration functions, applied elementwise to the k predictions; names from
        ``BASIS_FUNCTIONS`` ("y", "y2", "y3", "y4").
    alpha : float >= 0 or "auto", default="auto"
        Ridge of both least-squares fits (it keeps Sigma invertible with zero-variance or
        collinear features). "auto": for the fits on X, 10 (``CLS_GCV_SCALE``) times the generalized
        cross-validation ridge of GeneralizedLeastSquaresClassifier (up to 2048 features; above,
        1e-6 times the mean feature variance; :mod:`kernelscale.least_squares.ridge`); for the
        calibration fits, 1e-6 times the mean variance of the basis. The fit does not depend on the scale of X; a
        float is an absolute ridge. ``alpha_`` is the ridge of the fits on X.
    max_iter : int, default=10
        Total number of iterations (with ``warm_start``, including earlier ones). Each
        iteration adds a linear model and a calibration, like a boosting stage, and the training
        error keeps falling: the relative-decrease rule of ``tol`` rarely fires, and flexible
        features overfit as iterations go on while raw pixels gain slowly (measurements on
        MNIST: benchmarks/studies/least_squares.md).
    tol : float >= 0, default=1e-4
        Stop when the squared error decreases by at most ``tol`` times its value, or falls below
        1e-12 times its initial value (separable data). Reaching ``max_iter`` does not warn.
    class_weight : "balanced", dict or None
        Not available with multi-label targets.
    warm_start : bool, default=False
        Keep the stages of the previous fit (on the same data) and add iterations until
        ``max_iter`` in total, like boosting.
    max_memory, device, verbose, callback : as GeneralizedLeastSquaresClassifier.

    Attributes
    ----------
    classes_ : (k,) (``arange(k)`` for multi-label); coef_ (n_iter_, k, d), intercept_
    (n_iter_, k), calibration_ (n_iter_, k |basis|, k), calibration_intercept_ (n_iter_, k);
    n_iter_; objective_history_ (n_iter_ + 1,) weighted squared error after every iteration;
    alpha_ : float; multilabel_ : bool; n_features_in_.

    Multi-label probabilities are clipped to [0, 1] and can be exactly 0 or 1, which
    scikit-learn's multi-label output check forbids (it wants (0, 1)); the estimator therefore
    does not set the ``multi_label`` tag, although it fits multi-label indicator targets.
    """

    _parameter_constraints: dict = {
        **_LeastSquaresClassifierBase._parameter_constraints,
        "basis": [tuple, list],
    }

    def __init__(
        self, basis=("y", "y2", "y3"), *, alpha="auto", max_iter=10, tol=1e-4, class_weight=None,
        warm_start=False, max_memory=None, device=None, verbose=0, callback=None,
    ):
        self.basis = basis
        self._set_common_params(alpha, max_iter, tol, class_weight, warm_start, max_memory, device, verbose, callback)

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit on X (n, d) and class labels y (n,) or a multi-label indicator y (n, k)."""
        check_basis(self.basis)
        budget = parse_memory(self.max_memory)
        X, y, Y, classes, sw, multilabel, fitted = self._validate_fit_data(
            X, y, sample_weight, budget, allow_multilabel=True)
        return self._fit_prepared(X, Y, classes, sw, fitted, multilabel, budget=budget)

    def _budget_floor(self, rows, d, k, itemsize):
        """As :meth:`GeneralizedLeastSquaresClassifier._budget_floor`, for Algorithm 2's state."""
        return cls_fixed_bytes(rows, d, k, k * len(check_basis(self.basis)), itemsize) + 8 * d * min(rows, PIECE_ROWS)

    def _fit_prepared(self, X, Y, classes, sw, fitted, multilabel=False, budget=None):
        """The fit on validated X, targets Y (n, k) and weights sw: numpy arrays, or dask
        arrays with the same row chunks (:mod:`kernelscale.dask.fit`), fitted over them.
        ``budget``: ``max_memory`` in bytes (parsed here when not given)."""
        budget = parse_memory(self.max_memory) if budget is None else budget
        basis = check_basis(self.basis)
        init, history = None, []
        if self._check_warm_start(X, classes):
            if self.multilabel_ != multilabel or tuple(self.basis_) != basis:
                raise ValueError("warm_start=True but the target type or basis changed; set warm_start=False.")
            if self.n_iter_ > self.max_iter:
                raise ValueError(
                    f"max_iter={self.max_iter} must be >= n_iter_={self.n_iter_} (iterations already "
                    f"fitted) when warm_start=True."
                )
            init = (self.coef_, self.intercept_, self.calibration_, self.calibration_intercept_)
            history = list(self.objective_history_[:-1])
        with IterationMonitor(self.verbose, self.callback, total=self.max_iter, desc="calibrated LS") as monitor:
            result = calibrated_least_squares(
                X, Y, basis=basis, alpha=self.alpha, max_iter=self.max_iter, tol=self.tol,
                sample_weight=sw, projection="hypercube" if multilabel else "simplex", init=init,
                budget=budget, monitor=monitor,
            )
        # no ConvergenceWarning at max_iter: it counts stages (the model's size), see its docstring
        fitted.update(
            classes_=classes, multilabel_=multilabel, basis_=basis, coef_=result.coef.astype(X.dtype),
            intercept_=result.intercept.astype(X.dtype), calibration_=result.calibration.astype(X.dtype),
            calibration_intercept_=result.calibration_intercept.astype(X.dtype), n_iter_=result.n_iter,
            objective_history_=np.asarray(history + list(result.objective_history)), alpha_=result.alpha,
        )
        return commit_fit(self, fitted, stale=INPUT_ATTRIBUTES)

    def predict_proba(self, X):
        """The projected predictions: class probabilities on the simplex (n, k), or for
        multi-label targets the probability of each label, in [0, 1]."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        k, m = self.coef_.shape[1], self.calibration_.shape[1]
        per_row = X.dtype.itemsize * (4 * k + 2 * m) + 16 * k
        chunk = plan_rows(
            X.shape[0], per_row, 0, parse_memory(self.max_memory), "calibrated least-squares predictions",
            "increase max_memory",
        )
        out = np.empty((X.shape[0], k), dtype=X.dtype)
        for s in range(0, X.shape[0], chunk):
            out[s : s + chunk] = calibrated_predict(
                X[s : s + chunk], self.coef_, self.intercept_, self.calibration_,
                self.calibration_intercept_, self.basis_, "hypercube" if self.multilabel_ else "simplex",
            )
        return out

    def predict(self, X):
        """Class labels, or for multi-label targets the indicator matrix predict_proba > 0.5."""
        P = self.predict_proba(X)
        if self.multilabel_:
            return (P > 0.5).astype(int)
        return self.classes_[np.argmax(P, axis=1)]
