"""The peers kernelscale is compared with, behind one interface.

Every peer is a small object with ``name``, ``task`` ("classification" or "regression"),
``available()`` (is its library importable), ``fit(X, y) -> self``, ``predict(X)``,
``decision_function(X)`` where the library offers one, and ``evaluate(X, y)`` returning
``{"test_error": ...}`` or ``{"mse": ...}``. ``prepare(X, y=None)`` converts data to the peer's
native format (LIBSVM nodes, VW text lines); ``fit``/``predict`` accept its result in place of
arrays, so a benchmark can keep the conversion out of the timed region. Class labels may be any
values; each peer maps them to what its library wants and back.

Hyperparameters are given in the peer library's own terms (C, gamma, alpha, ...), except that
every Gaussian-kernel peer also takes our bandwidth ``sigma``:

    k(x, z) = exp(-|x - z|^2 / (2 sigma^2))  =  exp(-gamma |x - z|^2)  with  gamma = 1 / (2 sigma^2)

which is scikit-learn's ``gamma`` (SVC, KernelRidge, RBFSampler, Nystroem) and LIBSVM's ``-g``.
Polynomial kernels are (gamma <x, z> + coef0)^degree in scikit-learn, LIBSVM and kernelscale.
:func:`C_from_lambda` and :func:`alpha_from_lambda` convert a per-sample-averaged
regularisation lambda into the peers' C and alpha.

The scikit-learn peers need only scikit-learn; LIBSVM, LIBLINEAR and Vowpal Wabbit come from
the ``bench`` extra (``pip install kernelscale[bench]``: libsvm-official, liblinear-official,
vowpalwabbit).
"""

from __future__ import annotations

import importlib
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import Any

import numpy as np

TASKS = ("classification", "regression")

__all__ = [
    "Peer", "Prepared", "PEERS", "make_peer", "available_peers", "gamma_from_sigma",
    "C_from_lambda", "alpha_from_lambda",
    "SklearnSVM", "SklearnLinearSVC", "SklearnLogisticRegression", "SklearnKernelRidge",
    "SklearnFeatureSGD", "RPegasos", "NPegasos", "SklearnNystroemRidge",
    "LibSVM", "LibLinear", "VowpalWabbit",
]


# ----------------------------------------------------------------------------------------------
# hyperparameter conversions


def gamma_from_sigma(sigma):
    """scikit-learn / LIBSVM ``gamma`` of the Gaussian kernel with bandwidth ``sigma``."""
    sigma = float(sigma)
    if not np.isfinite(sigma) or sigma <= 0:
        raise ValueError(f"sigma must be a positive number, got {sigma!r}.")
    return 1.0 / (2.0 * sigma**2)


def C_from_lambda(lam, n_samples):
    """C of ``1/2 |w|^2 + C sum_i loss_i`` equal (up to scale) to ``lam/2 |w|^2 + 1/n sum_i loss_i``."""
    return 1.0 / (float(lam) * int(n_samples))


def alpha_from_lambda(lam, n_samples):
    """Ridge/KernelRidge ``alpha`` of ``|y - f|^2 + alpha |f|^2`` equal (up to scale) to
    ``1/n |y - f|^2 + lam |f|^2``."""
    return float(lam) * int(n_samples)


def _resolve_gamma(sigma, gamma, default="scale"):
    if sigma is not None and gamma is not None:
        raise ValueError("give the Gaussian bandwidth as sigma or as gamma, not both.")
    if sigma is not None:
        return gamma_from_sigma(sigma)
    return default if gamma is None else float(gamma)


# ----------------------------------------------------------------------------------------------
# interface


@dataclass
class Prepared:
    """Data converted to a peer's native format (from :meth:`Peer.prepare`)."""

    data: Any
    n_samples: int
    y: Any = None
    classes: Any = None
    extra: dict = field(default_factory=dict)


