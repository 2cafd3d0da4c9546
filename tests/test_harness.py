"""Tests of the benchmark harness (benchmarks/harness.py, tools/report.py, peers.py,
perf/blocks.py) and of ``python -m benchmarks``."""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import math
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits
from sklearn.preprocessing import StandardScaler

from benchmarks import harness, peers
from benchmarks.tools import report

MB = 10**6


# ----------------------------------------------------------------------------------------------
# medians, ratios, timing


def test_median_and_ratio():
    assert harness.median([3.0, 1.0, 2.0]) == 2.0
    assert harness.median([4.0, 1.0, 3.0, 2.0]) == 2.5
    with pytest.raises(ValueError, match="empty"):
        harness.median([])
    assert harness.ratio(3.0, 2.0) == 1.5
    assert harness.ratio(np.float32(1.0), 4) == 0.25
    for ours, peer in ((1.0, 0.0), (None, 1.0), (1.0, None), (float("nan"), 1.0), (1.0, float("inf"))):
        assert harness.ratio(ours, peer) is None
    assert harness.gemm_flops(3, 5, 7) == 2 * 3 * 5 * 7
    assert harness.gemm_flops(3, 5, 7, k=2) == 2 * 3 * 5 * 7 + 2 * 3 * 5 * 2


def test_measure_excludes_warmup_and_takes_the_median():
    # the two warmup calls sleep longest: if they were timed the median would be >= 0.06 s
    durations = iter([0.12, 0.12, 0.005, 0.06, 0.02])
    calls = []

    def fn():
        calls.append(1)
        time.sleep(next(durations))
        return len(calls)

    m = harness.measure(fn, repeats=3, warmup=2, memory=False)
    assert len(calls) == 5 and len(m.times) == 3
    assert m.median == statistics.median(m.times)
    assert 0.02 <= m.median < 0.05
    assert m.result == 5 and m.peak_memory_bytes is None
    assert m.record_fields() == {"time_median_s": m.median, "times_s": m.times, "peak_memory_bytes": None}
    with pytest.raises(ValueError, match="repeats"):
        harness.measure(fn, repeats=0)
    with pytest.raises(ValueError, match="warmup"):
        harness.measure(fn, warmup=-1)


def test_measure_many_interleaves_rotating_rounds():
    order = []
    fns = {name: (lambda name=name: order.append(name)) for name in "abc"}
    ms = harness.measure_many(fns, repeats=3, warmup=1, memory=False)
    assert "".join(order) == "abc" + "bca" + "cab" + "abc"
    assert list(ms) == list("abc") and all(len(m.times) == 3 for m in ms.values())


# ----------------------------------------------------------------------------------------------
# peak memory

ALLOC = 200 * MB
needs_procfs = pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="needs Linux /proc")


