"""Same results before and after a refactor: every listed estimator's outputs on fixed seeds.

    python -m benchmarks refactor_check save --src OLD_CHECKOUT/src --out old.npz
    python -m benchmarks refactor_check save --src src --out new.npz
    python -m benchmarks refactor_check compare old.npz new.npz [--rtol 1e-10]

run in the checkout's root. ``save`` puts ``--src`` (the tree under test) first on ``sys.path``,
imports kernelscale from it and fits every estimator of this checkout's
``tests/estimator_list.py`` (imported by its path) on small float64 and float32 problems, storing predict /
decision_function / predict_proba / transform outputs. Parameters renamed since the old tree are
translated back through ``RENAMES`` (new name -> old name, per class), and the stagewise
estimators' ``kernel`` / ``feature_method`` back to ``generator`` / ``sigma`` / ``degree`` for a
tree before them (:func:`_old_stagewise_params`), so the list is written in today's vocabulary.
``compare`` prints the largest relative difference of each output, worst first, and exits 1 when
one exceeds ``--rtol``.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np

from benchmarks.harness import load_test_module

METHODS = ("predict", "decision_function", "predict_proba", "transform")
#: the one-vocabulary renames of issue 14: class -> {new parameter: old parameter}
RENAMES = {
    "LSSVMClassifier": {"batch_size": "block_size"},
    "LSSVMRegressor": {"batch_size": "block_size"},
    "SLKLClassifier": {"n_components": "n_columns", "sparsity": "nu", "alpha": "lam"},
    "SLKLRegressor": {"n_components": "n_columns", "sparsity": "nu", "alpha": "lam"},
    "RegularizedKernelClassifier": {"step_size": "alpha"},
    "RegularizedKernelRegressor": {"step_size": "alpha"},
    "DoublyStochasticClassifier": {"alpha": "nu"},
    "DoublyStochasticRegressor": {"alpha": "nu"},
}
#: renamed values, (parameter, new value) -> old value: the multinomial loss of DSG and
#: stagewise's softmax stages were called "logistic"
OLD_VALUES = {("loss", "softmax"): "logistic", ("update", "softmax"): "logistic"}
#: stagewise before kernel= / feature_method=: (kernel class, feature method) -> generator
OLD_GENERATORS = {
    ("GaussianKernel", "cos"): "rff",
    ("GaussianKernel", "logit"): "logit",
    ("LinearKernel", "sample"): "sample",
    ("PolynomialKernel", "tensorsketch"): "polynomial",
}
_DEFAULT_METHODS = {"GaussianKernel": "cos", "LinearKernel": "sample", "PolynomialKernel": "tensorsketch"}
_KERNEL_NAMES = {"gaussian": "GaussianKernel", "rbf": "GaussianKernel", "linear": "LinearKernel",
                 "polynomial": "PolynomialKernel", "poly": "PolynomialKernel"}


def _old_stagewise_params(kwargs):
    """Today's stagewise parameters as the former generator / sigma / degree (one kernel and
    feature method per former generator; anything else raises a ValueError)."""
    import math

    kwargs = dict(kwargs)
    kernel = kwargs.pop("kernel", "gaussian")
    method = kwargs.pop("feature_method", None)
    if kwargs.get("pca_components", "auto") == "auto":
        raise ValueError(
            "the stagewise estimators before kernel= had no pca_components='auto' (their default "
            "was 50): pass pca_components (an int or None) explicitly in the translated list."
        )
    if isinstance(kernel, str):
        name, params = _KERNEL_NAMES.get(kernel.lower(), kernel), {}
    else:
        name, params = type(kernel).__name__, kernel.get_params()
    method = _DEFAULT_METHODS.get(name) if method is None else method
    generator = OLD_GENERATORS.get((name, method))
    if generator is None:
        raise ValueError(f"kernel={kernel!r} with feature_method={method!r} has no former generator.")
    kwargs["generator"] = generator
    if name == "GaussianKernel":
        kwargs["sigma"] = params.get("sigma", "median")
    elif name == "PolynomialKernel":  # the former (z.z' / sigma^2 + 1)^degree
        degree, gamma, coef0 = params.get("degree", 3), params.get("gamma", 1.0), params.get("coef0", 1.0)
        sigma = 1.0 / math.sqrt(gamma)
        if coef0 != 1 or 1.0 / sigma**2 != gamma:
            raise ValueError(
                f"kernel={kernel!r} has no exact former equivalent: the former polynomial generator "
                f"had coef0=1 and gamma=1/sigma^2 (pick a gamma such as 0.25 that round-trips)."
            )
        kwargs.update(sigma=sigma, degree=degree)
    return kwargs


def translate_renamed_parameters(kernelscale):
    """Let an old tree's classes accept today's parameter names and values (RENAMES,
    OLD_VALUES); a tree that already has them is left alone."""
    import functools
    import inspect

    old_stagewise = "kernel" not in inspect.signature(kernelscale.StagewiseClassifier.__init__).parameters
    if "batch_size" not in inspect.signature(kernelscale.LSSVMClassifier.__init__).parameters:
        for name in set(RENAMES) | {"StagewiseClassifier"}:
            cls = getattr(kernelscale, name)

            @functools.wraps(cls.__init__)
            def init(self, *args, _init=cls.__init__, _map=RENAMES.get(name, {}), **kwargs):
                kwargs = {_map.get(k, k): OLD_VALUES.get((k, v), v) if isinstance(v, str) else v
                          for k, v in kwargs.items()}
                _init(self, *args, **kwargs)

            cls.__init__ = init
    if not old_stagewise:
        return
    for name in ("StagewiseClassifier", "StagewiseRegressor"):
        cls = getattr(kernelscale, name)

        @functools.wraps(cls.__init__)
        def init(self, *args, _init=cls.__init__, **kwargs):
            if "generator" not in kwargs:  # today's vocabulary (clone passes the old names, generator included)
                if args:  # the kernel, today's one positional parameter
                    kwargs["kernel"], args = args[0], args[1:]
                kwargs = _old_stagewise_params(kwargs)
            _init(self, *args, **kwargs)

        cls.__init__ = init


def _problems():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    y_reg = np.sin(X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.1 * rng.normal(size=300)
    y_cls = np.digitize(X[:, 0] + 0.5 * X[:, 2], [-0.5, 0.5])
    X_test = rng.normal(size=(100, 5))
    return X, y_reg, y_cls, X_test


def save(src, out):
    sys.path.insert(0, str(pathlib.Path(src).resolve()))  # the kernelscale tree to check
    import warnings

    from sklearn.base import ClassifierMixin, RegressorMixin, clone

    import kernelscale

    translate_renamed_parameters(kernelscale)
    ESTIMATORS = load_test_module("estimator_list").ESTIMATORS  # this checkout's tests/estimator_list.py

    print(f"kernelscale from {kernelscale.__file__}")
    X, y_reg, y_cls, X_test = _problems()
    results = {}
    for i, template in enumerate(ESTIMATORS):
        for dtype in (np.float64, np.float32):
            est = clone(template)
            if est.get_params().get("random_state", 0) is None:  # unseeded estimators would differ run to run
                est.set_params(random_state=0)
            Xd, Xt = X.astype(dtype), X_test.astype(dtype)
            y = y_cls if isinstance(est, ClassifierMixin) else y_reg if isinstance(est, RegressorMixin) else None
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est.fit(Xd, y) if y is not None else est.fit(Xd)
                for method in METHODS:
                    if hasattr(est, method):
                        key = f"{i:02d}:{type(est).__name__}:{np.dtype(dtype).name}:{method}"
                        results[key] = np.asarray(getattr(est, method)(Xt), dtype=np.float64)
    np.savez(out, **results)
    print(f"{len(results)} outputs -> {out}")


def compare(old, new, rtol):
    a, b = np.load(old), np.load(new)
    missing = sorted(set(a.files) ^ set(b.files))
    rows = []
    for key in sorted(set(a.files) & set(b.files)):
        x, y = a[key], b[key]
        if x.shape != y.shape:
            rows.append((np.inf, key))
            continue
        scale = max(np.max(np.abs(x)), 1e-300)
        rows.append((float(np.max(np.abs(x - y)) / scale), key))
    rows.sort(reverse=True)
    for diff, key in rows:
        print(f"{diff:10.2e}  {key}")
    if missing:
        print("only in one file:", ", ".join(missing))
    worst = rows[0][0] if rows else 0.0
    print(f"{len(rows)} outputs compared; largest relative difference {worst:.2e} (rtol {rtol:g})")
    return 0 if worst <= rtol and not missing else 1


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("save")
    p.add_argument("--src", required=True)
    p.add_argument("--out", required=True)
    p = sub.add_parser("compare")
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--rtol", type=float, default=1e-10)
    args = parser.parse_args(argv)
    if args.command == "save":
        save(args.src, args.out)
        return 0
    return compare(args.old, args.new, args.rtol)


if __name__ == "__main__":
    sys.exit(main())
