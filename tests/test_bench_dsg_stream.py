"""The virtual-digit streaming benchmark (benchmarks/papers/dsg_stream.py) resumes exactly."""

import json

import numpy as np
import pytest
from sklearn.datasets import load_digits

from benchmarks.papers import dsg_stream as stream


def _digits():
    X, y = load_digits(return_X_y=True)
    X = np.round(X * 255 / 16).astype(np.uint8)  # 8 x 8 images in 0..255, as MNIST's
    return X[:1500], y[:1500], X[1500:], y[1500:]


def test_a_run_paused_and_resumed_from_its_saved_state_equals_one_run(tmp_path):
    kw = dict(data=_digits(), checkpoints=(9000, 20000), out_dir=tmp_path / "results")
    stream.run(state_dir=tmp_path / "one", **kw)
    stream.run(state_dir=tmp_path / "parts", until=9000, **kw)  # stops at the first checkpoint
    paused = json.loads((tmp_path / "parts" / "state.json").read_text())
    assert paused["examples"] == 2 * stream.CHUNK and len(paused["records"]) == 1
    stream.run(state_dir=tmp_path / "parts", **kw)
    one = json.loads((tmp_path / "one" / "state.json").read_text())
    parts = json.loads((tmp_path / "parts" / "state.json").read_text())
    assert [r["examples"] for r in one["records"]] == [16384, 20000]
    for a, b in zip(one["records"], parts["records"], strict=True):
        assert a["test_error"] == b["test_error"] and a["n_iter"] == b["n_iter"]
        assert a["model_bytes"] == b["model_bytes"] > 0 and b["peak_rss_bytes"] > 0
    assert one["records"][-1]["test_error"] < 0.5  # it learns (chance is 0.9)
    doc = json.loads((tmp_path / "results" / "dsg-stream.json").read_text())
    assert [r["params"]["examples"] for r in doc["records"]] == [16384, 20000]


def test_a_part_that_stops_between_checkpoints_records_where_it_stopped_and_in_dsg_json(tmp_path):
    kw = dict(data=_digits(), checkpoints=(9000, 40000), out_dir=tmp_path / "results", state_dir=tmp_path / "s")
    (tmp_path / "results").mkdir()
    other = {"dataset": "adult", "method": "DSG", "role": "ours", "params": {}, "metrics": {"test_error": 0.15}}
    dsg = tmp_path / "results" / "dsg.json"
    dsg.write_text(json.dumps({"suite": "dsg", "records": [other]}))
    stream.run(until=20000, **kw)  # 3 chunks: past 20000, short of the 40000 checkpoint
    doc = json.loads((tmp_path / "results" / "dsg-stream.json").read_text())
    assert [(r["params"]["examples"], "part's end" in r["method"]) for r in doc["records"]] == [
        (16384, False), (24576, True)]
    assert 0 <= doc["records"][-1]["metrics"]["test_error"] < 0.5
    stream.run(**kw)  # resumed to the end: the part's end is superseded by the checkpoints
    doc = json.loads((tmp_path / "results" / "dsg-stream.json").read_text())
    assert [r["params"]["examples"] for r in doc["records"]] == [16384, 40000]
    # dsg.json holds the run's records once (the first part's are replaced), beside its own
    records = json.loads(dsg.read_text())["records"]
    assert records[0] == other and [r["params"]["examples"] for r in records[1:]] == [16384, 40000]
    assert [r["metrics"] for r in records[1:]] == [r["metrics"] for r in doc["records"]]
    assert {r["params"]["stream_suite"] for r in records[1:]} == {"dsg-stream"}


def test_a_batch_of_several_chunks_is_one_partial_fit_call_and_a_study_picks_its_best_setting(tmp_path):
    kw = dict(data=_digits(), checkpoints=(9000, 40000), out_dir=tmp_path / "results", validation=True)
    stream.run(state_dir=tmp_path / "a", block_size=64, batch_size=2 * stream.CHUNK, **kw)
    state = json.loads((tmp_path / "a" / "state.json").read_text())
    # chunks (0, 1), (2, 3) and (4,): one mini-batch each
    assert (state["examples"], state["chunks_done"], state["records"][-1]["n_iter"]) == (40000, 5, 3)
    with pytest.raises(ValueError, match="--fresh"):  # its state is not resumed with other settings
        stream.run(state_dir=tmp_path / "a", **kw)
    with pytest.raises(ValueError, match="whole mini-batches"):
        stream.run(state_dir=tmp_path / "c", batch_size=stream.CHUNK + 1000, **kw)
    stream.run(state_dir=tmp_path / "b", t0=1e4, **kw)
    path = tmp_path / "results" / "dsg-stream-validation.json"
    doc = json.loads(path.read_text())
    # the first setting crosses 9000 at 16384 examples, the second at 16384 too (chunks of 8192)
    keys = {(r["params"]["t0"], r["params"]["block_size"], r["params"]["checkpoint"]) for r in doc["records"]}
    assert keys == {(t0, block, c) for t0, block in ((stream.T0, 64), (1e4, "auto")) for c in (9000, 40000)}
    # errors made up so that one setting is better at 9000 and the other at 40000
    for r in doc["records"]:
        small = r["params"]["block_size"] == 64
        r["metrics"]["test_error"] = {9000: 0.1 if small else 0.2, 40000: 0.3 if small else 0.05}[r["params"]["checkpoint"]]
    path.write_text(json.dumps(doc))
    assert stream.best_setting(path) == "--t0 10000.0"  # the better at 40000, the largest common checkpoint
    # a setting that stopped short of 40000 (its last record a part's end): compared at 9000
    for r in doc["records"]:
        if r["params"]["block_size"] == 64 and r["params"]["checkpoint"] == 40000:
            r["params"]["part_end"] = True
    path.write_text(json.dumps(doc))
    assert stream.best_setting(path) == f"--t0 {stream.T0!r} --block-size 64 --batch-size {2 * stream.CHUNK}"
    # the other setting recorded 40000 only: no checkpoint in common, a clear error
    doc["records"] = [r for r in doc["records"] if r["params"]["block_size"] == 64 or r["params"]["checkpoint"] == 40000]
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="no checkpoint that all its settings crossed"):
        stream.best_setting(path)