def _touched(nbytes):
    return np.full(nbytes // 8, 1.0)  # full() writes every page, so they are resident


def test_peak_memory_detects_a_kept_200MB_array():
    m = harness.measure(lambda: _touched(ALLOC), repeats=1, warmup=0)
    assert m.result.nbytes == ALLOC
    assert 0.95 * ALLOC <= m.peak_memory_bytes <= ALLOC + 40 * MB


def test_peak_memory_detects_a_transient_200MB_array():
    def fn():
        a = _touched(ALLOC)
        del a

    m = harness.measure(fn, repeats=2, warmup=0, keep_result=False)
    assert 0.95 * ALLOC <= m.peak_memory_bytes <= ALLOC + 40 * MB


def test_peak_memory_is_small_for_a_call_that_allocates_nothing():
    big = _touched(ALLOC)  # memory held before the call does not count
    m = harness.measure(lambda: float(big[0]), repeats=2, warmup=0)
    assert m.peak_memory_bytes < 20 * MB


@needs_procfs
def test_sampler_thread_alone_sees_a_transient_allocation():
    with harness.PeakMemory(interval=0.002, use_hwm=False) as pm:
        a = _touched(ALLOC)
        time.sleep(0.05)
        del a
    assert pm.method == "statm-sampler"
    assert 0.9 * ALLOC <= pm.peak_bytes <= ALLOC + 40 * MB


# ----------------------------------------------------------------------------------------------
# records and the JSON schema


def _example_suite(out_dir):
    suite = harness.Suite("unit", quick=True, out_dir=out_dir, paper={"table": 2, "test_error": {"ours": 0.1}})
    peer = suite.add("toy", "the peer", role="peer", metrics={"test_error": 0.2},
                     time_median_s=2.0, times_s=[2.0, 1.0, 3.0], peak_memory_bytes=400)
    fake = harness.Measurement(times=[0.5, 1.5, 1.0], median=1.0, peak_memory_bytes=100)
    ours = suite.add("toy", "ours", params={"n": np.int64(7), "sigma": np.float32(0.5)},
                     metrics={"test_error": np.float64(0.1), "bad": float("nan")}, measurement=fake)
    suite.compare(ours, peer)
    suite.add("toy", "published", role="paper", metrics={"test_error": 0.12})
    return suite


def test_compare_computes_ours_over_peer():
    suite = _example_suite(None)
    ours = suite.records[1]
    assert ours["peer"] == "the peer"
    assert ours["ratio_to_peer"] == {"test_error": 0.5, "time_median_s": 0.5, "peak_memory_bytes": 0.25}
    assert ours["times_s"] == [0.5, 1.5, 1.0] and ours["time_median_s"] == 1.0


def test_result_json_round_trip(tmp_path):
    suite = _example_suite(tmp_path)
    path = suite.write(plot=False)
    assert path == tmp_path / "unit-quick.json"  # a quick run never overwrites a full one
    doc = harness.read_result(path)
    raw = json.loads(path.read_text())  # plain JSON: no NaN tokens, numpy values converted
    assert raw == doc
    assert set(harness.TOP_LEVEL_KEYS) <= set(doc)
    assert doc["schema_version"] == 1 and doc["suite"] == "unit" and doc["quick"] is True
    created = dt.datetime.fromisoformat(doc["created"])
    assert created.utcoffset() == dt.timedelta(0)
    for key in ("cpu_model", "n_cores", "memory_bytes", "numpy", "scipy", "sklearn", "blas"):
        assert key in doc["machine"]
    assert doc["machine"]["numpy"] == np.__version__
    assert doc["paper"] == {"table": 2, "test_error": {"ours": 0.1}}
    assert [r["role"] for r in doc["records"]] == ["peer", "ours", "paper"]
    for rec in doc["records"]:
        assert set(harness.RECORD_KEYS) <= set(rec)
    ours = doc["records"][1]
    assert ours["params"] == {"n": 7, "sigma": 0.5}
    assert ours["metrics"] == {"test_error": 0.1, "bad": None}
    assert ours["ratio_to_peer"]["time_median_s"] == 0.5


def test_validate_result_names_what_is_wrong(tmp_path):
    doc = json.loads(_example_suite(tmp_path).write(plot=False).read_text())
    bad = json.loads(json.dumps(doc))
    del bad["records"][0]["peer"]
    with pytest.raises(ValueError, match="peer"):
        harness.validate_result(bad)
    bad = json.loads(json.dumps(doc))
    bad["records"][2]["role"] = "theirs"
    with pytest.raises(ValueError, match="role"):
        harness.validate_result(bad)
    bad = json.loads(json.dumps(doc))
    del bad["machine"]
    with pytest.raises(ValueError, match="machine"):
        harness.validate_result(bad)
    with pytest.raises(ValueError, match="role"):
        harness.make_record("d", "m", role="mine")


def test_table_lists_records_and_ratios():
    text = harness.format_table(_example_suite(None).records)
    lines = text.splitlines()
    assert len(lines) == 2 + 3
    assert "the peer" in lines[2] and "test_error=0.2" in lines[2]
    assert "time_median_s x0.5" in lines[3] and "(the peer)" in lines[3]


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="matplotlib (plot extra) absent")
def test_plot_written_as_png(tmp_path):
    path = harness.plot_error_vs_time(_example_suite(None).records, tmp_path / "p.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_skipped_without_matplotlib(tmp_path, monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails
    with caplog.at_level("INFO", logger="kernelscale.benchmarks"):
        assert harness.plot_error_vs_time(_example_suite(None).records, tmp_path / "p.png") is None
    assert not (tmp_path / "p.png").exists()
    assert "matplotlib" in caplog.text


# ----------------------------------------------------------------------------------------------
# suites


def test_scripts_are_found_by_their_short_names():
    found = {s.name: s for s in harness.scripts()}
    assert {"slkl", "dsg_stream", "robustness", "blocks", "refactor_check", "report", "gpu_run"} <= set(found)
    assert "common" not in found and "harness" not in found  # shared modules, not scripts
    assert [s.folder for s in harness.scripts()] == sorted(
        (s.folder for s in harness.scripts()), key=harness.FOLDERS.index)
    slkl = found["slkl"]
    assert (slkl.folder, slkl.module, slkl.suite) == ("papers", "benchmarks.papers.slkl", "slkl")
    assert slkl.summary.startswith("SLKL (paper 1)")
    assert found["fused"].suite == "fused-matvec" and found["report"].suite is None
    assert found["gpu_run"].module is None and found["gpu_run"].path.suffix == ".sh"
    for name in ("dsg-stream", "dsg_stream", "DSG-Stream", "papers.dsg_stream", "papers/dsg_stream.py",
                 "benchmarks.papers.dsg_stream", "bench_dsg_stream"):
        assert harness.find_script(name) == found["dsg_stream"], name
    assert harness.find_script("fused-matvec") == found["fused"]
    with pytest.raises(ValueError, match="refactor_check"):  # the message lists the known names
        harness.find_script("nope")
    with pytest.raises(ValueError, match="no benchmark suite 'refactor_check'"):
        harness.find_script("refactor_check", suites_only=True)
    with pytest.raises(ValueError, match="no benchmark script"):
        harness.find_script("tools.slkl")  # slkl is in papers/
    suites = harness.list_suites()
    assert {"blocks", "fixed_point", "dsg_stream", "robustness"} <= set(suites) and "report" not in suites
    assert harness.load_suite("fixed-point").SUITE == "fixed-point"


def test_every_script_imports_as_a_module_with_a_main():
    for script in harness.scripts():
        if script.module is None:
            continue
        module = importlib.import_module(script.module)
        assert callable(module.main), script.name
        if script.suite:
            assert module.SUITE == script.suite and callable(module.run), script.name


def test_results_stay_in_benchmarks_results():
    assert harness.BENCH_DIR == Path(harness.__file__).resolve().parent
    assert harness.RESULTS_DIR == harness.BENCH_DIR / "results" and harness.RESULTS_DIR.is_dir()
    assert report.RESULTS_DIR == harness.RESULTS_DIR and report.README == harness.ROOT / "README.md"
    assert report.RESULTS_MD == harness.BENCH_DIR / "RESULTS.md"
    assert harness.Suite("unit").out_dir == harness.RESULTS_DIR


def test_python_dash_m_benchmarks_lists_and_runs_scripts(capsys):
    from benchmarks.__main__ import main

    assert main(["--list"]) == 0
    out = capsys.readouterr().out
    assert out.index("papers/") < out.index("studies/") < out.index("perf/") < out.index("tools/")
    assert "slkl" in out and "[fused-matvec]" in out and "refactor_check" in out
    assert main(["no-such-script"]) == 2
    assert "no benchmark script 'no-such-script'" in capsys.readouterr().err
    assert main(["report", "--print"]) == 0
    assert "| dataset | method |" in capsys.readouterr().out


def test_listing_imports_no_script():
    code = ("import sys; from benchmarks.__main__ import listing; listing(); "
            "print(sorted(m for m in sys.modules if m.startswith(('kernelscale', 'numpy', 'benchmarks.'))))")
    done = subprocess.run([sys.executable, "-c", code], cwd=harness.ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "['benchmarks.__main__', 'benchmarks.harness']"


def test_bench_blocks_ratio_is_against_the_faster_gemm(tmp_path, capsys):
    module = harness.load_suite("blocks")
    assert module.SUITE == "blocks"
    doc = harness.read_result(module.run(out_dir=tmp_path, n=300, n_context=100, repeats=1))
    assert "(target 70%)" in capsys.readouterr().out
    by_dataset = {}
    for rec in doc["records"]:
        by_dataset.setdefault(rec["dataset"], []).append(rec)
    assert set(by_dataset) == {"normal 300x784 float32", "normal 300x784 float64", "normal 100x784 float64"}
    for dataset, recs in by_dataset.items():
        peers_ = [r for r in recs if r["role"] == "peer"]
        best = max(peers_, key=lambda r: r["metrics"]["gflops"])
        for rec in peers_:
            n, d = rec["params"]["n"], rec["params"]["d"]
            assert math.isclose(rec["metrics"]["gflops"], 2 * n * n * d / rec["time_median_s"] / 1e9)
        for rec in (r for r in recs if r["role"] == "ours"):
            n, d, k = rec["params"]["n"], rec["params"]["d"], rec["params"]["k"]
            assert math.isclose(rec["metrics"]["gflops"], (2 * n * n * d + 2 * n * n * k) / rec["time_median_s"] / 1e9)
            assert rec["peer"] == best["method"]
            assert math.isclose(rec["ratio_to_peer"]["gflops"], rec["metrics"]["gflops"] / best["metrics"]["gflops"])


# ----------------------------------------------------------------------------------------------
# README report


def test_report_replaces_only_the_text_between_markers(tmp_path, capsys):
    results = tmp_path / "results"
    _example_suite(results).write(plot=False)
    readme, results_md = tmp_path / "README.md", tmp_path / "RESULTS.md"
    before, after = "# title\n\nintro text\n", "\n## after\nkeep | this\n"
    readme.write_text(f"{before}{report.BEGIN}\nold table\n{report.END}{after}")
    args = ["--readme", str(readme), "--results", str(results), "--results-md", str(results_md)]

    assert report.main(args) == 0
    text = readme.read_text()
    assert text.startswith(before + report.BEGIN + "\n") and text.endswith(report.END + after)
    inner = text[text.index(report.BEGIN) + len(report.BEGIN): text.index(report.END)]
    assert "old table" not in inner and "| data (train/test) | method |" in inner
    # the full tables went to RESULTS.md
    full = results_md.read_text()
    assert full.startswith(report.GENERATED) and "## Headline" in full
    rows = [line for line in full.splitlines() if line.startswith("| toy")]
    assert len(rows) == 1  # the "ours" record only; peer and paper records are not rows
    assert "| ours |" in rows[0] and "test_error 0.1" in rows[0] and "time 0.50x" in rows[0]
    assert "vs the peer" in rows[0] and "unit-quick.json" in rows[0]

    assert report.main(["--check", *args]) == 0
    results_md.write_text(full.replace("test_error 0.1", "test_error 0.01"))
    assert report.main(["--check", *args]) == 1
    assert report.main(args) == 0
    assert results_md.read_text() == full and readme.read_text() == text  # idempotent
    readme.write_text(text.replace(report.END, "stale row\n" + report.END))
    assert report.main(["--check", *args]) == 1


def test_report_headline_rows_come_from_the_committed_results():
    docs = dict(report.load_results())
    rows, missing = report.headline_rows(docs)
    assert not missing and 8 <= len(rows) <= 18
    assert any("AutoKernelClassifier" in r for r in rows) and any("LIBSVM" in r for r in rows)
    # Falkon's rows, each dataset's beside the front door's record of the same run (issue #38)
    for data in ("MNIST", "adult"):
        same_run = [r for r in rows if r.startswith(f"| {data}") and "falkon-peer.json" in r]
        assert any("Falkon (M=" in r for r in same_run) and any("same run as Falkon" in r for r in same_run)
    assert all("cores" in r for r in rows)  # the machine is named on every row


def test_report_prefers_a_full_run_to_a_quick_one(tmp_path):
    _example_suite(tmp_path).write(plot=False)
    assert [name for name, _ in report.load_results(tmp_path)] == ["unit-quick.json"]
    full = _example_suite(tmp_path)
    full.quick = False
    full.write(plot=False)
    assert [name for name, _ in report.load_results(tmp_path)] == ["unit.json"]


def test_report_without_markers_prints_and_fails(tmp_path, capsys):
    results = tmp_path / "results"
    _example_suite(results).write(plot=False)
    readme = tmp_path / "README.md"
    readme.write_text("# no markers\n")
    assert report.main(["--readme", str(readme), "--results", str(results),
                        "--results-md", str(tmp_path / "RESULTS.md")]) == 1
    out, err = capsys.readouterr()
    assert "| data (train/test) |" in out and "markers" in err
    assert readme.read_text() == "# no markers\n"


# ----------------------------------------------------------------------------------------------
# peers: scikit-learn wrappers against direct scikit-learn calls


@pytest.fixture(scope="module")
def binary():
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X[::3])
    labels = np.where(y[::3] == 1, "benign", "malignant")
    return X[:120], labels[:120], X[120:], labels[120:]


@pytest.fixture(scope="module")
def multiclass():
    X, y = load_digits(return_X_y=True)
    X = X[:300] / 16.0
    labels = np.array([30, 10, 20])[y[:300] % 3]  # first seen: 30, 10, 20 (not sorted)
    return X, labels


@pytest.fixture(scope="module")
def regression():
    X, y = load_diabetes(return_X_y=True)
    return StandardScaler().fit_transform(X[:200]), y[:200]


def test_gamma_from_sigma_is_our_gaussian_kernel():
    from sklearn.metrics.pairwise import rbf_kernel

    from kernelscale.kernels import GaussianKernel

    rng = np.random.default_rng(0)
    X, Z = rng.normal(size=(4, 3)), rng.normal(size=(5, 3))
    naive = np.array([[math.exp(-np.sum((x - z) ** 2) / (2 * 1.7**2)) for z in Z] for x in X])
    np.testing.assert_allclose(rbf_kernel(X, Z, gamma=peers.gamma_from_sigma(1.7)), naive, rtol=1e-12)
    np.testing.assert_allclose(GaussianKernel(sigma=1.7)(X, Z), naive, rtol=1e-10)
    assert peers.C_from_lambda(0.01, 50) == pytest.approx(2.0)
    assert peers.alpha_from_lambda(0.01, 50) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="sigma"):
        peers.SklearnSVM(sigma=1.0, gamma=0.5).fit(X, [0, 1, 0, 1])
    with pytest.raises(ValueError, match="sigma"):
        peers.gamma_from_sigma(0.0)


