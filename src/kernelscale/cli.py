"""The ``kernelscale`` command: demo, fit, predict, report (and bench in a source checkout).

- ``kernelscale demo`` fits every estimator on embedded data (synthetic sinc, scikit-learn's
  digits) and prints test error, fit time and predict time.
- ``kernelscale fit ESTIMATOR DATA -o MODEL [-p key=value ...]`` fits and saves a model. A
  delimited text file (.csv, .tsv, or any file with ``--delimiter``) is read by
  :mod:`kernelscale.data.table`: its target is the last column or the one ``--target`` names,
  ``--one-hot`` encodes text feature columns, and the columns are saved with the model.
- ``kernelscale predict MODEL DATA [-o FILE]`` writes one prediction per line; the file holds the
  feature columns, with or without the target column (then scored on stderr).
- ``kernelscale report MODEL`` describes a saved model (in a source checkout, ``report`` alone
  prints the benchmark results table).
- ``kernelscale bench NAME [--quick] [--checkout PATH]`` runs the suite NAME of the package
  ``benchmarks`` of a source checkout (``benchmarks/papers/slkl.py`` for ``slkl``, as
  ``python -m benchmarks NAME`` does in it): the checkout named, else the one this kernelscale is
  imported from (an editable install). The suites reproduce the papers' tables and are not part of
  the installed package, whose help does not offer ``bench``: there it asks for ``--checkout``.
  Nothing is ever run from the current directory.

Every mistake in a command or its files is one line on stderr (``kernelscale fit: error: ...``)
that names the argument and the fix, with exit status 2 and no traceback (``--debug`` shows it);
``-v`` shows the estimator's progress.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import re
import sys
import time
import zipfile
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
# errors: one line on stderr, a non-zero status, no traceback (--debug shows it)


class CommandError(SystemExit):
    """A mistake in the command or its files: :func:`main` prints the message as one line on
    stderr and returns status 2. A SystemExit, so that a script calling these functions
    directly also stops with the message rather than a traceback."""


def _one_line(text, limit=1500):
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _explain(err):
    """The one-line message and exit status for an exception a command raised."""
    from .data.table import TableError

    if isinstance(err, CommandError):
        return _one_line(err.code), 2
    if isinstance(err, KeyboardInterrupt):
        return "interrupted.", 130
    if isinstance(err, BrokenPipeError):  # e.g. | head: stop quietly, as other tools do
        return None, 141
    if isinstance(err, MemoryError):
        return ("out of memory; lower -p max_memory, or the parameter that sizes the model (n_components, "
                "block_size, batch_size), or use fewer rows."), 1
    if isinstance(err, (TableError, ValueError)):  # the estimators' and loaders' messages name the fix
        return _one_line(err), 2
    if isinstance(err, OSError) and err.strerror:
        where = f"{err.filename}: " if err.filename else ""
        return f"{where}{err.strerror.lower()}.", 2
    return (f"unexpected {type(err).__name__}: {_one_line(err, 500)} (a bug in kernelscale: rerun with "
            f"--debug for the traceback and report it)"), 1


def _existing_file(path, what):
    """``path`` as a Path; a CommandError when it is missing or a directory."""
    path = Path(path)
    if not path.exists():
        raise CommandError(f"{what} {path}: no such file; check the path.")
    if path.is_dir():
        raise CommandError(f"{what} {path}: is a directory; name a file in it.")
    return path


def _check_output(path, option):
    """Fail before any work when ``path`` cannot be written: a directory, or in a missing one."""
    path = Path(path)
    if path.is_dir():
        raise CommandError(f"{option} {path}: is a directory; name the file to write in it, e.g. "
                           f"{path / 'model.ksm'}.")
    if not path.parent.is_dir():
        raise CommandError(f"{option} {path}: the directory {path.parent} does not exist; create it "
                           f"(mkdir -p {path.parent}) or write elsewhere.")


# ----------------------------------------------------------------------------------------------
# bench and report


_SUITE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
_NOT_INSTALLED = {
    "bench": ("kernelscale bench runs the benchmark suites, which reproduce the papers' tables from a "
              "source checkout and are not part of the installed package; name a clone of the "
              "kernelscale repository: kernelscale bench NAME --checkout PATH (or run python -m "
              "benchmarks NAME in it)."),
    "report": ("name a model file: kernelscale report MODEL describes a model saved by kernelscale fit "
               "(the benchmark results table needs a source checkout: kernelscale report --checkout PATH)."),
}


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
            raise CommandError(
                f"--checkout {checkout}: not a kernelscale source checkout (expected a pyproject.toml "
                f'with name = "kernelscale", src/kernelscale/ and benchmarks/__init__.py, harness.py); '
                f"pass the root of a clone of the kernelscale repository."
            )
        return root
    root = _own_checkout()
    if root is None:
        raise CommandError(_NOT_INSTALLED[command])
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
        raise CommandError(f"benchmarks was imported from {package.__file__}, not from {folder}.")
    return importlib.import_module(f"benchmarks.{module_name}")


def _cmd_bench(args):
    root = _checkout_root("bench", args.checkout)
    harness = _import_benchmarks(root, "harness")
    if not _SUITE_NAME.fullmatch(args.name):
        raise CommandError(f"no benchmark suite {args.name!r}; available: {', '.join(harness.list_suites())}.")
    try:
        suite = harness.load_suite(args.name)
    except ValueError as err:
        raise CommandError(str(err)) from None
    path = suite.run(quick=args.quick)
    _out(f"results written to {path}")
    return 0


def _cmd_report(args):
    if args.model:
        from .persistence import describe

        _out(json.dumps(describe(_existing_file(args.model, "MODEL")), indent=2, default=str))
        return 0
    report = _import_benchmarks(_checkout_root("report", args.checkout), "tools.report")
    return report.main(["--print"])


# ----------------------------------------------------------------------------------------------
# fit and predict

#: extensions read by kernelscale.data.load_file (a trailing .gz allowed on all but .npz, .npy)
_FILE_FORMATS = (".npz", ".npy", ".svm", ".svmlight", ".libsvm", ".txt", ".idx", "-ubyte")
_TABLE_FORMATS = (".csv", ".tsv")
_TABLE_OPTIONS = ("target", "one_hot", "delimiter", "header")


def _fittable():
    """The registry's classifiers and regressors (the transformers are feature maps for a pipeline)."""
    from .registry import ESTIMATORS

    return [e for e in ESTIMATORS if e.kind in ("classifier", "regressor")]