class Peer:
    """Base class: one competitor library configured with its hyperparameters."""

    #: short name used in result records
    name = "peer"
    #: the library the peer runs (for the report)
    library = "scikit-learn"
    #: module whose import decides availability
    module = "sklearn"
    #: pip package that provides ``module``
    package = "scikit-learn"
    tasks = TASKS

    def __init__(self, task="classification", **params):
        if task not in self.tasks:
            raise ValueError(f"{type(self).__name__} handles task in {self.tasks}, got task={task!r}.")
        self.task = task
        self.params = params

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}(task={self.task!r}{', ' if args else ''}{args})"

    @classmethod
    def available(cls):
        """True when the peer's library can be imported."""
        try:
            importlib.import_module(cls.module)
        except ImportError:
            return False
        return True

    def _require(self):
        if not self.available():
            raise ImportError(
                f"peer {self.name!r} needs the package {self.package!r}: "
                f"pip install {self.package} (or pip install 'kernelscale[bench]')."
            )

    def get_params(self):
        """Hyperparameters for the result record, in the peer's own terms."""
        return {"task": self.task, "library": self.library, **self.params}

    # -- data --------------------------------------------------------------------------------
    def _encode_y(self, y):
        y = np.asarray(y)
        if y.ndim != 1:
            raise ValueError(f"y must be 1-d, got shape {y.shape}.")
        if self.task == "regression":
            return y.astype(np.float64), None
        classes, codes = np.unique(y, return_inverse=True)
        if classes.size < 2:
            raise ValueError(f"y has a single class {classes!r}; a classifier needs at least two.")
        return codes, classes

    def prepare(self, X, y=None):
        """Convert ``X`` (and training labels ``y``) to the peer's native format."""
        X = np.asarray(X)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-d, got shape {X.shape}.")
        if y is None:
            return Prepared(self._native_X(X), X.shape[0])
        if len(y) != X.shape[0]:
            raise ValueError(f"X has {X.shape[0]} rows but y has {len(y)} entries.")
        codes, classes = self._encode_y(y)
        return Prepared(self._native_Xy(X, codes, classes), X.shape[0], codes, classes)

    def _native_X(self, X):
        return X

    def _native_Xy(self, X, codes, classes):
        return X

    def _as_prepared(self, X, y=None):
        return X if isinstance(X, Prepared) else self.prepare(X, y)

    # -- model -------------------------------------------------------------------------------
    def fit(self, X, y=None):
        """Fit on arrays (X, y) or on ``prepare(X, y)``; returns self."""
        self._require()
        data = self._as_prepared(X, y)
        if data.y is None:
            raise ValueError("fit needs labels: pass y, or prepare(X, y) with y.")
        self.classes_ = data.classes
        self._fit(data)
        return self

    def predict(self, X):
        """Predicted labels (classification, in the original label values) or values."""
        out = self._predict(self._as_prepared(X))
        if self.task == "classification":
            return self.classes_[np.asarray(out, dtype=np.intp)]
        return np.asarray(out, dtype=np.float64)

    def decision_function(self, X):
        """Real-valued scores: (n,) for two classes (positive means ``classes_[1]``), else (n, k)."""
        return self._decision(self._as_prepared(X))

    def evaluate(self, X, y):
        """``{"test_error": fraction misclassified}`` or ``{"mse": mean squared error}``."""
        pred = self.predict(X)
        y = np.asarray(y)
        if self.task == "classification":
            return {"test_error": float(np.mean(pred != y))}
        return {"mse": float(np.mean((pred - y.astype(np.float64)) ** 2))}

    # -- hooks -------------------------------------------------------------------------------
    def _fit(self, data):
        raise NotImplementedError

    def _predict(self, data):
        """Class codes (0..k-1) or regression values."""
        raise NotImplementedError

    def _decision(self, data):
        raise NotImplementedError(f"{self.name} has no decision function.")


# ----------------------------------------------------------------------------------------------
# scikit-learn


class _SklearnPeer(Peer):
    """A scikit-learn estimator (``estimator_`` after fit) trained on the class codes."""

    def _build(self):
        raise NotImplementedError

    def _fit(self, data):
        self.estimator_ = self._build()
        self.estimator_.fit(data.data, data.y)

    def _predict(self, data):
        return self.estimator_.predict(data.data)

    def _decision(self, data):
        est = self.estimator_
        if self.task == "regression":
            return est.predict(data.data)
        if not hasattr(est, "decision_function"):
            raise NotImplementedError(f"{self.name} has no decision function.")
        return est.decision_function(data.data)