def _sk_cases(sigma):
    from sklearn.kernel_approximation import Nystroem, RBFSampler
    from sklearn.kernel_ridge import KernelRidge
    from sklearn.linear_model import LogisticRegression, RidgeClassifier, SGDClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.svm import SVC, LinearSVC

    g = 1.0 / (2 * sigma**2)
    sgd = dict(loss="hinge", penalty="l2", alpha=1e-3, learning_rate="optimal", max_iter=3, tol=None, random_state=0)
    return [
        (peers.SklearnSVM(sigma=sigma, C=2.0), SVC(gamma=g, C=2.0)),
        (peers.SklearnSVM(kernel="poly", gamma=0.05, coef0=1.0, degree=2, C=0.5),
         SVC(kernel="poly", gamma=0.05, coef0=1.0, degree=2, C=0.5)),
        (peers.SklearnLinearSVC(C=0.3), LinearSVC(C=0.3)),
        (peers.SklearnLogisticRegression(C=0.3), LogisticRegression(C=0.3, max_iter=1000)),
        (peers.RPegasos(sigma=sigma, n_components=40, alpha=1e-3, epochs=3),
         make_pipeline(RBFSampler(gamma=g, n_components=40, random_state=0), SGDClassifier(**sgd))),
        (peers.NPegasos(sigma=sigma, n_components=40, alpha=1e-3, epochs=3),
         make_pipeline(Nystroem(gamma=g, n_components=40, random_state=0), SGDClassifier(**sgd))),
        (peers.SklearnNystroemRidge(sigma=sigma, n_components=40, alpha=0.1),
         make_pipeline(Nystroem(gamma=g, n_components=40, random_state=0), RidgeClassifier(alpha=0.1))),
        (peers.SklearnKernelRidge(sigma=sigma, alpha=0.1), KernelRidge(kernel="rbf", gamma=g, alpha=0.1)),
    ]


