"""The ``kernelscale`` command: demo, bench, fit, predict, report.

- ``kernelscale demo`` fits every estimator on embedded data (synthetic sinc, scikit-learn's
  digits) and prints test error, fit time and predict time.
- ``kernelscale bench NAME [--quick] [--checkout PATH]`` runs the suite NAME of the package
  ``benchmarks`` of a source checkout (``benchmarks/papers/slkl.py`` for ``slkl``, as
  ``python -m benchmarks NAME`` does in it): the checkout named, else the one this kernelscale is
  imported from (an editable install); an installed package refuses, saying so. Nothing is ever
  run from the current directory.
- ``kernelscale fit ESTIMATOR DATA -o MODEL [-p key=value ...]`` fits and saves a model.
- ``kernelscale predict MODEL DATA [-o FILE]`` writes one prediction per line.
- ``kernelscale report [MODEL] [--checkout PATH]`` describes a saved model, or prints the
  benchmark results table of a source checkout (found as for ``bench``).
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
from sklearn.base import BaseEstimator, is_classifier


def _out(text=""):
    sys.stdout.write(f"{text}\n")


# ----------------------------------------------------------------------------------------------
# demo


@dataclass(frozen=True)
class DemoEntry:
    """One line of ``kernelscale demo``: an estimator factory and the embedded dataset it runs on."""

    name: str
    dataset: str  # "sinc" (regression, test MSE) or "digits" (classification, test error)
    make: Callable[[], BaseEstimator]


def _demo_entries():
    """Every estimator of the registry (:mod:`kernelscale.registry`) in its demo configuration
    (tests/test_registry.py checks that none is missing)."""
    from sklearn.linear_model import Ridge, RidgeClassifier
    from sklearn.pipeline import make_pipeline

    from .auto import AutoKernelClassifier, AutoKernelRegressor
    from .doubly_stochastic import DoublyStochasticClassifier, DoublyStochasticRegressor
    from .exact import ExactKernelRidge
    from .features import NystromFeatures, PolynomialRandomFeatures, RandomFourierFeatures
    from .kernels import GaussianKernel, PolynomialKernel
    from .least_squares import (
        CalibratedLeastSquaresClassifier, GeneralizedLeastSquaresClassifier, StagewiseClassifier, StagewiseRegressor,
    )
    from .lssvm import LSSVMClassifier, LSSVMRegressor
    from .preprocessing import CenterNormalize, FFTFeatures
    from .regularized import RegularizedKernelClassifier, RegularizedKernelRegressor
    from .slkl import SLKLClassifier, SLKLRegressor

    return [
        DemoEntry("AutoKernelRegressor", "sinc", lambda: AutoKernelRegressor(time_budget=5, random_state=0)),
        DemoEntry("AutoKernelClassifier", "digits", lambda: AutoKernelClassifier(time_budget=5, random_state=0)),
        DemoEntry("ExactKernelRidge", "sinc", lambda: ExactKernelRidge(GaussianKernel(sigma=1.0), alpha=0.1)),
        DemoEntry("RandomFourierFeatures+Ridge", "sinc", lambda: make_pipeline(
            RandomFourierFeatures(GaussianKernel(sigma=1.0), n_components=500, random_state=0), Ridge(alpha=0.1))),
        DemoEntry("NystromFeatures+Ridge", "sinc", lambda: make_pipeline(
            NystromFeatures(GaussianKernel(sigma=1.0), n_components=200, random_state=0), Ridge(alpha=0.1))),
        DemoEntry("SLKLRegressor", "sinc", lambda: SLKLRegressor(
            GaussianKernel(sigma=1.0), n_components=256, sparsity=0.01, alpha=1.0, random_state=0)),
        DemoEntry("SLKLClassifier (one-vs-all)", "digits", lambda: SLKLClassifier(
            GaussianKernel(sigma=2.0), n_components=128, sparsity=0.01, multi_class="ovr", random_state=0)),
        DemoEntry("DoublyStochasticRegressor (SGD)", "sinc", lambda: DoublyStochasticRegressor(
            GaussianKernel(sigma=1.0), n_iter=60, batch_size=128, block_size=128, step_size=2.0, random_state=0)),
        DemoEntry("DoublyStochasticRegressor (preconditioned)", "sinc", lambda: DoublyStochasticRegressor(
            GaussianKernel(sigma=1.0), solver="preconditioned", alpha=0.0, n_iter=8, batch_size=1000, block_size=64,
            random_state=0)),
        DemoEntry("DoublyStochasticClassifier (hinge)", "digits", lambda: DoublyStochasticClassifier(
            "gaussian", loss="hinge", n_iter=60, batch_size=128, block_size=128, random_state=0)),
        DemoEntry("DoublyStochasticClassifier (softmax, preconditioned)", "digits", lambda: DoublyStochasticClassifier(
            "gaussian", loss="softmax", solver="preconditioned", alpha=0.0, n_iter=6, batch_size=2000, block_size=512,
            random_state=0)),
        DemoEntry("RegularizedKernelClassifier (hinge, coordinate descent)", "digits",
                  lambda: RegularizedKernelClassifier(GaussianKernel(sigma=2.0), C=10.0, tol=1e-3, random_state=0)),
        DemoEntry("RegularizedKernelClassifier (linear, Algorithm 2)", "digits", lambda: RegularizedKernelClassifier(
            "linear", C=1.0, fit_intercept=True, tol=1e-3, random_state=0)),
        DemoEntry("RegularizedKernelRegressor (eps-insensitive, coordinate descent)", "sinc",
                  lambda: RegularizedKernelRegressor(GaussianKernel(sigma=1.0), loss="epsilon_insensitive",
                                                     epsilon=0.05, C=1.0, tol=1e-3, random_state=0)),
        DemoEntry("RegularizedKernelRegressor (squared, fixed point)", "sinc", lambda: RegularizedKernelRegressor(
            GaussianKernel(sigma=1.0), C=1.0, solver="fixed_point", step_size="power", tol=1e-3, random_state=0)),
        DemoEntry("ExactKernelRidge (one-hot)", "digits", lambda: _OneHotRegressionClassifier(
            ExactKernelRidge("gaussian", alpha=1e-3, random_state=0))),
        DemoEntry("RandomFourierFeatures+RidgeClassifier", "digits", lambda: make_pipeline(
            RandomFourierFeatures("gaussian", n_components=1500, random_state=0), RidgeClassifier(alpha=1e-3))),
        DemoEntry("PolynomialRandomFeatures+RidgeClassifier", "digits", lambda: make_pipeline(
            PolynomialRandomFeatures(PolynomialKernel(degree=2, gamma=0.5, coef0=1.0), n_components=1500, random_state=0),
            RidgeClassifier(alpha=1e-3))),
        DemoEntry("NystromFeatures+RidgeClassifier", "digits", lambda: make_pipeline(
            NystromFeatures("gaussian", n_components=500, random_state=0), RidgeClassifier(alpha=1e-3))),
        DemoEntry("GeneralizedLeastSquaresClassifier", "digits",
                  lambda: GeneralizedLeastSquaresClassifier(alpha=1e-3, max_iter=300)),
        DemoEntry("CalibratedLeastSquaresClassifier", "digits", lambda: CalibratedLeastSquaresClassifier()),
        DemoEntry("StagewiseClassifier", "digits", lambda: StagewiseClassifier(
            block_size=256, n_stages=4, update="softmax", inner_iter=20, random_state=0)),
        DemoEntry("LSSVMClassifier (matching pursuit)", "digits", lambda: make_pipeline(
            CenterNormalize(), LSSVMClassifier(solver="matching_pursuit", batch_size=400, n_iter=10, random_state=0))),
        DemoEntry("LSSVMClassifier (Kaczmarz)", "digits", lambda: make_pipeline(
            CenterNormalize(), LSSVMClassifier(solver="kaczmarz", batch_size=400, n_iter=10, random_state=0))),
        DemoEntry("LSSVMClassifier (Kaczmarz-MP)", "digits", lambda: make_pipeline(
            CenterNormalize(), LSSVMClassifier(solver="kaczmarz_mp", batch_size=400, n_iter=5, random_state=0))),
        DemoEntry("LSSVMClassifier (Nystrom committee)", "digits", lambda: make_pipeline(
            CenterNormalize(), LSSVMClassifier(solver="nystrom", batch_size=600, n_iter=3, random_state=0))),
        DemoEntry("LSSVMClassifier (FFT features, MP)", "digits", lambda: make_pipeline(
            FFTFeatures(), LSSVMClassifier(solver="matching_pursuit", batch_size=400, n_iter=10, random_state=0))),
        DemoEntry("LSSVMRegressor (matching pursuit)", "sinc", lambda: LSSVMRegressor(
            GaussianKernel(sigma=1.0), C=10.0, solver="matching_pursuit", batch_size=250, n_iter=40, random_state=0)),
        DemoEntry("StagewiseRegressor", "sinc", lambda: StagewiseRegressor("gaussian", random_state=0)),
    ]


class _OneHotRegressionClassifier:
    """Classify by regressing one-hot (+-1) targets and taking the argmax (demo helper)."""

    def __init__(self, regressor):
        self.regressor = regressor

    def fit(self, X, y):
        self.classes_, codes = np.unique(y, return_inverse=True)
        Y = -np.ones((len(y), len(self.classes_)))
        Y[np.arange(len(y)), codes] = 1.0
        self.regressor.fit(X, Y)
        return self

    def predict(self, X):
        return self.classes_[np.argmax(self.regressor.predict(X), axis=1)]


def _demo_data():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    from .data.datasets import make_sinc

    digits = load_digits()
    Xd_train, Xd_test, yd_train, yd_test = train_test_split(
        digits.data / 16.0, digits.target, test_size=0.25, random_state=0, stratify=digits.target)
    return {"sinc": make_sinc(random_state=0), "digits": (Xd_train, yd_train, Xd_test, yd_test)}


def run_demo(entries=None):
    """Fit every demo entry; return rows (name, dataset, metric name, value, fit s, predict s)."""
    from tqdm.auto import tqdm

    data = _demo_data()
    rows = []
    entries = _demo_entries() if entries is None else entries
    for entry in tqdm(entries, desc="demo", leave=False):
        X_train, y_train, X_test, y_test = data[entry.dataset]
        model = entry.make()
        start = time.perf_counter()
        model.fit(X_train, y_train)
        fit_s = time.perf_counter() - start
        start = time.perf_counter()
        pred = model.predict(X_test)
        predict_s = time.perf_counter() - start
        if entry.dataset == "sinc":
            rows.append((entry.name, "sinc", "test MSE", float(np.mean((pred - y_test) ** 2)), fit_s, predict_s))
        else:
            rows.append((entry.name, "digits", "test error %", 100.0 * float(np.mean(pred != y_test)), fit_s, predict_s))
    return rows


def _print_table(header, rows):
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    _out(line.format(*header))
    _out(line.format(*("-" * w for w in widths)))
    for row in rows:
        _out(line.format(*row))


def _cmd_demo(args):
    rows = run_demo()
    _print_table(
        ("estimator", "data", "metric", "value", "fit s", "predict s"),
        [(n, d, m, f"{v:.4g}", f"{f:.3f}", f"{p:.3f}") for n, d, m, v, f, p in rows],
    )
    return 0


# ----------------------------------------------------------------------------------------------
# bench and report


_NEEDS_CHECKOUT = (
    "kernelscale {command} runs the benchmark suite, which lives in a kernelscale source checkout "
    "(its benchmarks/ folder), not in the installed package ({package}). Name the checkout: "
    "`kernelscale {command} --checkout PATH/TO/kernelscale`, or run `python -m benchmarks NAME` / "
    "`python -m benchmarks report` in its root. Code in the current directory is never run."
)
_SUITE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


def is_checkout(root):
    """True when ``root`` is a kernelscale source checkout: a pyproject.toml of the project
    "kernelscale", src/kernelscale/__init__.py and the package benchmarks/ with its harness.py."""
    root = Path(root)
    try:
        pyproject = (root / "pyproject.toml").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return (re.search(r'(?m)^name\s*=\s*"kernelscale"\s*$', pyproject) is not None
            and (root / "src" / "kernelscale" / "__init__.py").is_file()
            and (root / "benchmarks" / "__init__.py").is_file()
            and (root / "benchmarks" / "harness.py").is_file())


def _own_checkout():
    """The checkout this kernelscale is imported from (an editable install, or src/ on the
    path), or None for an installed package."""
    root = Path(__file__).resolve().parents[2]
    return root if is_checkout(root) else None


def _checkout_root(command, checkout=None):
    """The root of the checkout named with --checkout, else of the checkout this kernelscale runs
    from; never the current directory (an installed command must not run code from it)."""
    if checkout is not None:
        root = Path(checkout).expanduser().resolve()
        if not is_checkout(root):
            raise SystemExit(
                f"--checkout {checkout}: not a kernelscale source checkout (expected a "
                f'pyproject.toml with name = "kernelscale", src/kernelscale/ and '
                f"benchmarks/__init__.py, harness.py). Pass the root of a clone of the kernelscale "
                f"repository."
            )
        return root
    root = _own_checkout()
    if root is None:
        raise SystemExit(_NEEDS_CHECKOUT.format(command=command,
                                                package=Path(__file__).resolve().parent))
    return root


def _import_benchmarks(root, module_name):
    """Import ``benchmarks.<module_name>`` of the checkout at ``root``: the root goes first on
    ``sys.path`` (so that the benchmarks' own imports and their child processes find the package),
    and a package ``benchmarks`` imported from anywhere else is dropped first."""
    folder = root / "benchmarks"
    loaded = sys.modules.get("benchmarks")
    if loaded is not None and Path(getattr(loaded, "__file__", None) or "").resolve().parent != folder:
        for name in [n for n in sys.modules if n == "benchmarks" or n.startswith("benchmarks.")]:
            del sys.modules[name]
    if str(root) in sys.path:
        sys.path.remove(str(root))
    sys.path.insert(0, str(root))
    package = importlib.import_module("benchmarks")
    if Path(package.__file__).resolve().parent != folder:
        raise SystemExit(f"benchmarks was imported from {package.__file__}, not from {folder}.")
    return importlib.import_module(f"benchmarks.{module_name}")


def _cmd_bench(args):
    root = _checkout_root("bench", args.checkout)
    harness = _import_benchmarks(root, "harness")
    if not _SUITE_NAME.fullmatch(args.name):
        raise SystemExit(f"no benchmark suite {args.name!r}; available: {', '.join(harness.list_suites())}.")
    try:
        suite = harness.load_suite(args.name)
    except ValueError as err:
        raise SystemExit(str(err)) from None
    path = suite.run(quick=args.quick)
    _out(f"results written to {path}")
    return 0


def _cmd_report(args):
    if args.model:
        from .persistence import describe

        _out(json.dumps(describe(args.model), indent=2, default=str))
        return 0
    report = _import_benchmarks(_checkout_root("report", args.checkout), "tools.report")
    return report.main(["--print"])


# ----------------------------------------------------------------------------------------------
# fit and predict


def _estimator_class(name):
    from .registry import ESTIMATORS, by_name

    try:
        return by_name(name).cls
    except KeyError:
        raise SystemExit(f"unknown estimator {name!r}; choose one of: "
                         f"{', '.join(sorted(e.name for e in ESTIMATORS))}.") from None


def _parse_value(text):
    """A JSON value when the text parses as one (numbers, true/false/null, lists), else the string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def build_estimator(name, assignments):
    """Construct estimator ``name`` with ``key=value`` assignments; nested keys such as
    ``kernel__sigma=2`` set parameters of the kernel (scikit-learn's set_params syntax)."""
    from .kernels import make_kernel

    estimator = _estimator_class(name)()
    params = {}
    for item in assignments:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"parameter {item!r} is not of the form key=value.")
        params[key] = _parse_value(value)
    if isinstance(params.get("kernel"), str):
        params["kernel"] = make_kernel(params["kernel"])
    top = {k: v for k, v in params.items() if "__" not in k}
    nested = {k: v for k, v in params.items() if "__" in k}
    try:
        estimator.set_params(**top)
        estimator.set_params(**nested)
    except ValueError as err:
        raise SystemExit(f"invalid parameter for {name}: {err}") from None
    return estimator


