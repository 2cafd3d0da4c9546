"""The kernelscale command: demo results are sensible, fit/predict round-trip through files."""

import sys
from pathlib import Path

import numpy as np
import pytest

from kernelscale import cli
from kernelscale.data.datasets import make_sinc
from kernelscale.exact import ExactKernelRidge
from kernelscale.kernels import GaussianKernel


def test_demo_runs_every_entry_with_sensible_results(capsys, monkeypatch):
    rows = cli.run_demo()
    monkeypatch.setattr(cli, "run_demo", lambda: rows)  # print the same rows without refitting
    assert cli.main(["demo"]) == 0
    out = capsys.readouterr().out
    assert len(rows) == len(cli._demo_entries())
    for name, dataset, metric, value, fit_s, predict_s in rows:
        assert name in out
        assert fit_s >= 0 and predict_s >= 0
        if dataset == "sinc":  # noise power ~0.02 at 10 dB; a fitted model is far below it
            assert value < 5e-3, (name, value)
        else:  # chance is 90 %; plain SGD (doubly stochastic hinge) needs more iterations than a demo gives
            assert value < 8.0, (name, value)


def write_csv(path, X, y):
    np.savetxt(path, np.column_stack([X, y]), delimiter=",", header="x1,x2,y", comments="")


def test_fit_then_predict_round_trip(tmp_path, capsys):
    X_train, y_train, X_test, y_test = make_sinc(n_train=200, n_test=50, random_state=0)
    write_csv(tmp_path / "train.csv", X_train, y_train)
    write_csv(tmp_path / "test.csv", X_test, y_test)
    model_path = tmp_path / "model.ksm"
    assert cli.main(["fit", "ExactKernelRidge", str(tmp_path / "train.csv"), "-o", str(model_path),
                     "-p", "alpha=0.1", "-p", "kernel=gaussian", "-p", "kernel__sigma=1.0"]) == 0
    assert cli.main(["predict", str(model_path), str(tmp_path / "test.csv"), "-o", str(tmp_path / "pred.txt")]) == 0
    err = capsys.readouterr().err
    assert "test MSE" in err
    expected = ExactKernelRidge(kernel=GaussianKernel(sigma=1.0), alpha=0.1).fit(X_train, y_train).predict(X_test)
    np.testing.assert_allclose(np.loadtxt(tmp_path / "pred.txt"), expected, rtol=1e-12)


def test_build_estimator_sets_nested_kernel_parameters():
    est = cli.build_estimator("ExactKernelRidge", ["alpha=0.5", "kernel=laplacian", "kernel__sigma=3"])
    assert est.alpha == 0.5 and type(est.kernel).__name__ == "LaplacianKernel" and est.kernel.sigma == 3


@pytest.mark.parametrize(
    "argv, message",
    [(["fit", "NoSuchModel", "x.csv", "-o", "m"], "unknown estimator"),
     (["bench", "no-such-suite", "--checkout", str(Path(__file__).resolve().parents[1])],
      "no benchmark suite")],
)
def test_clear_errors(argv, message, tmp_path, capsys):
    if argv[0] == "fit":
        write_csv(tmp_path / "x.csv", np.ones((3, 2)), np.ones(3))
        argv[2] = str(tmp_path / "x.csv")
    assert cli.main(argv) == 2
    assert_one_line(capsys.readouterr().err, message)


def assert_one_line(err, pattern):
    """A command's error: one line on stderr, ``kernelscale COMMAND: error: ...`` matching ``pattern``."""
    import re

    assert len(err.splitlines()) == 1 and re.match(r"kernelscale \w+: error: ", err), err
    assert re.search(pattern, err), err


def test_bad_parameter_syntax():
    with pytest.raises(SystemExit, match="key=value"):
        cli.build_estimator("ExactKernelRidge", ["alpha"])


def test_report_describes_a_saved_model(tmp_path, capsys):
    from kernelscale.persistence import save

    X, y, _, _ = make_sinc(n_train=30, n_test=1, random_state=1)
    save(ExactKernelRidge(kernel="rbf").fit(X, y), tmp_path / "m.ksm")
    assert cli.main(["report", str(tmp_path / "m.ksm")]) == 0
    assert "ExactKernelRidge" in capsys.readouterr().out


# ----------------------------------------------------------------------------------------------
# bench and report never run code from the working directory (issue 19, item 4)

CHECKOUT = Path(__file__).resolve().parents[1]


@pytest.fixture
def benchmarks_modules():
    """Restores the package ``benchmarks`` (and its modules) that the tests imported, after a test
    whose command imported another checkout's, or none."""
    saved = {n: m for n, m in sys.modules.items() if n == "benchmarks" or n.startswith("benchmarks.")}
    yield
    for name in [n for n in sys.modules if n == "benchmarks" or n.startswith("benchmarks.")]:
        del sys.modules[name]
    sys.modules.update(saved)