def test_sklearn_peers_match_direct_sklearn(binary):
    Xtr, ytr, Xte, yte = binary
    for peer, ref in _sk_cases(sigma=4.0):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            peer.fit(Xtr, ytr)
            if type(ref).__name__ == "KernelRidge":  # the LS-SVM encoding: +-1 targets, class 1 = +1
                ref.fit(Xtr, np.where(ytr == "malignant", 1.0, -1.0))
                ref_dec = ref.predict(Xte)
                ref_pred = np.where(ref_dec > 0, "malignant", "benign")
            else:
                ref.fit(Xtr, ytr)
                ref_dec, ref_pred = ref.decision_function(Xte), ref.predict(Xte)
        np.testing.assert_allclose(peer.decision_function(Xte), ref_dec, rtol=1e-7, atol=1e-9, err_msg=peer.name)
        np.testing.assert_array_equal(peer.predict(Xte), ref_pred, err_msg=peer.name)
        assert peer.evaluate(Xte, yte) == {"test_error": float(np.mean(ref_pred != yte))}


def test_sklearn_peers_regression_match(regression):
    from sklearn.kernel_ridge import KernelRidge
    from sklearn.svm import SVR

    X, y = regression
    for peer, ref in (
        (peers.SklearnSVM(task="regression", sigma=3.0, C=50.0, epsilon=5.0), SVR(gamma=1 / 18, C=50.0, epsilon=5.0)),
        (peers.SklearnKernelRidge(task="regression", sigma=3.0, alpha=1.0), KernelRidge(kernel="rbf", gamma=1 / 18, alpha=1.0)),
    ):
        pred = peer.fit(X, y).predict(X)
        np.testing.assert_allclose(pred, ref.fit(X, y).predict(X), rtol=1e-8, err_msg=peer.name)
        assert peer.evaluate(X, y)["mse"] == pytest.approx(np.mean((pred - y) ** 2))