class SklearnSVM(_SklearnPeer):
    """scikit-learn ``SVC`` / ``SVR`` (LIBSVM inside) with an rbf, poly or linear kernel.

    ``sigma`` sets gamma = 1/(2 sigma^2); otherwise ``gamma`` as in scikit-learn ("scale" by
    default). ``cache_size`` is in MB.
    """

    name = "sklearn SVC"

    def __init__(self, task="classification", kernel="rbf", C=1.0, sigma=None, gamma=None,
                 degree=3, coef0=0.0, epsilon=0.1, tol=1e-3, cache_size=200):
        super().__init__(task, kernel=kernel, C=C, sigma=sigma, gamma=gamma, degree=degree,
                         coef0=coef0, epsilon=epsilon, tol=tol, cache_size=cache_size)
        self.name = f"sklearn {'SVC' if task == 'classification' else 'SVR'}({kernel})"

    def _build(self):
        from sklearn.svm import SVC, SVR

        p = self.params
        common = dict(kernel=p["kernel"], C=p["C"], gamma=_resolve_gamma(p["sigma"], p["gamma"]),
                      degree=p["degree"], coef0=p["coef0"], tol=p["tol"], cache_size=p["cache_size"])
        if self.task == "regression":
            return SVR(epsilon=p["epsilon"], **common)
        return SVC(**common)


class SklearnLinearSVC(_SklearnPeer):
    """scikit-learn ``LinearSVC`` / ``LinearSVR`` (LIBLINEAR inside)."""

    name = "sklearn LinearSVC"

    def __init__(self, task="classification", C=1.0, loss=None, tol=1e-4, max_iter=1000, dual="auto"):
        super().__init__(task, C=C, loss=loss, tol=tol, max_iter=max_iter, dual=dual)
        if task == "regression":
            self.name = "sklearn LinearSVR"

    def _build(self):
        from sklearn.svm import LinearSVC, LinearSVR

        p = self.params
        if self.task == "regression":
            return LinearSVR(C=p["C"], loss=p["loss"] or "epsilon_insensitive", tol=p["tol"],
                             max_iter=p["max_iter"], dual=p["dual"])
        return LinearSVC(C=p["C"], loss=p["loss"] or "squared_hinge", tol=p["tol"],
                         max_iter=p["max_iter"], dual=p["dual"])


class SklearnLogisticRegression(_SklearnPeer):
    """scikit-learn ``LogisticRegression`` (L2 penalty, lbfgs)."""

    name = "sklearn LogisticRegression"
    tasks = ("classification",)

    def __init__(self, task="classification", C=1.0, tol=1e-4, max_iter=1000):
        super().__init__(task, C=C, tol=tol, max_iter=max_iter)

    def _build(self):
        from sklearn.linear_model import LogisticRegression

        p = self.params
        return LogisticRegression(C=p["C"], tol=p["tol"], max_iter=p["max_iter"])


class SklearnKernelRidge(_SklearnPeer):
    """scikit-learn ``KernelRidge`` (dense n x n kernel matrix).

    Classification regresses the +-1 one-vs-rest codes of the classes (binary: one column,
    positive means ``classes_[1]``) and predicts the largest score, i.e. the LS-SVM without bias.
    """

    name = "sklearn KernelRidge"

    def __init__(self, task="classification", alpha=1.0, kernel="rbf", sigma=None, gamma=None,
                 degree=3, coef0=1.0):
        super().__init__(task, alpha=alpha, kernel=kernel, sigma=sigma, gamma=gamma, degree=degree,
                         coef0=coef0)

    def _build(self):
        from sklearn.kernel_ridge import KernelRidge

        p = self.params
        return KernelRidge(alpha=p["alpha"], kernel=p["kernel"],
                           gamma=_resolve_gamma(p["sigma"], p["gamma"], default=None),
                           degree=p["degree"], coef0=p["coef0"])

    def _targets(self, codes, n_classes):
        if n_classes == 2:
            return np.where(codes == 1, 1.0, -1.0)
        T = -np.ones((codes.size, n_classes))
        T[np.arange(codes.size), codes] = 1.0
        return T

    def _fit(self, data):
        self.estimator_ = self._build()
        y = data.y if self.task == "regression" else self._targets(data.y, data.classes.size)
        self.estimator_.fit(data.data, y)

    def _decision(self, data):
        return self.estimator_.predict(data.data)

    def _predict(self, data):
        scores = self.estimator_.predict(data.data)
        if self.task == "regression":
            return scores
        return (scores > 0).astype(np.intp) if scores.ndim == 1 else np.argmax(scores, axis=1)