def _cmd_fit(args):
    from .data.datasets import load_file
    from .persistence import save

    X, y = load_file(args.data, part=args.part)
    if y is None:
        raise SystemExit(f"{args.data} has no targets to fit; use a file with y (npz 'y', svmlight labels, csv last column).")
    estimator = build_estimator(args.estimator, args.param)
    start = time.perf_counter()
    estimator.fit(X, y)
    fit_s = time.perf_counter() - start
    save(estimator, args.output)
    _out(f"fitted {args.estimator} on {len(y)} samples in {fit_s:.3f} s; saved to {args.output}")
    return 0


def _cmd_predict(args):
    from .data.datasets import load_file
    from .persistence import load

    model = load(args.model)
    X, y = load_file(args.data, part=args.part, n_features=getattr(model, "n_features_in_", None))
    pred = model.predict(X)
    lines = "\n".join(str(v) for v in np.asarray(pred).tolist()) + "\n"
    if args.output:
        Path(args.output).write_text(lines)
    else:
        sys.stdout.write(lines)
    if y is not None:
        if is_classifier(model):
            sys.stderr.write(f"test error: {100 * np.mean(pred != y):.3f} %\n")
        else:
            sys.stderr.write(f"test MSE: {np.mean((np.asarray(pred, float) - y) ** 2):.6g}\n")
    return 0


