"""The kernelscale command: demo results are sensible, fit/predict round-trip through files."""

import numpy as np
import pytest

from kernelscale import cli
from kernelscale.datasets import make_sinc
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
     (["bench", "no-such-suite"], "no benchmark suite")],
)
def test_clear_errors(argv, message, tmp_path):
    if argv[0] == "fit":
        write_csv(tmp_path / "x.csv", np.ones((3, 2)), np.ones(3))
        argv[2] = str(tmp_path / "x.csv")
    with pytest.raises(SystemExit, match=message):
        cli.main(argv)


def test_bad_parameter_syntax():
    with pytest.raises(SystemExit, match="key=value"):
        cli.build_estimator("ExactKernelRidge", ["alpha"])


def test_report_describes_a_saved_model(tmp_path, capsys):
    from kernelscale.persistence import save

    X, y, _, _ = make_sinc(n_train=30, n_test=1, random_state=1)
    save(ExactKernelRidge(kernel="rbf").fit(X, y), tmp_path / "m.ksm")
    assert cli.main(["report", str(tmp_path / "m.ksm")]) == 0
    assert "ExactKernelRidge" in capsys.readouterr().out
