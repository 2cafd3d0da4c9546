"""The installed ``kernelscale`` command as people use it (issue 38, items 4 and 5), run as a
subprocess: the console script next to this Python (``pip install`` puts it there), else
``python -m kernelscale``. Every mistake is one line on stderr naming the argument and the fix,
exit status 2, no traceback; ``--debug`` adds the traceback."""

import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import kernelscale
from kernelscale import cli
from kernelscale.registry import ESTIMATORS

CHECKOUT = Path(__file__).resolve().parents[1]
PACKAGE = Path(kernelscale.__file__).resolve().parent


def command_line():
    """The installed command: the console script of this environment, else ``python -m``."""
    bindir = Path(sys.executable).parent
    for name in ("kernelscale", "kernelscale.exe"):
        if (bindir / name).is_file():
            return [str(bindir / name)]
    return [sys.executable, "-m", "kernelscale"]


def run(*args, cwd=None, pythonpath=None, check=None):
    """Run ``kernelscale ARGS`` with this environment (PYTHONPATH included, so that a checkout's
    src/ on it is what the command imports); ``pythonpath`` goes in front of it."""
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(pythonpath), env.get("PYTHONPATH")) if p)
    result = subprocess.run([*command_line(), *map(str, args)], cwd=cwd, env=env, capture_output=True,
                            text=True, timeout=300)
    if check is not None:
        assert result.returncode == check, (result.returncode, result.stdout[-2000:], result.stderr[-2000:])
    return result


def assert_error(result, pattern, command):
    """Exit status 2, stdout empty, stderr one line ``kernelscale COMMAND: error: ...`` matching
    ``pattern``, no traceback."""
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.splitlines()
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert len(lines) == 1, result.stderr
    assert result.stdout == "", result.stdout
    prefix = f"kernelscale {command}: error: " if command else "kernelscale: error: "
    assert lines[0].startswith(prefix), lines[0]
    assert re.search(pattern, lines[0]), (pattern, lines[0])


def test_the_command_runs_this_kernelscale():
    out = run("--version", check=0).stdout
    assert out.startswith(f"kernelscale {kernelscale.__version__} from {PACKAGE} "), (out, PACKAGE)