class SklearnFeatureSGD(_SklearnPeer):
    """Linear SGD on fixed random features of the Gaussian kernel (scikit-learn pipeline).

    ``features="rff"``: ``RBFSampler`` (random Fourier features) -> r-Pegasos;
    ``features="nystroem"``: ``Nystroem`` -> n-Pegasos. Classification uses ``SGDClassifier``
    with the hinge loss, L2 penalty ``alpha`` (= lambda of Pegasos) and the "optimal" step
    1 / (alpha (t + t0)), which is Pegasos' 1 / (lambda t) shifted; ``epochs`` passes, no early
    stopping. Regression uses ``SGDRegressor`` (squared loss) with the same features.
    """

    name = "sklearn RFF + SGD"

    def __init__(self, task="classification", features="rff", n_components=1000, sigma=None,
                 gamma=None, alpha=1e-4, loss=None, epochs=5, random_state=0):
        if features not in ("rff", "nystroem"):
            raise ValueError(f"features must be 'rff' or 'nystroem', got {features!r}.")
        super().__init__(task, features=features, n_components=n_components, sigma=sigma,
                         gamma=gamma, alpha=alpha, loss=loss, epochs=epochs, random_state=random_state)
        prefix = "r" if features == "rff" else "n"
        self.name = f"{prefix}-Pegasos" if task == "classification" else f"{features}-SGD"

    def _build(self):
        from sklearn.kernel_approximation import Nystroem, RBFSampler
        from sklearn.linear_model import SGDClassifier, SGDRegressor
        from sklearn.pipeline import make_pipeline

        p = self.params
        gamma = _resolve_gamma(p["sigma"], p["gamma"], default=1.0)
        if p["features"] == "rff":
            feat = RBFSampler(gamma=gamma, n_components=p["n_components"], random_state=p["random_state"])
        else:
            feat = Nystroem(kernel="rbf", gamma=gamma, n_components=p["n_components"],
                            random_state=p["random_state"])
        if self.task == "regression":
            sgd = SGDRegressor(loss=p["loss"] or "squared_error", penalty="l2", alpha=p["alpha"],
                               max_iter=p["epochs"], tol=None, random_state=p["random_state"])
        else:
            sgd = SGDClassifier(loss=p["loss"] or "hinge", penalty="l2", alpha=p["alpha"],
                                learning_rate="optimal", max_iter=p["epochs"], tol=None,
                                random_state=p["random_state"])
        return make_pipeline(feat, sgd)


class RPegasos(SklearnFeatureSGD):
    """r-Pegasos: hinge-loss SGD on random Fourier features (``SklearnFeatureSGD(features="rff")``)."""

    def __init__(self, task="classification", n_components=1000, sigma=None, gamma=None,
                 alpha=1e-4, loss=None, epochs=5, random_state=0):
        super().__init__(task, "rff", n_components, sigma, gamma, alpha, loss, epochs, random_state)


class NPegasos(SklearnFeatureSGD):
    """n-Pegasos: hinge-loss SGD on Nystroem features (``SklearnFeatureSGD(features="nystroem")``)."""

    def __init__(self, task="classification", n_components=1000, sigma=None, gamma=None,
                 alpha=1e-4, loss=None, epochs=5, random_state=0):
        super().__init__(task, "nystroem", n_components, sigma, gamma, alpha, loss, epochs, random_state)


class SklearnNystroemRidge(_SklearnPeer):
    """``Nystroem`` features (Gaussian kernel) followed by ``Ridge`` / ``RidgeClassifier``."""

    name = "sklearn Nystroem + Ridge"

    def __init__(self, task="classification", n_components=1000, sigma=None, gamma=None,
                 alpha=1.0, random_state=0):
        super().__init__(task, n_components=n_components, sigma=sigma, gamma=gamma, alpha=alpha,
                         random_state=random_state)
        if task == "classification":
            self.name = "sklearn Nystroem + RidgeClassifier"

    def _build(self):
        from sklearn.kernel_approximation import Nystroem
        from sklearn.linear_model import Ridge, RidgeClassifier
        from sklearn.pipeline import make_pipeline

        p = self.params
        feat = Nystroem(kernel="rbf", gamma=_resolve_gamma(p["sigma"], p["gamma"], default=None),
                        n_components=p["n_components"], random_state=p["random_state"])
        head = Ridge(alpha=p["alpha"]) if self.task == "regression" else RidgeClassifier(alpha=p["alpha"])
        return make_pipeline(feat, head)


# ----------------------------------------------------------------------------------------------
# LIBSVM and LIBLINEAR (official Python bindings)


def _csr64(X):
    from scipy import sparse

    return sparse.csr_matrix(np.asarray(X, dtype=np.float64))