def test_prepared_data_and_registry(binary):
    Xtr, ytr, Xte, _ = binary
    peer = peers.make_peer("sklearn-svm", sigma=4.0)
    prepared = peer.prepare(Xtr, ytr)
    np.testing.assert_array_equal(prepared.classes, ["benign", "malignant"])
    a = peer.fit(prepared).predict(peer.prepare(Xte))
    np.testing.assert_array_equal(a, peers.SklearnSVM(sigma=4.0).fit(Xtr, ytr).predict(Xte))
    with pytest.raises(ValueError, match="unknown peer"):
        peers.make_peer("svmlight")
    with pytest.raises(ValueError, match="task"):
        peers.SklearnLogisticRegression(task="regression")
    with pytest.raises(ValueError, match="single class"):
        peers.SklearnSVM().fit(Xtr, np.zeros(len(Xtr)))
    assert {"sklearn-svm", "r-pegasos", "n-pegasos"} <= set(peers.available_peers())


# ----------------------------------------------------------------------------------------------
# peers: LIBSVM, LIBLINEAR, Vowpal Wabbit (optional `bench` extra)


@pytest.mark.parametrize("first", ["benign", "malignant"])
def test_libsvm_matches_sklearn_svc(binary, first):
    pytest.importorskip("libsvm.svmutil")
    from sklearn.svm import SVC

    Xtr, ytr, Xte, _ = binary
    order = np.argsort(ytr != first, kind="stable")  # LIBSVM orders labels by first appearance
    Xtr, ytr = Xtr[order], ytr[order]
    peer = peers.LibSVM(sigma=4.0, C=2.0, tol=1e-6).fit(Xtr, ytr)
    ref = SVC(gamma=1 / 32, C=2.0, tol=1e-6).fit(Xtr, ytr)
    np.testing.assert_allclose(peer.decision_function(Xte), ref.decision_function(Xte), atol=1e-4)
    np.testing.assert_array_equal(peer.predict(Xte), ref.predict(Xte))

    poly = peers.LibSVM(kernel="poly", gamma=0.05, coef0=1.0, degree=2, C=0.5, tol=1e-6).fit(Xtr, ytr)
    ref = SVC(kernel="poly", gamma=0.05, coef0=1.0, degree=2, C=0.5, tol=1e-6).fit(Xtr, ytr)
    np.testing.assert_allclose(poly.decision_function(Xte), ref.decision_function(Xte), atol=1e-4)