@pytest.fixture
def planted(tmp_path, monkeypatch, benchmarks_modules):
    """A working directory whose package benchmarks/ would create ``marker`` if any of it were
    run, first on ``sys.path`` and not yet imported."""
    bench = tmp_path / "cwd" / "benchmarks"
    marker = tmp_path / "marker"
    payload = f"open({str(marker)!r}, 'w').close()\nSUITE = 'evil'\ndef run(quick=False): return 'ran'\n" \
              f"def main(argv=None): return 0\n"
    for name in ("__init__", "harness", "papers/__init__", "papers/evil", "perf/__init__", "perf/blocks",
                 "tools/__init__", "tools/report"):
        (bench / f"{name}.py").parent.mkdir(parents=True, exist_ok=True)
        (bench / f"{name}.py").write_text(payload)
    monkeypatch.chdir(tmp_path / "cwd")
    monkeypatch.setattr(sys, "path", [str(tmp_path / "cwd"), *sys.path])
    for name in [n for n in sys.modules if n == "benchmarks" or n.startswith("benchmarks.")]:
        del sys.modules[name]
    return marker


@pytest.mark.parametrize("argv", [["report"], ["bench", "evil"], ["bench", "blocks", "--quick"]])
def test_an_installed_command_refuses_to_run_benchmarks_without_a_checkout(argv, planted, monkeypatch, capsys):
    monkeypatch.setattr(cli, "_own_checkout", lambda: None, raising=False)  # an installed package
    assert cli.main(argv) == 2
    assert_one_line(capsys.readouterr().err, "--checkout")
    assert not planted.exists()


def test_bench_from_a_checkout_ignores_the_working_directory(planted, capsys):
    assert cli.main(["bench", "evil"]) == 2  # no suite "evil" in this checkout, or no checkout at all
    assert_one_line(capsys.readouterr().err, "no benchmark suite 'evil'|--checkout")
    assert not planted.exists()
    if cli._own_checkout() is not None:  # a development install: its own results table
        assert cli.main(["report"]) == 0
        assert "| dataset | method |" in capsys.readouterr().out
        assert not planted.exists()
        assert Path(sys.modules["benchmarks"].__file__).resolve().parent == CHECKOUT / "benchmarks"


def fake_checkout(root, name='"kernelscale"'):
    """A checkout with this checkout's harness and one suite, perf/fake_suite.py."""
    (root / "src" / "kernelscale").mkdir(parents=True)
    (root / "src" / "kernelscale" / "__init__.py").write_text("")
    (root / "benchmarks" / "perf").mkdir(parents=True)
    (root / "benchmarks" / "__init__.py").write_text("")
    (root / "benchmarks" / "harness.py").write_text((CHECKOUT / "benchmarks" / "harness.py").read_text())
    (root / "benchmarks" / "perf" / "__init__.py").write_text("")
    (root / "benchmarks" / "perf" / "fake_suite.py").write_text(
        '"""A fake suite."""\nSUITE = "fake-suite"\n'
        "def run(quick=False, out_dir=None):\n    return f'fake-result quick={quick}'\n")
    (root / "pyproject.toml").write_text(f"[project]\nname = {name}\n")
    return root


def test_bench_runs_the_checkout_named_on_the_command_line(tmp_path, capsys, monkeypatch, benchmarks_modules):
    monkeypatch.setattr(sys, "path", sys.path[:])
    root = fake_checkout(tmp_path / "repo")
    assert cli.main(["bench", "fake-suite", "--quick", "--checkout", str(root)]) == 0
    assert "fake-result quick=True" in capsys.readouterr().out
    assert Path(sys.modules["benchmarks"].__file__).resolve().parent == (root / "benchmarks").resolve()
    other = fake_checkout(tmp_path / "other", name='"not-kernelscale"')
    for argv, message in ((["fake-suite", "--checkout", str(other)], "not a kernelscale source checkout"),
                          (["../fake_suite", "--checkout", str(root)], "no benchmark suite"),
                          (["nope", "--checkout", str(root)], "no benchmark suite 'nope'.*fake_suite")):
        assert cli.main(["bench", *argv]) == 2
        assert_one_line(capsys.readouterr().err, message)


def test_the_checkout_of_a_development_install_is_found():
    src = Path(cli.__file__).resolve().parents[1]
    expected = src.parent if src.name == "src" else None  # None: installed in site-packages
    assert cli._own_checkout() == expected
    assert cli.is_checkout(CHECKOUT) and not cli.is_checkout(CHECKOUT / "benchmarks")