def _binary_sign(labels):
    """+1 when the library's first label is class code 1 (so positive means classes_[1])."""
    return 1.0 if int(labels[0]) == 1 else -1.0


class _LibPeer(Peer):
    """Prediction shared by the LIBSVM and LIBLINEAR bindings, whose predict functions agree."""

    def _run(self, data):
        X = data.data["X"] if isinstance(data.data, dict) else data.data
        labels, _, values = self._predict_fn()([], X, self.model_, "-q")
        return np.asarray(labels), np.asarray(values, dtype=np.float64)

    def _predict(self, data):
        return self._run(data)[0]


class LibSVM(_LibPeer):
    """LIBSVM through ``libsvm.svmutil`` (package ``libsvm-official``).

    Options: C-SVC (``-s 0``) or epsilon-SVR (``-s 3``); kernel "rbf" (``-t 2``, ``-g gamma``
    with gamma = 1/(2 sigma^2) when ``sigma`` is given), "poly" (``-t 1``, (gamma <x,z> +
    coef0)^degree), "linear" (``-t 0``); ``-c C``, ``-p epsilon``, ``-e tol``, ``-m cache_size``
    (MB), ``-h shrinking``. Data go in as CSR (the bindings' fast path); ``prepare`` builds the
    ``svm_problem``. Prediction calls the C library row by row from Python, as the bindings do.
    Multiclass is LIBSVM's one-vs-one; ``decision_function`` is offered for two classes only.
    """

    name = "LIBSVM"
    library = "LIBSVM"
    module = "libsvm.svmutil"
    package = "libsvm-official"
    _KERNELS = {"linear": 0, "poly": 1, "rbf": 2}

    def __init__(self, task="classification", kernel="rbf", C=1.0, sigma=None, gamma=None,
                 degree=3, coef0=0.0, epsilon=0.1, tol=1e-3, cache_size=200, shrinking=True):
        if kernel not in self._KERNELS:
            raise ValueError(f"kernel must be one of {tuple(self._KERNELS)}, got {kernel!r}.")
        super().__init__(task, kernel=kernel, C=C, sigma=sigma, gamma=gamma, degree=degree,
                         coef0=coef0, epsilon=epsilon, tol=tol, cache_size=cache_size, shrinking=shrinking)
        self.name = f"LIBSVM {'C-SVC' if task == 'classification' else 'eps-SVR'}({kernel})"

    def options(self, n_features):
        """The LIBSVM command-line options for these parameters."""
        p = self.params
        gamma = _resolve_gamma(p["sigma"], p["gamma"], default=None)
        if gamma is None:
            gamma = 1.0 / n_features  # LIBSVM's own default
        opts = [
            "-s", "0" if self.task == "classification" else "3",
            "-t", str(self._KERNELS[p["kernel"]]), "-c", repr(float(p["C"])),
            "-g", repr(float(gamma)), "-d", str(int(p["degree"])), "-r", repr(float(p["coef0"])),
            "-e", repr(float(p["tol"])), "-m", repr(float(p["cache_size"])),
            "-h", "1" if p["shrinking"] else "0", "-q",
        ]
        if self.task == "regression":
            opts += ["-p", repr(float(p["epsilon"]))]
        return " ".join(opts)

    def _native_X(self, X):
        return _csr64(X)

    def _native_Xy(self, X, codes, classes):
        from libsvm.svmutil import svm_problem

        Xs = _csr64(X)
        problem = svm_problem(np.asarray(codes, dtype=np.float64), Xs)
        return {"problem": problem, "X": Xs, "n_features": X.shape[1]}

    def _fit(self, data):
        from libsvm.svmutil import svm_train

        self.model_ = svm_train(data.data["problem"], self.options(data.data["n_features"]))

    def _predict_fn(self):
        from libsvm.svmutil import svm_predict

        return svm_predict

    def _decision(self, data):
        labels, values = self._run(data)
        if self.task == "regression":
            return labels
        if self.classes_.size != 2:
            raise NotImplementedError("LIBSVM's decision values are one-vs-one; only two classes are supported.")
        return values[:, 0] * _binary_sign(self.model_.get_labels())


