"""What the default-tuning studies share: the robustness suite's data sets (issue #18) and its
exact peers.

``DATASETS`` are the sets nobody tuned for (scikit-learn's bundled sets and seeded synthetic
ones; see ``robustness.py``'s docstring), ``make_dataset(name, n)`` their fixed seeded split,
``peer_factory(task, sigma)`` the exact kernel peer (KernelRidge / SVC at the same bandwidth) and
``median_sigma(X)`` that bandwidth. ``robustness.py`` fits every estimator on them;
``dsg_defaults.py`` and ``slkl_defaults.py`` choose defaults on held-out parts of their training
splits. The scores the studies share (``task_error``, ``error_ratio``) are in
``benchmarks.harness``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SEED = 0


@dataclass
class Dataset:
    """One set's fixed split (standardised with the training part's statistics when
    ``standardized``)."""

    name: str
    task: str  # "regression" or "classification"
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    standardized: bool
    description: str

    @property
    def params(self):
        return {"n_train": int(self.X_train.shape[0]), "n_test": int(self.X_test.shape[0]),
                "d": int(self.X_train.shape[1]), "standardized": self.standardized,
                "n_classes": int(len(np.unique(self.y_train))) if self.task == "classification" else None,
                "data": self.description}


def _scales(d, seed=SEED):
    return np.random.RandomState(seed).permutation(np.logspace(-3, 3, d))


def _bundled(loader):
    def make(n=None):
        from sklearn import datasets

        X, y = getattr(datasets, loader)(return_X_y=True)
        return X, y, f"sklearn.datasets.{loader}"
    return make


def _friedman(scale):
    def make(n):
        from sklearn.datasets import make_friedman1

        X, y = make_friedman1(n_samples=n, n_features=10, noise=1.0, random_state=SEED)
        return X, y * scale, f"make_friedman1(n={n}, d=10, noise=1), y * {scale:g}"
    return make


def _mixed_regression(n):
    from sklearn.datasets import make_friedman1

    X, y = make_friedman1(n_samples=n, n_features=10, noise=1.0, random_state=SEED + 1)
    return X * _scales(10), y, f"make_friedman1(n={n}, d=10), columns * 10^-3..10^3, raw"


def _surface2d(n):
    rng = np.random.RandomState(SEED)
    X = rng.uniform(-2, 2, size=(n, 2))
    y = np.sin(2 * X[:, 0]) * np.cos(2 * X[:, 1]) + 0.1 * rng.normal(size=n)
    return X, y, f"uniform [-2, 2]^2, y = sin(2 x1) cos(2 x2) + N(0, 0.1^2), n={n}"


def _mixed_classification(n):
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=n, n_features=10, n_informative=5, random_state=SEED)
    return X * _scales(10, SEED + 1), y, f"make_classification(n={n}, d=10), columns * 10^-3..10^3, raw"


def _moons(n):
    from sklearn.datasets import make_moons

    X, y = make_moons(n_samples=n, noise=0.3, random_state=SEED)
    return X, y, f"make_moons(n={n}, noise=0.3)"


def _many_classes(k):
    def make(n):
        from sklearn.datasets import make_classification

        X, y = make_classification(n_samples=n, n_features=20, n_informative=10, n_redundant=0,
                                   n_classes=k, n_clusters_per_class=1, class_sep=2.0, random_state=SEED)
        return X, y, f"make_classification(n={n}, d=20, 10 informative, {k} classes, class_sep=2)"
    return make


def _imbalanced(n):
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=n, n_features=10, n_informative=5, weights=[0.95],
                               flip_y=0.01, random_state=SEED)
    return X, y, f"make_classification(n={n}, d=10, weights 95/5)"


#: name -> (task, maker(n) -> (X, y, description), standardize, test fraction)
DATASETS = {
    "diabetes": ("regression", _bundled("load_diabetes"), True, 0.25),
    "friedman1 y*1e-5": ("regression", _friedman(1e-5), True, 0.2),
    "friedman1 y*1e5": ("regression", _friedman(1e5), True, 0.2),
    "mixed scales (regression)": ("regression", _mixed_regression, False, 0.2),
    "few features d=2 (regression)": ("regression", _surface2d, True, 0.2),
    "breast_cancer": ("classification", _bundled("load_breast_cancer"), True, 0.25),
    "wine": ("classification", _bundled("load_wine"), True, 0.25),
    "iris": ("classification", _bundled("load_iris"), True, 0.25),
    "digits": ("classification", _bundled("load_digits"), True, 0.25),
    "many classes k=30": ("classification", _many_classes(30), True, 0.2),
    "imbalanced 95/5": ("classification", _imbalanced, True, 0.2),
    "mixed scales (classification)": ("classification", _mixed_classification, False, 0.2),
    "few features d=2 (moons)": ("classification", _moons, True, 0.2),
}
FULL_N = 5000  # total samples of each synthetic set (train 4000 / test 1000)


def make_dataset(name, n=None):
    """The split ``name`` of :data:`DATASETS` (``n`` total samples for the synthetic sets; a
    bundled set is subsampled to ``n`` when given and smaller)."""
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    task, maker, standardize, test_size = DATASETS[name]
    X, y, desc = maker(n if n is not None else FULL_N)
    X = np.asarray(X, dtype=np.float64)
    if n is not None and n < X.shape[0]:  # bundled set, subsampled (tests)
        idx = np.sort(np.random.RandomState(SEED).permutation(X.shape[0])[:n])
        X, y = X[idx], y[idx]
        desc += f", subsample n={n}"
    strat = y if task == "classification" else None
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=test_size, random_state=SEED, stratify=strat)
    if standardize:
        scaler = StandardScaler().fit(Xtr)
        Xtr, Xte = scaler.transform(Xtr), scaler.transform(Xte)
    return Dataset(name, task, np.ascontiguousarray(Xtr), ytr, np.ascontiguousarray(Xte), yte, standardize, desc)


def peer_factory(task, sigma):
    """scikit-learn KernelRidge (regression) or SVC (classification) at gamma = 1/(2 sigma^2)."""
    gamma = 1.0 / (2.0 * sigma ** 2)
    if task == "regression":
        from sklearn.kernel_ridge import KernelRidge

        return "sklearn KernelRidge", {"alpha": 1.0, "kernel": "rbf", "gamma": gamma}, \
            lambda: KernelRidge(alpha=1.0, kernel="rbf", gamma=gamma)
    from sklearn.svm import SVC

    return "sklearn SVC", {"C": 1.0, "kernel": "rbf", "gamma": gamma}, lambda: SVC(C=1.0, kernel="rbf", gamma=gamma)


def median_sigma(X):
    from kernelscale.kernels import GaussianKernel

    return float(GaussianKernel(sigma="median").resolve(X, random_state=SEED).sigma)
