"""``kernelscale.compare``: the front door beside what a user would try instead, on the user's
own data, with a held-out split.

The contenders, each fitted on the same training part and scored on the same held-out part:

- ``AutoKernelClassifier`` / ``AutoKernelRegressor`` within ``time_budget``;
- scikit-learn's ``SVC`` / ``KernelRidge`` (RBF, gamma="scale" as ``SVC``'s default: 1 / (d
  var(X))), on a random subsample when the whole training part would not fit in the budget (the
  row says so): kernel ridge costs n^3 / 3 flops, an SVM solve about 30 n^2 d (a rule of thumb);
- ``Nystroem(n_components=min(1000, n)) + RidgeClassifier / Ridge`` (scikit-learn's own
  scalable kernel route);
- ``HistGradientBoostingClassifier / Regressor`` at its defaults, the non-kernel reference.

Every contender's features are standardised (a ``StandardScaler`` in its pipeline) except the
front door's, which chooses its own scaling.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from sklearn.base import is_classifier

from . import plan

__all__ = ["ComparisonRow", "compare", "format_comparison", "plot_comparison"]

#: the flops of an SVM fit on n rows of d features, over n^2 d (a rule of thumb for the subsample)
SVM_FLOPS_PER_N2D = 30.0
#: the share of the budget the subsampled exact peers plan to use
PEER_SHARE = 0.5


@dataclass
class ComparisonRow:
    method: str
    error: float  # test error (classification) or RMSE (regression)
    fit_seconds: float
    predict_seconds: float
    note: str = ""


def _peer_rows(n, d, task, time_budget, flops):
    """The rows an exact scikit-learn peer can fit within PEER_SHARE of the budget."""
    seconds = PEER_SHARE * time_budget
    rows = n
    while rows > 100:
        cost = rows**3 / 3.0 + 2.0 * rows * rows * d if task == "regression" else SVM_FLOPS_PER_N2D * rows * rows * d
        if cost / flops <= seconds:
            break
        rows = int(rows * 0.8)
    return rows


def _contenders(task, n, d, time_budget, random_state, flops):
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
    from sklearn.kernel_approximation import Nystroem
    from sklearn.kernel_ridge import KernelRidge
    from sklearn.linear_model import Ridge, RidgeClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC

    from .estimators import AutoKernelClassifier, AutoKernelRegressor

    classify = task == "classification"
    auto = (AutoKernelClassifier if classify else AutoKernelRegressor)(time_budget=time_budget,
                                                                       random_state=random_state)
    gamma = 1.0 / d  # standardised features: gamma="scale" is 1 / (d var) = 1 / d
    exact = SVC(gamma="scale") if classify else KernelRidge(kernel="rbf", gamma=gamma)
    components = min(1000, n)
    nystroem = make_pipeline(StandardScaler(), Nystroem(gamma=gamma, n_components=components, random_state=random_state),
                             RidgeClassifier() if classify else Ridge())
    boosting = (HistGradientBoostingClassifier if classify else HistGradientBoostingRegressor)(random_state=random_state)
    rows = _peer_rows(n, d, task, time_budget, flops)
    return [
        (f"kernelscale {type(auto).__name__}(time_budget={time_budget:g})", auto, n, ""),
        (f"scikit-learn {type(exact).__name__} (RBF)", make_pipeline(StandardScaler(), exact), rows,
         "" if rows == n else f"on a subsample of {rows} of {n} rows: all of them would not fit in the budget"),
        (f"scikit-learn Nystroem({components}) + {'RidgeClassifier' if classify else 'Ridge'}", nystroem, n, ""),
        (f"scikit-learn {type(boosting).__name__} (not a kernel method)", boosting, n, ""),
    ]


def compare(X, y, *, task=None, time_budget=60.0, test_size=0.25, random_state=0, log=None):
    """Fit the contenders of the module docstring on a training split of (X, y) and score them on
    the held-out part. ``task``: "classification" or "regression" (None: classification for
    integer, bool or text labels with at most 100 distinct values, else regression). Returns a
    list of :class:`ComparisonRow`, the front door first."""
    from sklearn.model_selection import train_test_split

    X = np.asarray(X)
    y = np.asarray(y)
    if task is None:
        task = "classification" if (y.dtype.kind in "biuUSO" and np.unique(y).size <= 100) else "regression"
    if task not in ("classification", "regression"):
        raise ValueError(f"task must be 'classification', 'regression' or None; got {task!r}.")
    X = X.astype(np.float64, copy=False) if X.dtype.kind not in "f" else X
    strat = y if task == "classification" else None
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=test_size, random_state=random_state,
                                                        stratify=strat)
    if task == "regression":
        y_train, y_test = y_train.astype(np.float64), y_test.astype(np.float64)
    n, d = X_train.shape
    rng = np.random.default_rng(random_state)
    rows = []
    for name, model, used, note in _contenders(task, n, d, time_budget, random_state, plan.flop_rate()):
        idx = np.sort(rng.choice(n, used, replace=False)) if used < n else slice(None)
        if log is not None:
            log(f"fitting {name}" + (f" on {used} rows" if used < n else ""))
        start = time.perf_counter()
        model.fit(X_train[idx], y_train[idx])
        fit_s = time.perf_counter() - start
        start = time.perf_counter()
        pred = model.predict(X_test)
        predict_s = time.perf_counter() - start
        if is_classifier(model):
            error = float(np.mean(pred != y_test))
        else:
            error = float(np.sqrt(np.mean((np.asarray(pred, dtype=np.float64) - y_test) ** 2)))
        rows.append(ComparisonRow(name, error, fit_s, predict_s, note))
    return rows


def format_comparison(rows, task):
    """The rows as a plain-text table."""
    metric = "test error" if task == "classification" else "test RMSE"
    body = [(r.method, f"{100 * r.error:.2f}%" if task == "classification" else f"{r.error:.4g}",
             f"{r.fit_seconds:.2f}", f"{r.predict_seconds:.2f}", r.note) for r in rows]
    header = ("method", metric, "fit s", "predict s", "note")
    widths = [max(len(str(x)) for x in col) for col in zip(header, *body)]
    lines = ["  ".join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip() for line in [header, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def plot_comparison(rows, task, path):
    """Error against fit time, one point per contender, written to ``path`` (needs matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise ValueError("plotting the comparison needs matplotlib: pip install matplotlib") from err
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for r in rows:
        ax.scatter(r.fit_seconds, r.error, s=40)
        ax.annotate(r.method.replace("scikit-learn ", "").replace("kernelscale ", ""), (r.fit_seconds, r.error),
                    fontsize=7, xytext=(4, 4), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_xlabel("fit time (s)")
    ax.set_ylabel("test error" if task == "classification" else "test RMSE")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