class LibLinear(_LibPeer):
    """LIBLINEAR through ``liblinear.liblinearutil`` (package ``liblinear-official``).

    ``solver`` is LIBLINEAR's ``-s`` number or name (e.g. "l2r_l2loss_svc_dual" = 1, scikit-
    learn's LinearSVC; "l2r_lr" = 0, logistic regression; "l2r_l2loss_svr" = 11). ``-c C``,
    ``-B bias`` (a constant feature ``bias`` appended and regularised, like scikit-learn's
    ``intercept_scaling``; negative: none), ``-e tol`` (None: LIBLINEAR's default per solver),
    ``-p epsilon`` for SVR. Multiclass is one-vs-rest (or Crammer-Singer for solver 4).
    """

    name = "LIBLINEAR"
    library = "LIBLINEAR"
    module = "liblinear.liblinearutil"
    package = "liblinear-official"
    SOLVERS = {
        "l2r_lr": 0, "l2r_l2loss_svc_dual": 1, "l2r_l2loss_svc": 2, "l2r_l1loss_svc_dual": 3,
        "mcsvm_cs": 4, "l1r_l2loss_svc": 5, "l1r_lr": 6, "l2r_lr_dual": 7,
        "l2r_l2loss_svr": 11, "l2r_l2loss_svr_dual": 12, "l2r_l1loss_svr_dual": 13,
    }
    _REGRESSION = (11, 12, 13)

    def __init__(self, task="classification", solver=None, C=1.0, bias=1.0, tol=None, epsilon=0.1):
        if solver is None:
            solver = "l2r_l2loss_svc_dual" if task == "classification" else "l2r_l2loss_svr_dual"
        number = self.SOLVERS.get(solver, solver)
        if number not in self.SOLVERS.values():
            raise ValueError(f"solver must be one of {tuple(self.SOLVERS)} or its number, got {solver!r}.")
        if (number in self._REGRESSION) != (task == "regression"):
            raise ValueError(f"solver {solver!r} does not solve task={task!r}.")
        super().__init__(task, solver=solver, C=C, bias=bias, tol=tol, epsilon=epsilon)
        self.solver_number = number
        self.name = f"LIBLINEAR -s {number}"

    def options(self):
        """The LIBLINEAR command-line options for these parameters."""
        p = self.params
        opts = ["-s", str(self.solver_number), "-c", repr(float(p["C"])), "-B", repr(float(p["bias"])), "-q"]
        if p["tol"] is not None:
            opts += ["-e", repr(float(p["tol"]))]
        if self.task == "regression":
            opts += ["-p", repr(float(p["epsilon"]))]
        return " ".join(opts)

    def _native_X(self, X):
        return _csr64(X)

    def _native_Xy(self, X, codes, classes):
        from liblinear.liblinearutil import problem

        Xs = _csr64(X)
        return {"problem": problem(np.asarray(codes, dtype=np.float64), Xs), "X": Xs}

    def _fit(self, data):
        from liblinear.liblinearutil import train

        self.model_ = train(data.data["problem"], self.options())

    def _predict_fn(self):
        from liblinear.liblinearutil import predict

        return predict

    def _decision(self, data):
        labels, values = self._run(data)
        if self.task == "regression":
            return labels
        order = np.asarray(self.model_.get_labels(), dtype=np.intp)
        if self.classes_.size == 2 and values.shape[1] == 1:
            return values[:, 0] * _binary_sign(order)
        out = np.empty_like(values)
        out[:, order] = values
        return out


# ----------------------------------------------------------------------------------------------
# Vowpal Wabbit


def _vw_lines(X, labels=None):
    """VW text format: ``label | j:x_j ...`` with the nonzero features named by column index."""
    X = np.asarray(X)
    lines = []
    for i in range(X.shape[0]):
        row = X[i]
        idx = np.flatnonzero(row)
        feats = " ".join(f"{j}:{v:.9g}" for j, v in zip(idx.tolist(), row[idx].tolist()))
        head = "" if labels is None else f"{labels[i]} "
        lines.append(f"{head}| {feats}")
    return lines