def _estimator_class(name):
    import difflib

    from .registry import ESTIMATORS

    entries = _fittable()
    for entry in entries:
        if entry.name.lower() == name.lower():
            return entry.cls
    for entry in ESTIMATORS:
        if entry.name.lower() == name.lower():
            raise CommandError(f"{entry.name} is a feature map (a transformer), not a model to fit and "
                               f"predict with; use it from Python in a pipeline, or choose one of: "
                               f"{', '.join(e.name for e in entries)}.")
    close = difflib.get_close_matches(name, [e.name for e in entries], n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    raise CommandError(f"unknown estimator {name!r}; {hint}choose one of: "
                       f"{', '.join(sorted(e.name for e in entries))} (kernelscale fit --help).")


def _parse_value(text):
    """A JSON value when the text parses as one (numbers, true/false/null, lists), True/False/None
    as Python writes them, else the string."""
    if text in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[text]
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def build_estimator(name, assignments, verbose=False):
    """Construct estimator ``name`` with ``key=value`` assignments; nested keys such as
    ``kernel__sigma=2`` set parameters of the kernel (scikit-learn's set_params syntax), of the
    estimator's default kernel when no ``kernel=`` is given. ``verbose``: turn on the estimator's
    progress output (``verbose=1``) unless an assignment sets it. Every mistake is a
    CommandError naming the assignment."""
    from sklearn.base import clone

    from .kernels import Kernel, make_kernel

    cls = _estimator_class(name)
    estimator = cls()
    defaults = estimator.get_params(deep=False)
    params, given = {}, {}
    for item in assignments:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise CommandError(f"-p {item!r}: not of the form key=value, e.g. -p alpha=0.1.")
        if key.split("__")[0] not in defaults:
            raise CommandError(f"-p {item}: {cls.__name__} has no parameter {key.split('__')[0]!r}; its "
                               f"parameters are {', '.join(sorted(defaults))}.")
        params[key], given[key] = _parse_value(value), item
    if verbose and "verbose" in defaults and "verbose" not in params:
        params["verbose"] = 1
    nested = {k: v for k, v in params.items() if "__" in k}
    kernel_keys = [k for k in nested if k.startswith("kernel__")]
    if "kernel" in params and isinstance(params["kernel"], str):
        try:
            params["kernel"] = make_kernel(params["kernel"])
        except ValueError as err:
            raise CommandError(f"-p {given['kernel']}: {err}") from None
    elif kernel_keys and "kernel" not in params:  # the default kernel, as an object to set
        default = defaults.get("kernel")
        if isinstance(default, str):
            params["kernel"] = make_kernel(default)
        elif isinstance(default, Kernel):
            params["kernel"] = clone(default)
        else:
            raise CommandError(f"-p {given[kernel_keys[0]]}: {cls.__name__} has no default kernel to set "
                               f"it on; name one first, e.g. -p kernel=gaussian.")
    for group in ({k: v for k, v in params.items() if "__" not in k}, nested):
        for key, value in group.items():
            try:
                estimator.set_params(**{key: value})
            except ValueError as err:
                raise CommandError(f"-p {given.get(key, key)}: {err}") from None
    _validate_parameters(estimator, given)
    return estimator


def _validate_parameters(estimator, given):
    """Check the parameters now, before any data is read (scikit-learn's constraints, then the
    kernel's own checks), naming the assignment that set a bad one."""
    from .kernels import Kernel

    validate = getattr(estimator, "_validate_params", None)
    try:
        if validate is not None:
            validate()
    except ValueError as err:
        name = re.search(r"The '(\w+)' parameter", str(err))
        item = given.get(name.group(1)) if name else None
        raise CommandError(f"-p {item}: {err}" if item else str(err)) from None
    kernel = getattr(estimator, "kernel", None)
    if isinstance(kernel, Kernel):
        try:
            kernel._check_params()
        except ValueError as err:
            items = [v for k, v in given.items() if k.startswith("kernel")]
            raise CommandError(f"-p {' -p '.join(items)}: {err}" if items else str(err)) from None


def _is_table(path, args):
    """Whether DATA is read as delimited text (.csv, .tsv or --delimiter), else by load_file."""
    name = path.name.lower().removesuffix(".gz")
    if args.delimiter is not None or name.endswith(_TABLE_FORMATS):
        if args.part is not None:
            raise CommandError(f"--part {args.part}: only for .npz files with a train/test split "
                               f"(X_train, y_train, X_test, y_test).")
        return True
    if not name.endswith(_FILE_FORMATS):
        raise CommandError(
            f"{path}: cannot tell the format from the extension; use .csv or .tsv (or --delimiter , "
            f"for delimited text under another name), .npz, .npy, svmlight (.svm, .svmlight, .libsvm, "
            f".txt) or IDX (.idx, *-ubyte).")
    return False


def _load_other(args, path, n_features=None):
    """``X, y`` of a file that is not delimited text, through kernelscale.data.load_file."""
    from .data.datasets import load_file

    used = [f"--{o.replace('_', '-')}" for o in _TABLE_OPTIONS if getattr(args, o, None) not in (None, False)]
    if used:
        raise CommandError(f"{' '.join(used)}: only for delimited text files (.csv, .tsv, or any file "
                           f"read with --delimiter); {path} is read by its extension.")
    if path.name.lower().endswith(".npz"):
        try:
            with np.load(path, allow_pickle=False) as f:
                keys = sorted(f.files)
        except (OSError, ValueError, zipfile.BadZipFile) as err:
            raise CommandError(f"{path}: not a readable .npz archive ({err}).") from None
        if args.part is None and "X" not in keys and "X_train" in keys:
            raise CommandError(f"{path} holds a train/test split ({', '.join(keys)}): pass --part train "
                               f"or --part test.")
        if args.part is not None and f"X_{args.part}" not in keys:
            raise CommandError(f"--part {args.part}: {path} has no array X_{args.part}; it holds "
                               f"{', '.join(keys)}.")
    elif args.part is not None:
        raise CommandError(f"--part {args.part}: only for .npz files with a train/test split "
                           f"(X_train, y_train, X_test, y_test).")
    return load_file(path, part=args.part, n_features=n_features)


def _read_training(args, classifier):
    """``X, y, layout`` of the training file (layout: the columns of a delimited text file, saved
    with the model; None for the other formats)."""
    from .data.table import fit_arrays, read_table

    path = _existing_file(args.data, "DATA")
    if _is_table(path, args):
        table = read_table(path, delimiter=args.delimiter, header=args.header, keep_text=args.one_hot)
        return fit_arrays(table, target=args.target, one_hot=args.one_hot, classifier=classifier)
    X, y = _load_other(args, path)
    if y is None:
        raise CommandError(f"{path} has no targets to fit; use a file with them (a .npz with y, "
                           f"svmlight labels, or a .csv with a target column).")
    return X, y, None


def _refuse_nan_labels(path, y):
    """A target with NaN (a .npz's y) can be neither fitted nor scored."""
    y = np.asarray(y)
    if y.dtype.kind == "f" and np.isnan(y).any():
        rows = np.flatnonzero(np.isnan(y).reshape(len(y), -1).any(axis=1))
        raise CommandError(f"{path}: {len(rows)} target(s) are NaN (the first in row {rows[0]}); drop the rows "
                           f"without a target.")


def _cmd_fit(args):
    from .persistence import save

    _check_output(args.output, "-o")
    estimator = build_estimator(args.estimator, args.param, verbose=args.verbose)
    X, y, layout = _read_training(args, is_classifier(estimator))
    if not is_classifier(estimator):
        y = np.asarray(y, dtype=np.float64)
    _refuse_nan_labels(args.data, y)
    start = time.perf_counter()
    estimator.fit(X, y)
    fit_s = time.perf_counter() - start
    save(estimator, args.output, metadata=None if layout is None else {"columns": layout.to_json()})
    encoded = f", {X.shape[1]} features after one-hot encoding" if layout is not None and layout.one_hot else ""
    _out(f"fitted {type(estimator).__name__} on {len(y)} samples{encoded} in {fit_s:.3f} s; saved to "
         f"{args.output}")
    return 0


def _stored_layout(path, model):
    """The columns a model was fitted on: as kernelscale fit saved them, else its features then a
    target."""
    from .data.table import Layout
    from .persistence import describe

    stored = (describe(path).get("metadata") or {}).get("columns")
    if stored is not None:
        return Layout.from_json(stored)
    n_features = getattr(model, "n_features_in_", None)
    if n_features is None:
        raise CommandError(f"{path}: the model does not record its number of features "
                           f"(n_features_in_); predict from Python instead.")
    classes = getattr(model, "classes_", None)
    text = classes is not None and np.asarray(classes).dtype.kind in "USO"
    return Layout.plain(int(n_features), labels="text" if text else "number")


def _cmd_predict(args):
    from .data.table import predict_arrays, read_table
    from .persistence import load

    model_path = _existing_file(args.model, "MODEL")
    path = _existing_file(args.data, "DATA")
    if args.output:
        _check_output(args.output, "-o")
    model = load(model_path)
    if not hasattr(model, "predict"):
        raise CommandError(f"MODEL {model_path}: holds a {type(model).__name__}, which does not predict; "
                           f"name a model saved by kernelscale fit.")
    if _is_table(path, args):
        layout = _stored_layout(model_path, model)
        table = read_table(path, delimiter=args.delimiter, header=args.header,
                           keep_text=bool(layout.one_hot) or layout.labels == "text")
        X, y, notes = predict_arrays(table, layout, target=args.target)
        for note in notes:
            sys.stderr.write(f"kernelscale predict: note: {note}\n")
    else:
        X, y = _load_other(args, path, n_features=getattr(model, "n_features_in_", None))
        if y is not None:
            _refuse_nan_labels(path, y)
    pred = model.predict(X)
    lines = "\n".join(str(v) for v in np.asarray(pred).tolist()) + "\n"
    if args.output:
        Path(args.output).write_text(lines)
    else:
        sys.stdout.write(lines)
    if y is not None:
        if is_classifier(model):
            sys.stderr.write(f"test error: {100 * np.mean(np.asarray(pred) != np.asarray(y)):.3f} % "
                             f"({len(y)} rows)\n")
        else:
            mse = np.mean((np.asarray(pred, float) - np.asarray(y, float)) ** 2)
            sys.stderr.write(f"test MSE: {mse:.6g} ({len(y)} rows)\n")
    return 0


# ----------------------------------------------------------------------------------------------
# the parser


class _Parser(argparse.ArgumentParser):
    """argparse with its usage errors on one line (the usage is in --help)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {_one_line(message)} (see {self.prog} --help)\n")


class _Version(argparse.Action):
    """--version: the version and the package's folder, on one line (argparse's own wraps it)."""

    def __init__(self, option_strings, version, dest=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=argparse.SUPPRESS, nargs=0, help=help)
        self.version = version

    def __call__(self, parser, namespace, values, option_string=None):
        _out(self.version)
        parser.exit()


def _estimators_epilog():
    import textwrap

    lines = ["estimators:"]
    for kind in ("classifier", "regressor"):
        names = ", ".join(e.name for e in _fittable() if e.kind == kind)
        lines += textwrap.wrap(names, width=96, initial_indent=f"  {kind + 's:':<13}", subsequent_indent=" " * 15)
    lines += [
        "",
        "data: .csv/.tsv (or any file with --delimiter), .npz (X, y), .npy, svmlight, IDX.",
        "A delimited file's target is its last column unless --target names it; predict reads new",
        "files by the columns saved with the model (features only, or with the target to score).",
        "",
        "example: kernelscale fit SLKLClassifier train.csv --target label -o model.ksm -p alpha=0.1",
    ]
    return "\n".join(lines)


def _cmd_compare(args):
    from .auto.compare import compare, format_comparison, plot_comparison

    if args.plot is not None:
        _check_output(args.plot, "--plot")
    if not args.time_budget > 0:
        raise CommandError(f"--time-budget {args.time_budget:g}: give a positive number of seconds.")
    X, y, _ = _read_training(args, classifier=args.task != "regression")
    _refuse_nan_labels(args.data, y)
    task = args.task
    if task is None:
        y = np.asarray(y)
        task = "classification" if (y.dtype.kind in "biuUSO" and np.unique(y).size <= 100) else "regression"
    log = (lambda text: sys.stderr.write(f"kernelscale compare: {text}\n")) if args.verbose else None
    rows = compare(X, y, task=task, time_budget=args.time_budget, test_size=args.test_size, log=log)
    _out(f"{task} on {args.data}: {len(y)} rows x {X.shape[1]} features, {args.test_size:.0%} held out")
    _out(format_comparison(rows, task))
    if args.plot is not None:
        plot_comparison(rows, task, args.plot)
        _out(f"error against fit time: {args.plot}")
    return 0


def _table_options(parser, fitting):
    parser.add_argument("--target", metavar="NAME|INDEX",
                        help="the target column of a delimited file, by header name or index (0 is the "
                             "first column, -1 the last); " + (
                                 "default: the last column" if fitting else
                                 "default: the fitted target's column when the file has it"))
    parser.add_argument("--delimiter", metavar="CHAR",
                        help="field delimiter of a delimited text file: a character or tab, comma, semicolon, "
                             "pipe, space (default: detected among , tab ; |); reads any file as delimited text")
    parser.add_argument("--header", action=argparse.BooleanOptionalAction, default=None,
                        help="whether the first row holds column names (default: detected)")


def _common_options(default):
    """-v and --debug, accepted before the command (``default`` False) and after it (SUPPRESS, so
    that a command's parser leaves the value given before it)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-v", "--verbose", action="store_true", default=default,
                        help="show progress on stderr (the estimator's progress bar, log messages)")
    common.add_argument("--debug", action="store_true", default=default,
                        help="show the Python traceback of an error")
    return common


