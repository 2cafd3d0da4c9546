"""The doubly stochastic estimators (paper 2, docs/algorithms.md section 2): ``DoublyStochasticRegressor``
and ``DoublyStochasticClassifier``.

The method on arrays is :mod:`.solver` (:func:`~.solver.dsg_iterations`, :func:`~.solver.dsg_predict`);
what the "auto" parameters resolve to is :mod:`.defaults`; the mini-batches, and the row chunks of
a dask X they read, are :mod:`.batches`; the iterations on a dask X, computed where its row chunks
are, are :mod:`.distributed`; the fit, partial_fit and predict logic both estimators share
(the memory plan, warm starts, streams, the blocks kept on a GPU, dask input) is :mod:`.fitting`.
The estimators here code the targets and hold the parameters and their documentation.

Losses: the regressor's squared loss |f(x) + b - y|^2 / 2 (one or several targets); the
classifier's "hinge" max(0, 1 - y f) with y in {-1, +1} per class (one-vs-rest); "logistic"
log(1 + exp(-y f)) per class (one-vs-rest for more than two classes); "softmax" the softmax
cross-entropy over one-hot targets ("logistic" for two classes).

The regressor's intercept (``fit_intercept=True``, the default; docs/algorithms.md section 2.4).
Algorithm 1 has no constant term, and a Gaussian model pays for one in its ridge and its steps.
``DoublyStochasticRegressor`` fits f to the targets less ``intercept_``, their weighted mean on the
model's first mini-batch (``partial_fit``: its first call's first chunk), and ``predict`` adds it
back. The first mini-batch holds the same rows for numpy and dask input (unless the workers
cannot hold a dask X whole: then windows of row chunks order the rows), so the intercept is the
same too.
``fit_intercept=False`` is the paper's algorithm.

Weights: ``fit`` rescales sample_weight to mean 1, so the objective is the weighted mean loss
sum_i w_i l_i / sum_i w_i (and a full batch equals repeating samples); ``partial_fit`` uses the
weights as given (mean 1 is the neutral scale).
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.special import expit
from sklearn.base import ClassifierMixin, RegressorMixin, _fit_context
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.class_weight import compute_sample_weight
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import column_or_1d

from ..base.classifier import check_class_memory, one_hot, one_vs_rest_targets, require_two_classes
from ..base.estimator import FiniteR2Mixin, check_class_weight, check_some_weight, target_means
from ..base.validation import check_finite_result, check_label_types, check_sample_weight, validate_data
from ..losses import softmax
from .defaults import AUTO_PRECONDITIONED_STEP_CLASSIFIER
from .fitting import _FLOAT_DTYPES, _DoublyStochasticBase

__all__ = ["DoublyStochasticRegressor", "DoublyStochasticClassifier"]

_BALANCED_PARTIAL = ("class_weight='balanced' needs the whole training set and is not available in partial_fit; "
                     "pass class_weight as a dict {label: weight} or use fit.")


def _code_chunk(block, labels, classes, soft, dtype):
    """Targets of one row chunk in the classifier's coding: ``block`` holds labels, or (``labels``
    given) one-hot rows over ``labels``; one-hot over ``classes`` when ``soft``, else +-1."""
    y = block if labels is None else labels[np.argmax(block, axis=1)]
    codes = np.searchsorted(classes, y)
    return (one_hot if soft else one_vs_rest_targets)(codes, classes.size, dtype)


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
        (:func:`dsg_auto_sizes`): for "sgd" two passes over the n samples of ``fit``,
        ceil(2 n / batch), within [128, 256]; for "preconditioned" four passes, at most 200. A
        ``fit`` that starts a model on n <= batch * n_iter / 4 numpy rows keeps running scores of
        all n rows instead of rescoring each mini-batch (the same iterates up to rounding;
        :mod:`kernelscale.doubly_stochastic.solver`, "Running scores").
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
        theta = step_size * t0). "auto" (:mod:`kernelscale.doubly_stochastic.defaults`): for
        "preconditioned", 1 with the squared loss and 0.5 with the classification losses; for
        "sgd", 1.5 / (lambda_1 + nu) with the squared loss (lambda_1 the top eigenvalue of the
        first block's feature covariance on the first mini-batch; 2 / lambda_1 diverges; at most
        0.5 / nu; kept in ``step_size_``; a warm start that switches from a number to "auto"
        continues with 1), 10 with the hinge and logistic losses, whose derivative is bounded by
        1, and 30 with the softmax (more than two classes), whose derivative is only about 1/k
        per wrong class. Chosen on held-out parts of the training data
        (benchmarks/studies/doubly_stochastic.md).
    t0 : "auto" or float > 0, default="auto"
        Iterations over which gamma_t halves. "auto" (resolved in ``t0_``): 100 for solver="sgd";
        for "preconditioned" the mini-batches of one pass, ceil(n / batch_size) (first
        ``partial_fit`` call: its own mini-batches), so gamma_t ~ step_size / passes; the
        authors' nearly constant 1 / (1 + 1e-4 t) made the error grow over many passes
        (docs/algorithms.md section 2.3).
    solver : {"auto", "sgd", "preconditioned"}, default="auto"
        Algorithm 1, or the authors' preconditioned block variant (:mod:`kernelscale.doubly_stochastic.solver`).
        "auto" (resolved in ``solver_``): "preconditioned" for a ``fit`` on at least 2048 samples,
        "sgd" on fewer and for ``partial_fit`` (chosen on held-out parts of the training data).
    feature_method : str or None, default=None
        Random-feature form (kernelscale.ops.feature_blocks): "cos" or "cossin" for shift-invariant
        kernels, "tensorsketch" or "maclaurin" for polynomial; None is the kernel's default.
    precond_ridge : float > 0, default=1e-3 (DoublyStochasticClassifier: 1e-2)
        Ridge of the preconditioner, relative to the mean diagonal of the block covariance (the
        authors' 1e-7 I on their feature scale is 8.2e-4; read as relative, 1e-7 lets the
        variant overfit each batch). The classifier's larger default damps the block fits of its
        subgradients (see step_size).
    shuffle : bool, default=True
        Permute the data each epoch in ``fit``; False takes batch_size chunks in order (then
        ``fit`` equals ``partial_fit`` over the same chunks).
    warm_start : bool, default=False
        ``fit`` continues the previous fit (iteration counter, seeds, step sizes).
    max_memory : int, str or None
        Budget for the coefficient store and one iteration's batch x block_size features,
        checked before allocating; predictions run over row chunks within it.
    device : None, "auto", "cpu", "cuda" or "cuda:N", default=None
        Where kernel and feature blocks are computed (docs/gpus.md): None is numpy on the host
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
        The t0 of the step sizes, resolved when the model started ("auto": see t0).
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
        + """    loss : "squared", default="squared"
        The loss (the regressor's only one; the parameter keeps the vocabulary of the classifier).
"""
        + _DOC_PARAMS
        + """    fit_intercept : bool, default=True
        Regressor only: fit f to the targets less their weighted mean on the model's first
        mini-batch (``intercept_``, added back by ``predict``). Read when a model starts: warm
        starts and later ``partial_fit`` calls keep the offset. The paper's Algorithm 1 has no
        intercept (False), but its model has no constant term either, and targets far from zero
        cost it its ridge and its steps (benchmarks/studies/doubly_stochastic.md, "The
        regressor's intercept"). With ``shuffle=True`` (fit) the first mini-batch is a random
        sample; with ``shuffle=False`` and in ``partial_fit`` it is the first rows, whose mean is
        only as good an offset as they are a sample. A model saved before this parameter existed
        loads with fit_intercept=True but no offset.
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
        + """    loss : {"hinge", "logistic", "softmax"}, default="hinge"
        The loss, as above.
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
    # the preconditioned solver's "auto" step for the classification losses (with precond_ridge 1e-2)
    _PRECONDITIONED_STEP = AUTO_PRECONDITIONED_STEP_CLASSIFIER

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
        loss = getattr(self, "loss_", self.loss)  # the parameter until fit has checked it (a dask fit's plan)
        if loss == "softmax":
            return "logistic" if k == 1 else "softmax"
        return loss

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
                all_classes = np.unique(check_label_types(np.asarray(classes), "classes"))
            else:
                all_classes = labels
            require_two_classes(all_classes)
            self.classes_ = all_classes
            self.loss_ = self.loss
        elif classes is not None and not np.array_equal(np.unique(check_label_types(np.asarray(classes), "classes")),
                                                        self.classes_):
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
            check_class_weight(self.class_weight, self.classes_)
            weights = compute_sample_weight(self.class_weight, self.classes_)
            sw = y.map_blocks(class_weight_chunk, sw, self.classes_, weights, dtype=np.float64, meta=np.empty(0))
        return Y, sw

    def _targets(self, X, y, sample_weight, *, first, partial, classes=None):
        check_label_types(y)  # partial_fit's y has not been through validate_data
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
                check_class_weight(self.class_weight, self.classes_)
                with np.errstate(over="ignore"):
                    sw = check_some_weight(sw * compute_sample_weight(self.class_weight, y))
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