# ----------------------------------------------------------------------------------------------


def _parser():
    parser = argparse.ArgumentParser(prog="kernelscale", description="Scalable kernel machines.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("demo", help="fit every estimator on embedded data and print a table").set_defaults(func=_cmd_demo)

    checkout_help = ("root of the kernelscale source checkout whose benchmarks/ to run (default: the "
                     "checkout this kernelscale is imported from; never the current directory)")
    bench = sub.add_parser("bench", help="run a benchmark suite of a source checkout's benchmarks/")
    bench.add_argument("name", help="suite name, e.g. blocks, slkl, dsg, fixed-point, lssvm, least-squares")
    bench.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    bench.add_argument("--checkout", metavar="PATH", help=checkout_help)
    bench.set_defaults(func=_cmd_bench)

    fit = sub.add_parser("fit", help="fit an estimator on a data file and save it")
    fit.add_argument("estimator", help="class name, e.g. ExactKernelRidge")
    fit.add_argument("data", help=".npz (X, y), svmlight, or .csv (target in the last column)")
    fit.add_argument("-o", "--output", required=True, help="model file to write")
    fit.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE",
                     help="estimator parameter, repeatable; e.g. -p alpha=0.1 -p kernel=gaussian -p kernel__sigma=2")
    fit.add_argument("--part", choices=("train", "test"), help="for .npz files with a train/test split")
    fit.set_defaults(func=_cmd_fit)

    predict = sub.add_parser("predict", help="predict with a saved model")
    predict.add_argument("model")
    predict.add_argument("data")
    predict.add_argument("-o", "--output", help="file for the predictions (default: stdout)")
    predict.add_argument("--part", choices=("train", "test"))
    predict.set_defaults(func=_cmd_predict)

    report = sub.add_parser("report", help="describe a saved model, or print the benchmark results table")
    report.add_argument("model", nargs="?")
    report.add_argument("--checkout", metavar="PATH", help=checkout_help)
    report.set_defaults(func=_cmd_report)
    return parser


def main(argv=None):
    args = _parser().parse_args(argv)
    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="%(message)s")
    return args.func(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