# ----------------------------------------------------------------------------------------------
# data files


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A folder of data files (and a model fitted on train.csv): the good and the broken."""
    d = tmp_path_factory.mktemp("cli")
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, size=(200, 4))
    y = np.sin(X[:, 0]) + 0.1 * X[:, 1]
    text = "a,b,c,d,y\n" + "".join(",".join(f"{v:.6f}" for v in row) + "\n" for row in np.column_stack([X, y]))
    (d / "train.csv").write_text(text)
    (d / "bom.csv").write_text(text, encoding="utf-8-sig")
    (d / "bom_noheader.csv").write_text(text.split("\n", 1)[1], encoding="utf-8-sig")
    (d / "utf16.csv").write_text(text, encoding="utf-16")  # with a byte-order mark
    (d / "utf16_nobom.csv").write_bytes(text.encode("utf-16-le"))
    (d / "features.csv").write_text("a,b,c,d\n" + "".join(",".join(f"{v:.6f}" for v in row) + "\n" for row in X[:20]))
    (d / "features_noheader.csv").write_text("".join(",".join(f"{v:.6f}" for v in row) + "\n" for row in X[:20]))
    (d / "semicolon.txt").write_text("".join(";".join(f"{v:.6f}" for v in row) + "\n"
                                             for row in np.column_stack([y, X])))
    (d / "ragged.csv").write_text("a,b,y\n1,2,3\n4,5\n6,7,8\n")
    (d / "text_in_numbers.csv").write_text("a,b,y\n1,2,3\n4,abc,5\n6,7,8\n7,8,9\n")
    (d / "empty.csv").write_text("")
    (d / "header_only.csv").write_text("a,b,y\n")
    (d / "nan_label.csv").write_text("a,b,c,d,y\n" + "".join(
        ",".join(f"{v:.6f}" for v in X[i]) + (",nan\n" if i == 4 else f",{y[i]:.6f}\n") for i in range(10)))
    (d / "empty_label.csv").write_text("a,b,c,d,y\n" + "".join(
        ",".join(f"{v:.6f}" for v in X[i]) + (",\n" if i == 2 else f",{y[i]:.6f}\n") for i in range(10)))
    cut = np.array(["Ideal", "Premium", "Good"])[rng.integers(0, 3, 200)]
    price = 2.0 * (cut == "Ideal") + X[:, 0]
    (d / "diamonds.csv").write_text("carat,cut,depth,price\n" + "".join(
        f"{X[i, 0]:.4f},{cut[i]},{X[i, 1]:.4f},{price[i]:.4f}\n" for i in range(200)))
    # new data: columns in another order, the target present, a category never seen in fitting
    (d / "diamonds_new.csv").write_text("price,depth,cut,carat\n" + "".join(
        f"{price[i]:.4f},{X[i, 1]:.4f},{'Fair' if i == 3 else cut[i]},{X[i, 0]:.4f}\n" for i in range(10)))
    label = np.where(X[:, 0] > 0, "yes", "no")
    (d / "labels.tsv").write_text("label\tx1\tx2\n" + "".join(
        f"{label[i]}\t{X[i, 0]:.4f}\t{X[i, 1]:.4f}\n" for i in range(200)))
    np.savez(d / "split.npz", X_train=X, y_train=y, X_test=X[:5], y_test=y[:5])
    run("fit", "ExactKernelRidge", d / "train.csv", "-o", d / "model.ksm", "-p", "alpha=0.1", check=0)
    return d


def predictions(result):
    return np.array([float(v) for v in result.stdout.split()])


# ----------------------------------------------------------------------------------------------
# what works (the commands of each stage run side by side: each one is a Python start-up)


def run_all(commands, **kwargs):
    """Run ``{name: args}`` concurrently (``kwargs`` as for :func:`run`); ``{name: CompletedProcess}``."""
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        futures = {name: pool.submit(run, *args, **kwargs) for name, args in commands.items()}
    return {name: future.result() for name, future in futures.items()}


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="module")
def fits(files, out):
    d = files
    return run_all({
        **{name: ("fit", "ExactKernelRidge", d / name, "-o", out / f"{name}.ksm", "-p", "alpha=0.1")
           for name in ("train.csv", "bom.csv", "bom_noheader.csv", "utf16.csv")},
        "by name": ("fit", "RegularizedKernelClassifier", d / "labels.tsv", "--target", "label", "-o", out / "c.ksm"),
        "by index": ("fit", "RegularizedKernelClassifier", d / "labels.tsv", "--target", "0", "-o", out / "c0.ksm"),
        "semicolon": ("fit", "ExactKernelRidge", d / "semicolon.txt", "--delimiter", ";", "--target", "0", "-o",
                      out / "s.ksm", "-p", "alpha=0.1"),
        "one-hot": ("fit", "ExactKernelRidge", d / "diamonds.csv", "--one-hot", "-o", out / "d.ksm", "-p", "alpha=0.01"),
        "kernel__sigma": ("fit", "ExactKernelRidge", d / "train.csv", "-o", out / "k.ksm", "-p", "kernel__sigma=2"),
        "quiet": ("fit", "SLKLRegressor", d / "train.csv", "-o", out / "q.ksm", "-p", "n_components=64"),
        "verbose": ("fit", "SLKLRegressor", d / "train.csv", "-o", out / "v.ksm", "-p", "n_components=64", "-v"),
        "features": ("predict", d / "model.ksm", d / "features.csv"),
        "features, no header": ("predict", d / "model.ksm", d / "features_noheader.csv"),
        "with the target": ("predict", d / "model.ksm", d / "train.csv"),
        "fit --help": ("fit", "--help"),
    })


@pytest.fixture(scope="module")
def predicted(files, out, fits):
    d = files
    assert all(r.returncode == 0 for r in fits.values()), {n: r.stderr for n, r in fits.items() if r.returncode}
    return run_all({
        "labels": ("predict", out / "c.ksm", d / "labels.tsv"),
        "semicolon": ("predict", out / "s.ksm", d / "semicolon.txt", "--delimiter", ";"),
        "new diamonds": ("predict", out / "d.ksm", d / "diamonds_new.csv"),
        "diamonds": ("predict", out / "d.ksm", d / "diamonds.csv"),
    })


def test_predict_on_features_only(fits):
    """The normal case for new data: no target column, with or without a header; nothing scored."""
    with_header, without, scored = fits["features"], fits["features, no header"], fits["with the target"]
    assert with_header.returncode == without.returncode == scored.returncode == 0
    assert with_header.stderr == without.stderr == ""
    assert len(predictions(with_header)) == 20
    np.testing.assert_array_equal(predictions(with_header), predictions(without))
    assert re.fullmatch(r"test MSE: \S+ \(200 rows\)\n", scored.stderr), scored.stderr  # the target: scored
    np.testing.assert_array_equal(predictions(scored)[:20], predictions(with_header))


def test_a_byte_order_mark_is_not_a_header_and_utf16_is_read(files, out, fits):
    X = np.loadtxt(files / "features.csv", delimiter=",", skiprows=1)
    reference = kernelscale.load(out / "train.csv.ksm").predict(X)
    for name in ("train.csv", "bom.csv", "bom_noheader.csv", "utf16.csv"):
        assert fits[name].returncode == 0, fits[name].stderr
        assert "on 200 samples" in fits[name].stdout, (name, fits[name].stdout)  # no row taken as a header
        np.testing.assert_allclose(kernelscale.load(out / f"{name}.ksm").predict(X), reference, rtol=1e-12)


def test_target_by_name_or_index_and_a_delimiter(fits, predicted):
    assert "on 200 samples" in fits["by name"].stdout and "on 200 samples" in fits["by index"].stdout
    scored = predicted["labels"]
    assert set(scored.stdout.split()) == {"yes", "no"} and len(scored.stdout.split()) == 200
    error = float(re.fullmatch(r"test error: (\S+) % \(200 rows\)\n", scored.stderr).group(1))
    assert error < 10.0
    # a file without a header, ';' between fields, the target first
    semi = predicted["semicolon"]
    assert semi.returncode == 0 and "test MSE" in semi.stderr, semi.stderr
    np.testing.assert_allclose(predictions(semi)[:20], predictions(fits["features"]), rtol=1e-9)


def test_one_hot_encodes_text_columns_and_predict_applies_the_same_encoding(files, fits, predicted):
    assert "5 features after one-hot encoding" in fits["one-hot"].stdout
    new = predicted["new diamonds"]
    lines = new.stderr.splitlines()
    assert lines[0] == ("kernelscale predict: note: column 2 ('cut'): 1 value(s) not seen in fitting "
                        "('Fair') encoded as all zeros."), lines
    assert re.fullmatch(r"test MSE: \S+ \(10 rows\)", lines[1])
    pred = predictions(predicted["diamonds"])
    price = np.loadtxt(files / "diamonds.csv", delimiter=",", skiprows=1, usecols=3)
    assert np.mean((pred - price) ** 2) < 0.05  # the category's step of 2 was learned
    np.testing.assert_allclose(predictions(new)[4:], pred[4:10], rtol=1e-9)  # columns found by name


def test_kernel_parameters_without_naming_the_kernel(out, fits):
    assert fits["kernel__sigma"].returncode == 0
    model = kernelscale.load(out / "k.ksm")
    assert type(model.kernel).__name__ == "GaussianKernel" and model.kernel.sigma == 2


def test_verbose_shows_the_estimators_progress(fits):
    assert fits["quiet"].stderr == ""
    assert "objective=" in fits["verbose"].stderr and "Traceback" not in fits["verbose"].stderr


def test_fit_help_lists_the_estimators(fits):
    out = fits["fit --help"].stdout
    listed = out[out.index("estimators:"):]
    for entry in ESTIMATORS:
        assert (entry.name in listed) == (entry.kind != "transformer"), entry.name


# ----------------------------------------------------------------------------------------------
# every mistake: one line, the argument and the fix, status 2


#: the cases of issue 38, run through the command
COMMAND_CASES = {
    "ragged rows": (["fit", "ExactKernelRidge", "{d}/ragged.csv", "-o", "{t}/m.ksm"],
        r"ragged\.csv, line 3: 2 fields where the header has 3; every row needs the same columns"),
    "text in a numeric column": (["fit", "ExactKernelRidge", "{d}/text_in_numbers.csv", "-o", "{t}/m.ksm"],
        r"text_in_numbers\.csv, line 3: column 1 \('b'\) holds 'abc', not a number"),
    "empty file": (["fit", "ExactKernelRidge", "{d}/empty.csv", "-o", "{t}/m.ksm"],
        r"empty\.csv is empty: it has no rows"),
    "UTF-16 without a byte-order mark": (["fit", "ExactKernelRidge", "{d}/utf16_nobom.csv", "-o", "{t}/m.ksm"],
        r"utf16_nobom\.csv is not UTF-8 text .*save it as UTF-8"),
    "missing file": (["fit", "ExactKernelRidge", "{d}/nope.csv", "-o", "{t}/m.ksm"],
        r"DATA \S*nope\.csv: no such file"),
    "-o into a missing directory": (["fit", "ExactKernelRidge", "{d}/train.csv", "-o", "{t}/no/m.ksm"],
        r"-o \S*no/m\.ksm: the directory \S*no does not exist; create it"),
    "report on a directory": (["report", "{d}"],
        r"MODEL \S+: is a directory"),
    "-p alpha=abc": (["fit", "ExactKernelRidge", "{d}/train.csv", "-o", "{t}/m.ksm", "-p", "alpha=abc"],
        r"-p alpha=abc: The 'alpha' parameter of ExactKernelRidge must be a float .*Got 'abc'"),
    "NaN label when scoring": (["predict", "{d}/model.ksm", "{d}/nan_label.csv"],
        r"nan_label\.csv, line 6: column 4 \('y'\), the target, is empty or NaN"),
    "npz with a split, no --part": (["fit", "ExactKernelRidge", "{d}/split.npz", "-o", "{t}/m.ksm"],
        r"split\.npz holds a train/test split .*: pass --part train or --part test\.$"),
    "unknown estimator": (["fit", "ExactKernelRige", "{d}/train.csv", "-o", "{t}/m.ksm"],
        r"unknown estimator 'ExactKernelRige'; did you mean ExactKernelRidge\?"),
    "no -o": (["fit", "ExactKernelRidge", "{d}/train.csv"],
        r"the following arguments are required: -o/--output \(see kernelscale fit --help\)"),
    "text column without --one-hot": (["fit", "ExactKernelRidge", "{d}/diamonds.csv", "-o", "{t}/m.ksm"],
        r"diamonds\.csv, line 2: column 1 \('cut'\) holds text \('\w+'\); pass --one-hot to encode text columns as 0/1 columns"),
}
#: more mistakes, run through cli.main in this process (the same code, without a Python start-up each)
IN_PROCESS_CASES = {
    "header only": (["fit", "ExactKernelRidge", "{d}/header_only.csv", "-o", "{t}/m.ksm"],
        r"header_only\.csv has a header but no data rows"),
    "missing model": (["predict", "{d}/nope.ksm", "{d}/features.csv"],
        r"MODEL \S*nope\.ksm: no such file"),
    "-o a directory": (["fit", "ExactKernelRidge", "{d}/train.csv", "-o", "{t}"],
        r"-o \S+: is a directory"),
    "predict -o into a missing directory": (["predict", "{d}/model.ksm", "{d}/features.csv", "-o", "{t}/no/p.txt"],
        r"-o \S*no/p\.txt: the directory \S*no does not exist"),
    "report on a data file": (["report", "{d}/train.csv"],
        r"train\.csv is not a valid kernelscale model file"),
    "-p without =": (["fit", "ExactKernelRidge", "{d}/train.csv", "-o", "{t}/m.ksm", "-p", "alpha"],
        r"-p 'alpha': not of the form key=value"),
    "-p unknown key": (["fit", "ExactKernelRidge", "{d}/train.csv", "-o", "{t}/m.ksm", "-p", "alhpa=1"],
        r"-p alhpa=1: ExactKernelRidge has no parameter 'alhpa'; its parameters are alpha,"),
    "-p kernel__sigma=-1": (["fit", "ExactKernelRidge", "{d}/train.csv", "-o", "{t}/m.ksm", "-p", "kernel__sigma=-1"],
        r"-p kernel__sigma=-1: sigma must be .*> 0"),
    "-p kernel=foo": (["fit", "ExactKernelRidge", "{d}/train.csv", "-o", "{t}/m.ksm", "-p", "kernel=foo"],
        r"-p kernel=foo: kernel='foo' is not a kernel"),
    "empty label when scoring": (["predict", "{d}/model.ksm", "{d}/empty_label.csv"],
        r"empty_label\.csv, line 4: column 4 \('y'\), the target, is empty"),
    "NaN label when fitting": (["fit", "ExactKernelRidge", "{d}/nan_label.csv", "-o", "{t}/m.ksm"],
        r"nan_label\.csv, line 6: column 4 \('y'\), the target, is empty or NaN"),
    "text target for a regressor": (["fit", "ExactKernelRidge", "{d}/labels.tsv", "--target", "label", "-o", "{t}/m.ksm"],
        r"the target, holds text \('\w+'\); a regressor needs numbers"),
    "--target not a column": (["fit", "ExactKernelRidge", "{d}/train.csv", "--target", "z", "-o", "{t}/m.ksm"],
        r"--target 'z': \S*train\.csv has no column of that name; its columns are 'a',"),
    "--target out of range": (["fit", "ExactKernelRidge", "{d}/train.csv", "--target", "9", "-o", "{t}/m.ksm"],
        r"--target 9: \S*train\.csv has 5 columns \(indices 0 to 4, or -1 for the last\)"),
    "--target on an npz": (["fit", "ExactKernelRidge", "{d}/split.npz", "--part", "train", "--target", "0", "-o", "{t}/m.ksm"],
        r"--target: only for delimited text files"),
    "--delimiter of two characters": (["fit", "ExactKernelRidge", "{d}/train.csv", "--delimiter", ",,", "-o", "{t}/m.ksm"],
        r"--delimiter ',,': give one character"),
    "wrong number of columns": (["predict", "{d}/model.ksm", "{d}/ragged.csv"],
        r"ragged\.csv, line 3: 2 fields"),
    "columns the model does not read": (["predict", "{d}/model.ksm", "{d}/labels.tsv"],
        r"labels\.tsv has 3 columns, but the model reads 4 feature columns"),
    "--part on a csv": (["fit", "ExactKernelRidge", "{d}/train.csv", "--part", "train", "-o", "{t}/m.ksm"],
        r"--part train: only for \.npz files"),
    "unknown format": (["fit", "ExactKernelRidge", "{d}/model.ksm", "-o", "{t}/m.ksm"],
        r"model\.ksm: cannot tell the format from the extension; use \.csv"),
    "a transformer": (["fit", "RandomFourierFeatures", "{d}/train.csv", "-o", "{t}/m.ksm"],
        r"RandomFourierFeatures is a feature map"),
}


@pytest.fixture(scope="module")
def errors_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("errors")


@pytest.fixture(scope="module")
def command_errors(files, errors_dir):
    return run_all({case: [a.format(d=files, t=errors_dir) for a in args]
                    for case, (args, _) in COMMAND_CASES.items()})


@pytest.mark.parametrize("case", list(COMMAND_CASES))
def test_a_mistake_is_one_line_naming_the_fix(case, command_errors, errors_dir):
    args, pattern = COMMAND_CASES[case]
    assert_error(command_errors[case], pattern, args[0])
    assert not list(errors_dir.iterdir())  # nothing written


@pytest.mark.parametrize("case", list(IN_PROCESS_CASES))
def test_more_mistakes_are_one_line_naming_the_fix(case, files, tmp_path, capsys):
    args, pattern = IN_PROCESS_CASES[case]
    status = cli.main([a.format(d=files, t=tmp_path) for a in args])
    captured = capsys.readouterr()
    assert_error(subprocess.CompletedProcess(args, status, captured.out, captured.err), pattern, args[0])
    assert not list(tmp_path.iterdir())


def test_an_unknown_command_is_one_line():
    assert_error(run("fitt"), r"invalid choice: 'fitt'", None)


def test_debug_shows_the_traceback(files, tmp_path):
    results = run_all({i: (*args, "ExactKernelRidge", files / "ragged.csv", "-o", tmp_path / "m.ksm")
                       for i, args in enumerate((["--debug", "fit"], ["fit", "--debug"]))})
    for result in results.values():
        assert result.returncode == 2
        assert result.stderr.startswith("Traceback (most recent call last):"), result.stderr
        assert result.stderr.splitlines()[-1].startswith("kernelscale fit: error: ")


# ----------------------------------------------------------------------------------------------
# bench and report: what an installed package offers (issue 38, item 5)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A copy of this kernelscale outside any checkout, first on the path: what ``pip install .``
    puts in site-packages."""
    site = tmp_path_factory.mktemp("site")
    shutil.copytree(PACKAGE, site / "kernelscale", ignore=shutil.ignore_patterns("__pycache__"))
    return site