def test_libsvm_regression_and_multiclass(regression, multiclass):
    pytest.importorskip("libsvm.svmutil")
    from sklearn.svm import SVC, SVR

    X, y = regression
    peer = peers.LibSVM(task="regression", sigma=3.0, C=50.0, epsilon=5.0, tol=1e-6).fit(X, y)
    np.testing.assert_allclose(peer.predict(X), SVR(gamma=1 / 18, C=50.0, epsilon=5.0, tol=1e-6).fit(X, y).predict(X),
                               atol=1e-3)
    X, labels = multiclass
    pred = peers.LibSVM(sigma=3.0, C=1.0).fit(X, labels).predict(X)
    np.testing.assert_array_equal(pred, SVC(gamma=1 / 18, C=1.0).fit(X, labels).predict(X))


def test_liblinear_matches_sklearn_linearsvc(binary, multiclass):
    pytest.importorskip("liblinear.liblinearutil")
    from sklearn.svm import LinearSVC

    Xtr, ytr, Xte, _ = binary
    for first in ("malignant", "benign"):
        order = np.argsort(ytr != first, kind="stable")
        peer = peers.LibLinear(C=0.3, tol=1e-8).fit(Xtr[order], ytr[order])
        ref = LinearSVC(C=0.3, tol=1e-8, dual=True, max_iter=100000).fit(Xtr[order], ytr[order])
        np.testing.assert_allclose(peer.decision_function(Xte), ref.decision_function(Xte), atol=1e-4)
        np.testing.assert_array_equal(peer.predict(Xte), ref.predict(Xte))
    X, labels = multiclass
    assert list(dict.fromkeys(labels)) != sorted(set(labels))  # LIBLINEAR's label order differs
    peer = peers.LibLinear(C=0.3, tol=1e-8).fit(X, labels)
    ref = LinearSVC(C=0.3, tol=1e-8, dual=True, max_iter=100000).fit(X, labels)
    np.testing.assert_allclose(peer.decision_function(X), ref.decision_function(X), atol=1e-3)
    assert np.mean(peer.predict(X) == ref.predict(X)) > 0.99
    with pytest.raises(ValueError, match="task"):
        peers.LibLinear(task="regression", solver="l2r_lr")


