"""The scaling benchmark (benchmarks/perf/scale.py): one real fit on a LocalCluster of virtual
digits, and its bookkeeping (resuming from the finished fits, slope, speed-up) on recorded fits."""

import json

import numpy as np
import pytest
from sklearn.datasets import load_digits

from benchmarks.perf import scale


def _digits():
    X, y = load_digits(return_X_y=True)
    X = np.round(X * 255 / 16).astype(np.uint8)  # 8 x 8 images in 0..255, as MNIST's
    return X[:1500], y[:1500], X[1500:].astype(np.float32), y[1500:]


def test_one_fit_on_a_local_cluster_of_virtual_digits():
    pytest.importorskip("distributed")
    got = scale.fit_once("stagewise", 2000, 1, _digits(), chunk=1000)
    # it learns (chance is 0.9); every example is deformed, and MNIST's deformations (2-pixel
    # shifts, elastic alpha 10) are large on 8 x 8 digits
    assert got["test_error"] < 0.5 and got["train_error"] < 0.5
    assert got["fit_s"] > 0 and got["predict_s"] > 0 and got["worker_peak_rss_bytes"] > 2**20


def test_resumes_from_the_finished_fits_and_reports_slope_and_speedup(tmp_path, monkeypatch):
    calls = []

    def fake(method, n, workers, data, chunk):
        calls.append((method, n, workers))
        return {"fit_s": 1e-4 * n ** 1.2 / workers, "predict_s": 1e-5 * n, "test_error": 1 / np.log(n),
                "predict_rows": n, "train_error": 0.0, "worker_peak_rss_bytes": 2**28, "client_peak_rss_bytes": 2**27}

    monkeypatch.setattr(scale, "fit_once", fake)
    kw = dict(data=_digits(), parts=["stagewise"], speedup_n=2000, state_dir=tmp_path / "state",
              out_dir=tmp_path / "results")
    scale.run(sizes=(1000, 2000), **kw)
    assert calls == [("stagewise", 1000, 2), ("stagewise", 2000, 1), ("stagewise", 2000, 2)]
    scale.run(sizes=(1000, 2000, 4000), **kw)  # only the new size is fitted
    assert calls[3:] == [("stagewise", 4000, 2)]
    state = tmp_path / "state" / "full.json"
    fits = json.loads(state.read_text())
    fits["stagewise/1000/2"]["settings"] = {**scale.SETTINGS, "include_originals": True}  # another run's settings
    state.write_text(json.dumps(fits))
    scale.run(sizes=(1000, 2000, 4000), **kw)  # fitted again
    assert calls[4:] == [("stagewise", 1000, 2)]
    doc = json.loads((tmp_path / "results" / "scale.json").read_text())
    assert doc["paper"]["summary"]["stagewise log-log slope of fit time"] == pytest.approx(1.2)
    assert doc["paper"]["summary"]["stagewise speed-up 1->2 workers at n=2000"] == pytest.approx(2.0)
    assert [r["params"]["n"] for r in doc["records"]] == [1000, 2000, 2000, 4000]
    try:
        import matplotlib  # noqa: F401 (the plot needs the plot extra)
    except ImportError:
        return
    assert (tmp_path / "results" / "scale.png").exists()


def test_a_fit_in_parts_stops_resumes_and_gives_the_one_fit_model(tmp_path):
    pytest.importorskip("distributed")
    data = _digits()
    one = scale.fit_once("stagewise", 2000, 1, data, chunk=1000)
    checkpoint = tmp_path / "state" / "stagewise-2000-1"
    # the first of two parts only: nothing to record yet, the model and its seconds are saved
    assert scale.fit_once("stagewise", 2000, 1, data, chunk=1000, parts=2, checkpoint=checkpoint, max_parts=1) is None
    progress = json.loads(checkpoint.with_suffix(".json").read_text())
    assert progress["parts_done"] == 1 and progress["fit_s"] > 0
    resumed = scale.fit_once("stagewise", 2000, 1, data, chunk=1000, parts=2, checkpoint=checkpoint)
    assert resumed["parts"] == 2 and resumed["fit_s"] > progress["fit_s"]
    # 4 + 4 warm-started stages are the 8 stages of one fit (up to float32 rounding of the replay)
    assert abs(resumed["test_error"] - one["test_error"]) <= 2 / len(data[3])


def test_parts_resolve_the_sizes_of_one_fit():
    assert scale._split(scale._stagewise(10**6), 10**6) == ("n_stages", 8, {})
    assert scale._split(scale._stagewise_auto(10**6), 10**6) == ("n_stages", 64, {})
    # the doubly stochastic run: two passes of ceil(2n / 256) rows, 51200 features in 256 blocks
    assert scale._split(scale._dsg(100_000), 100_000) == ("n_iter", 256, {"batch_size": 782, "block_size": 200})