def _parser():
    parser = _Parser(prog="kernelscale", parents=[_common_options(False)],
                     description="Scalable kernel machines: fit, predict, describe models; a demo.")
    from .base.version import __version__

    parser.add_argument("--version", action=_Version, help="show the version, where it is installed, and exit",
                        version=f"kernelscale {__version__} from {Path(__file__).resolve().parent} "
                                f"(Python {sys.version.split()[0]})")
    common = _common_options(argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    checkout = _own_checkout()

    sub.add_parser("demo", parents=[common], help="fit every estimator on embedded data and print a table",
                   description="Fit every estimator on embedded data (synthetic sinc, scikit-learn's digits) "
                               "and print test error, fit and predict time.").set_defaults(func=_cmd_demo)

    fit = sub.add_parser("fit", parents=[common], help="fit an estimator on a data file and save the model",
                         description="Fit an estimator on a data file and save the model.",
                         epilog=_estimators_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    fit.add_argument("estimator", metavar="ESTIMATOR", help="an estimator's class name (listed below)")
    fit.add_argument("data", metavar="DATA", help="the training file: features and a target column")
    fit.add_argument("-o", "--output", required=True, metavar="MODEL", help="model file to write, e.g. model.ksm")
    fit.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE",
                     help="estimator parameter, repeatable; e.g. -p alpha=0.1 -p kernel=laplacian -p kernel__sigma=2")
    _table_options(fit, fitting=True)
    fit.add_argument("--one-hot", action="store_true",
                     help="encode text feature columns as 0/1 columns, one per value (saved with the model)")
    fit.add_argument("--part", choices=("train", "test"), help="for .npz files with a train/test split")
    fit.set_defaults(func=_cmd_fit)

    predict = sub.add_parser("predict", parents=[common], help="predict with a saved model",
                             description="Write one prediction per row; print the test error (classifiers) or "
                                         "MSE (regressors) on stderr when the file has the target column.")
    predict.add_argument("model", metavar="MODEL", help="a model file written by kernelscale fit")
    predict.add_argument("data", metavar="DATA", help="new data: the feature columns, with or without the target")
    predict.add_argument("-o", "--output", metavar="FILE", help="file for the predictions (default: stdout)")
    _table_options(predict, fitting=False)
    predict.add_argument("--part", choices=("train", "test"), help="for .npz files with a train/test split")
    predict.set_defaults(func=_cmd_predict)

    comp = sub.add_parser("compare", parents=[common], help="the automatic front door beside scikit-learn on your data",
                          description="Fit AutoKernelClassifier/AutoKernelRegressor within --time-budget beside "
                                      "scikit-learn's SVC/KernelRidge (subsampled when they would not fit in the "
                                      "budget), Nystroem + Ridge and HistGradientBoosting, on a training split of "
                                      "DATA; print the held-out error and the fit and predict times.")
    comp.add_argument("data", metavar="DATA", help="the data file: features and a target column")
    comp.add_argument("--time-budget", type=float, default=60.0, metavar="S",
                      help="seconds for the front door's fit (default 60); the exact peers plan to half of it")
    comp.add_argument("--task", choices=("classification", "regression"),
                      help="default: classification for integer or text labels with at most 100 values")
    comp.add_argument("--test-size", type=float, default=0.25, metavar="F", help="held-out fraction (default 0.25)")
    comp.add_argument("--plot", metavar="PNG", help="also draw error against fit time into this file (matplotlib)")
    _table_options(comp, fitting=True)
    comp.add_argument("--one-hot", action="store_true", help="encode text feature columns as 0/1 columns")
    comp.add_argument("--part", choices=("train", "test"), help="for .npz files with a train/test split")
    comp.set_defaults(func=_cmd_compare)

    report = sub.add_parser("report", parents=[common], help="describe a saved model",
                            description="Print what a model file holds (JSON), without loading the model.")
    report.add_argument("model", nargs="?", metavar="MODEL")
    report.add_argument("--checkout", metavar="PATH", help=argparse.SUPPRESS if checkout is None else
                        "without MODEL: print the results table of this source checkout's benchmarks")
    report.set_defaults(func=_cmd_report)

    # the benchmark suites live in a source checkout: offered there, or with --checkout
    bench = sub.add_parser("bench", parents=[common], **(
        {} if checkout is None else {"help": "run a benchmark suite of this source checkout"}))
    bench.add_argument("name", help="suite name, e.g. blocks, slkl, dsg, fixed-point, lssvm, least-squares")
    bench.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    bench.add_argument("--checkout", metavar="PATH",
                       help="root of the kernelscale source checkout whose benchmarks/ to run (default: the "
                            "checkout this kernelscale is imported from; never the current directory)")
    bench.set_defaults(func=_cmd_bench)
    return parser


def main(argv=None):
    """Run the command; returns the exit status. A mistake in the command or its files prints one
    line on stderr (``kernelscale COMMAND: error: ...``) and returns 2; ``--debug`` adds the
    traceback."""
    import traceback
    import warnings

    args = _parser().parse_args(argv)
    prog = f"kernelscale {args.command}"
    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="%(message)s")
    with warnings.catch_warnings():
        if not args.debug:
            warnings.showwarning = lambda message, category, *rest, **kw: sys.stderr.write(
                f"{prog}: warning: {_one_line(message)}\n")
        try:
            return args.func(args)
        except (CommandError, Exception, KeyboardInterrupt) as err:
            if args.debug:
                traceback.print_exc()
            message, status = _explain(err)
            if message is None:
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
            else:
                sys.stderr.write(f"{prog}: error: {message}\n")
            return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