def test_vowpal_wabbit_learns_labels_it_was_given():
    pytest.importorskip("vowpalwabbit")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 5))
    w = np.array([1.5, -2.0, 0.5, 0.0, 1.0])
    score = X @ w
    binary = np.where(score > 0, "yes", "no")
    peer = peers.VowpalWabbit(passes=10).fit(X, binary)
    dec = peer.decision_function(X)
    assert np.mean(peer.predict(X) == binary) > 0.95
    np.testing.assert_array_equal(peer.predict(X), np.where(dec > 0, "yes", "no"))
    assert np.corrcoef(dec, score)[0, 1] > 0.9

    three = np.array([7, 3, 5])[np.digitize(score, [-1.0, 1.0])]
    peer = peers.VowpalWabbit(passes=10).fit(X, three)
    assert np.mean(peer.predict(X) == three) > 0.85

    y = score + 0.1 * rng.normal(size=600)
    peer = peers.VowpalWabbit(task="regression", passes=10).fit(X, y)
    assert peer.evaluate(X, y)["mse"] < 0.05 * np.var(y)
    peer.close()


def test_run_capped_returns_result_error_or_timeout():
    """A peer runs in a forked child: its result comes back, an exception is reported as text,
    and a child past its cap is killed at the cap."""
    data = np.arange(5.0)
    assert harness.run_capped(lambda: float(data.sum()), 10) == ("ok", 10.0)
    status, text = harness.run_capped(lambda: 1 / 0, 10)
    assert status == "error" and "ZeroDivisionError" in text
    start = time.perf_counter()
    assert harness.run_capped(lambda: time.sleep(30), 0.5) == ("timeout", None)
    assert time.perf_counter() - start < 10