class VowpalWabbit(Peer):
    """Vowpal Wabbit through ``vowpalwabbit.Workspace`` (package ``vowpalwabbit``).

    Training writes the examples in VW text format to a temporary file and runs VW's native
    parser on it (``-d``) for ``passes`` passes (with a cache file and ``--holdout_off``, so
    all examples are used). Binary labels become -1/+1 (``loss_function`` logistic by default;
    the score is the raw margin, positive means ``classes_[1]``); more classes use ``--oaa k``
    with labels 1..k; regression uses the squared loss. ``l2`` is ``--l2``, ``learning_rate``
    ``-l``, ``bits`` ``-b``; ``extra_args`` is passed verbatim (e.g. "--nn 20").
    """

    name = "Vowpal Wabbit"
    library = "Vowpal Wabbit"
    module = "vowpalwabbit"
    package = "vowpalwabbit"

    def __init__(self, task="classification", loss_function=None, passes=1, l2=0.0,
                 learning_rate=None, bits=18, extra_args="", random_seed=0):
        super().__init__(task, loss_function=loss_function, passes=passes, l2=l2,
                         learning_rate=learning_rate, bits=bits, extra_args=extra_args,
                         random_seed=random_seed)

    def _vw_labels(self, codes, classes):
        if self.task == "regression":
            return [repr(float(v)) for v in codes]
        if classes.size == 2:
            return np.where(codes == 1, "1", "-1").tolist()
        return (np.asarray(codes) + 1).astype(str).tolist()

    def _native_X(self, X):
        return _vw_lines(X)

    def _native_Xy(self, X, codes, classes):
        return _vw_lines(X, self._vw_labels(codes, classes))

    def arguments(self, n_classes=None):
        """The VW command line (without the data and cache files)."""
        p = self.params
        loss = p["loss_function"] or ("squared" if self.task == "regression" or (n_classes or 2) > 2 else "logistic")
        args = ["--quiet", "--loss_function", loss, "-b", str(int(p["bits"])),
                "--random_seed", str(int(p["random_seed"]))]
        if n_classes is not None and n_classes > 2:
            args += ["--oaa", str(int(n_classes))]
        if p["l2"]:
            args += ["--l2", repr(float(p["l2"]))]
        if p["learning_rate"] is not None:
            args += ["-l", repr(float(p["learning_rate"]))]
        if p["extra_args"]:
            args += str(p["extra_args"]).split()
        return args

    def _fit(self, data):
        from vowpalwabbit import Workspace

        self.close()
        n_classes = None if self.task == "regression" else data.classes.size
        tmp = tempfile.mkdtemp(prefix="kernelscale-vw-")
        try:
            train = os.path.join(tmp, "train.vw")
            with open(train, "w") as fh:
                fh.write("\n".join(data.data))
                fh.write("\n")
            args = self.arguments(n_classes) + ["-d", train]
            passes = int(self.params["passes"])
            if passes > 1:
                args += ["--passes", str(passes), "-k", "--cache_file", os.path.join(tmp, "cache"),
                         "--holdout_off"]
            self.workspace_ = Workspace(arg_list=args)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _scores(self, data):
        ws = self.workspace_
        return [ws.predict(line) for line in data.data]

    def _predict(self, data):
        scores = self._scores(data)
        if self.task == "regression":
            return np.asarray(scores, dtype=np.float64)
        if self.classes_.size == 2:
            return (np.asarray(scores, dtype=np.float64) > 0).astype(np.intp)
        return np.asarray(scores, dtype=np.intp) - 1

    def _decision(self, data):
        if self.task == "classification" and self.classes_.size > 2:
            raise NotImplementedError("VW --oaa predicts labels only; decision_function needs two classes.")
        return np.asarray(self._scores(data), dtype=np.float64)

    def close(self):
        """Release the VW workspace (also done on garbage collection)."""
        ws = getattr(self, "workspace_", None)
        if ws is not None:
            ws.finish()
            self.workspace_ = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass


# ----------------------------------------------------------------------------------------------
# registry


PEERS = {
    "sklearn-svm": SklearnSVM,
    "sklearn-linearsvc": SklearnLinearSVC,
    "sklearn-logreg": SklearnLogisticRegression,
    "sklearn-kernelridge": SklearnKernelRidge,
    "sklearn-nystroem-ridge": SklearnNystroemRidge,
    "r-pegasos": RPegasos,
    "n-pegasos": NPegasos,
    "libsvm": LibSVM,
    "liblinear": LibLinear,
    "vw": VowpalWabbit,
}


def make_peer(name, **params):
    """Build the peer registered as ``name`` (see ``PEERS``) with its parameters."""
    try:
        cls = PEERS[name]
    except KeyError:
        raise ValueError(f"unknown peer {name!r}; choose one of {sorted(PEERS)}.") from None
    return cls(**params)


def available_peers():
    """Names of the registered peers whose library is installed."""
    return [name for name, cls in PEERS.items() if cls.available()]