def test_an_installed_package_does_not_offer_bench(installed, tmp_path):
    results = run_all({
        "help": ("--help",), "report help": ("report", "--help"), "bench": ("bench", "slkl", "--quick"),
        "report": ("report",), "named checkout": ("bench", "no-such-suite", "--checkout", CHECKOUT),
        "not a checkout": ("bench", "slkl", "--checkout", tmp_path),
    }, pythonpath=installed, cwd=tmp_path)
    assert "bench" not in results["help"].stdout and "report" in results["help"].stdout
    assert "--checkout" not in results["report help"].stdout
    assert_error(results["bench"], r"not part of the installed package; .*kernelscale bench NAME --checkout PATH",
                 "bench")
    assert_error(results["report"], r"name a model file: kernelscale report MODEL describes a model saved by "
                                    r"kernelscale fit", "report")
    # a checkout named on the command line is still run
    assert_error(results["named checkout"], r"no benchmark suite 'no-such-suite' in \S+ \(known: .*slkl", "bench")
    assert_error(results["not a checkout"], r"--checkout \S+: not a kernelscale source checkout", "bench")
    assert not list(tmp_path.iterdir())


def test_a_checkout_offers_bench_and_its_results_table(tmp_path):
    """Where the command runs from a checkout (an editable install, src/ on the path), bench is
    listed and report alone prints the results table; from an installed package, neither."""
    in_checkout = cli._own_checkout() is not None
    results = run_all({"help": ("--help",), "report": ("report",)}, cwd=tmp_path)
    assert ("bench" in results["help"].stdout) == in_checkout
    if in_checkout:
        assert results["report"].returncode == 0 and "| dataset | method |" in results["report"].stdout
    else:
        assert_error(results["report"], r"name a model file", "report")
