"""Tests of the robustness benchmark (benchmarks/studies/robustness.py): a tiny run's records and
the PASS/FAIL logic of its two goals."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks import harness
from benchmarks.studies import common
from benchmarks.studies import robustness as rob


# ----------------------------------------------------------------------------------------------
# goals on hand-made records


def _rec(dataset, method, role, task, err, fit, failure=None, n_test=100):
    metric = "rmse" if task == "regression" else "test_error"
    return {"dataset": dataset, "method": method, "role": role, "task": task, "failure": failure,
            "metrics": {metric: err, "predict_s": 0.01}, "time_median_s": fit,
            "params": {"n_test": n_test}, "ratio_to_peer": {}, "peer": None}


def _by_method(rows):
    return {r["method"]: r for r in rows}


def test_goals_regression_error_ratio_and_time_factor():
    records = [
        _rec("d", "peer", "peer", "regression", 1.0, 0.5),
        _rec("d", "fast", "ours", "regression", 1.5, 1.0),      # exactly 1.5x: pass
        _rec("d", "worse", "ours", "regression", 1.51, 10.0),   # error fail, time 10x: pass
        _rec("d", "slow", "ours", "regression", 0.9, 10.01),    # time fail
        _rec("d", "broken", "ours", "regression", None, None, failure="fit: LinAlgError: singular"),
    ]
    rows = _by_method(rob.evaluate_goals(records))
    assert set(rows) == {"fast", "worse", "slow", "broken"}  # the peer is no row
    assert (rows["fast"]["error"], rows["fast"]["time"]) == ("PASS", "PASS")
    assert rows["fast"]["error_ratio"] == pytest.approx(1.5)
    assert (rows["worse"]["error"], rows["worse"]["time"]) == ("FAIL", "PASS")
    assert rows["worse"]["time_ratio_to_fastest"] == pytest.approx(10.0)
    assert (rows["slow"]["error"], rows["slow"]["time"]) == ("PASS", "FAIL")
    assert "10.0x the fastest" in rows["slow"]["reasons"]
    assert (rows["broken"]["error"], rows["broken"]["time"]) == ("FAIL", "FAIL")
    assert "LinAlgError" in rows["broken"]["reasons"]
    # the verdicts are stored on the records too
    assert records[2]["goals"]["error"] == "FAIL" and records[3]["goals"]["time"] == "FAIL"


def test_goals_classification_slack_of_one_test_point_and_failed_peer():
    records = [
        _rec("c", "svc", "peer", "classification", 0.0, 0.1, n_test=40),
        _rec("c", "one_mistake", "ours", "classification", 1 / 40, 0.1, n_test=40),   # 1/n_test slack: pass
        _rec("c", "two_mistakes", "ours", "classification", 2 / 40, 0.1, n_test=40),  # fail
        _rec("p", "svc", "peer", "classification", None, None, failure="timeout", n_test=40),
        _rec("p", "alone", "ours", "classification", 0.2, 0.1, n_test=40),
        _rec("q", "svc", "peer", "classification", 0.10, 0.1, n_test=1000),
        _rec("q", "at_bound", "ours", "classification", 0.151, 0.1, n_test=1000),    # 1.5 * 0.1 + 0.001
        _rec("q", "past_bound", "ours", "classification", 0.1515, 0.1, n_test=1000),
    ]
    rows = {(r["dataset"], r["method"]): r for r in rob.evaluate_goals(records)}
    assert rows["c", "one_mistake"]["error"] == "PASS"
    assert rows["c", "two_mistakes"]["error"] == "FAIL"
    assert rows["c", "one_mistake"]["error_ratio"] == float("inf")
    assert rows["p", "alone"]["error"] == "n/a" and rows["p", "alone"]["time"] == "PASS"
    assert rows["q", "at_bound"]["error"] == "PASS"
    assert rows["q", "past_bound"]["error"] == "FAIL"
    text = rob.format_goals(list(rows.values()))
    assert "goal error" in text and "FAIL" in text


def test_score_flags_nonfinite_regression_predictions():
    y = np.array([1.0, 2.0, 3.0])
    assert rob.score("regression", np.array([1.0, np.nan, 3.0]), y) is None
    s = rob.score("regression", y + 1.0, y)
    assert s["rmse"] == pytest.approx(1.0) and s["nrmse"] == pytest.approx(1.0 / np.std(y))
    c = rob.score("classification", np.array([0, 0, 1, 1]), np.array([0, 1, 1, 1]))
    assert c["test_error"] == pytest.approx(0.25) and c["balanced_error"] == pytest.approx((0 + 1 / 3) / 2)


def test_datasets_are_seeded_and_standardised_except_mixed_scales():
    a = common.make_dataset("few features d=2 (regression)", 200)
    b = common.make_dataset("few features d=2 (regression)", 200)
    np.testing.assert_array_equal(a.X_test, b.X_test)
    assert a.X_train.shape == (160, 2)
    np.testing.assert_allclose(a.X_train.mean(axis=0), 0, atol=1e-12)
    mixed = common.make_dataset("mixed scales (classification)", 200)
    spread = mixed.X_train.std(axis=0)
    assert spread.max() / spread.min() > 1e4  # raw, not standardised
    big = common.make_dataset("friedman1 y*1e5", 200)
    assert np.std(big.y_train) > 1e4
    imb = common.make_dataset("imbalanced 95/5", 400)
    assert 0.02 < np.mean(imb.y_test == 1) < 0.1


def test_every_registry_estimator_but_the_polynomial_features_is_fitted():
    from kernelscale.registry import ESTIMATORS

    names = " ".join(rob.estimator_factories())
    for entry in ESTIMATORS:
        if entry.name == "PolynomialRandomFeatures":
            continue
        assert entry.name in names
    est = rob.estimator_factories()["SLKLRegressor"][1]()
    assert est.random_state == 0 and est.kernel.sigma == "median"


# ----------------------------------------------------------------------------------------------
# a tiny run


def test_tiny_run_writes_records_peers_failures_and_goals(tmp_path, monkeypatch):
    factories = rob.estimator_factories()

    class Broken:
        def fit(self, X, y):
            raise FloatingPointError("overflow in exp\nsecond line")

    class NaNs:
        def fit(self, X, y):
            return self

        def predict(self, X):
            return np.full(len(X), np.nan)

    chosen = {k: factories[k] for k in ("ExactKernelRidge", "RegularizedKernelClassifier", "SLKLClassifier")}
    chosen["Broken"] = ("classification", Broken)
    chosen["NaNs"] = ("regression", NaNs)
    monkeypatch.setattr(rob, "estimator_factories", lambda: chosen)
    path = rob.run(quick=True, out_dir=tmp_path, datasets=["iris", "diabetes"],
                   sizes={"iris": 80, "diabetes": 100}, cap_s=30)
    assert path == tmp_path / "robustness-quick.json"
    doc = harness.read_result(path)
    assert doc["suite"] == "robustness" and doc["quick"] is True
    recs = {(r["dataset"], r["method"]): r for r in doc["records"]}
    assert set(recs) == {("iris", "sklearn SVC"), ("iris", "RegularizedKernelClassifier"), ("iris", "SLKLClassifier"),
                         ("iris", "Broken"), ("diabetes", "sklearn KernelRidge"), ("diabetes", "ExactKernelRidge"),
                         ("diabetes", "NaNs")}
    krr, exact = recs["diabetes", "sklearn KernelRidge"], recs["diabetes", "ExactKernelRidge"]
    assert krr["role"] == "peer" and krr["failure"] is None and krr["params"]["n_test"] == 25
    # the same problem (alpha 1, same median bandwidth): the exact solver matches KernelRidge
    assert exact["peer"] == "sklearn KernelRidge"
    assert exact["ratio_to_peer"]["rmse"] == pytest.approx(1.0, rel=1e-3)
    assert exact["goals"]["error"] == "PASS"
    assert exact["params"]["median_sigma"] == pytest.approx(krr["params"]["sigma"])
    assert exact["time_median_s"] > 0 and exact["metrics"]["predict_s"] > 0
    rkc = recs["iris", "RegularizedKernelClassifier"]
    assert 0 <= rkc["metrics"]["test_error"] <= 0.5 and rkc["params"]["n_test"] == 20
    broken = recs["iris", "Broken"]
    assert broken["failure"] == "fit: FloatingPointError: overflow in exp"
    assert broken["goals"] == {"error": "FAIL", "time": "FAIL", "error_ratio": None, "time_ratio_to_fastest": None}
    nans = recs["diabetes", "NaNs"]
    assert nans["failure"] == "non-finite predictions (NaN or inf)" and nans["goals"]["error"] == "FAIL"
    fails = doc["paper"]["goals"]["error_fail"]
    assert "iris / Broken" in fails and "diabetes / NaNs" in fails and "diabetes / ExactKernelRidge" not in fails
    json.dumps(doc, allow_nan=False)


def test_time_cap_marks_a_timeout(tmp_path, monkeypatch):
    import time

    class Sleeper:
        def fit(self, X, y):
            time.sleep(30)

    factories = rob.estimator_factories()
    chosen = {"ExactKernelRidge": factories["ExactKernelRidge"], "Sleeper": ("regression", Sleeper)}
    monkeypatch.setattr(rob, "estimator_factories", lambda: chosen)
    monkeypatch.setattr(rob, "warm_up", lambda f: None)
    path = rob.run(quick=True, out_dir=tmp_path, datasets=["diabetes"], sizes={"diabetes": 80}, cap_s=1.5)
    recs = {r["method"]: r for r in harness.read_result(path)["records"]}
    assert recs["Sleeper"]["failure"].startswith("timeout")
    assert recs["Sleeper"]["goals"]["time"] == "FAIL"
    assert recs["ExactKernelRidge"]["goals"]["time"] == "PASS"
