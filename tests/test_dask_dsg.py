"""DoublyStochasticClassifier / DoublyStochasticRegressor on dask arrays chunked by rows (issue #15).

The mini-batches are drawn as on numpy; their rows are fetched from the chunks that hold them, a
group of iterations (one pass, or what fits the memory budget) per dask compute, and the model is
updated on the client as on numpy. So the model is numpy's BIT FOR BIT without sample weights; with
them, to 1e-12: the weights are rescaled by their total, which dask sums chunk by chunk (another
order than numpy's pairwise sum, so its last bit may differ).

With a distributed client (the LocalCluster tests at the end), each mini-batch is scored on the
earlier blocks by the workers, one task per worker over a range of groups of blocks, and the client
adds the per-group terms in numpy's order: the same model bit for bit (weights: 1e-12, as above).
"""

import math
import os

import numpy as np
import pytest
from sklearn.base import clone

from kernelscale import DoublyStochasticClassifier, DoublyStochasticRegressor
from kernelscale.kernels import GaussianKernel
from kernelscale.ops.rows import DaskRows

from dask_support import (  # noqa: F401 (fixtures)
    N, _dask, assert_same_model, dask, data, no_gather, sync,
)

WEIGHTED_RTOL = 1e-12
SMALL = dict(batch_size=64, block_size=16, random_state=0)


def _fit_both(est, X, y, w=None):
    ref = clone(est).fit(X, y, sample_weight=w)
    got = clone(est).fit(_dask(X), _dask(y), sample_weight=None if w is None else _dask(w))
    return ref, got


@pytest.mark.parametrize("est, target, weighted", [
    (DoublyStochasticClassifier(loss="hinge", n_iter=12, **SMALL), "three", True),
    (DoublyStochasticClassifier(loss="logistic", n_iter=12, **SMALL), "two", True),
    (DoublyStochasticClassifier(loss="softmax", n_iter=12, class_weight="balanced", **SMALL), "three", False),
    (DoublyStochasticClassifier(loss="hinge", n_iter=12, class_weight={0: 2.0}, shuffle=False, **SMALL), "two", False),
    (DoublyStochasticRegressor(n_iter=12, **SMALL), "real", True),  # "auto" step from the first batch's curvature
    (DoublyStochasticRegressor(n_iter=12, **SMALL), "multi", False),
    (DoublyStochasticRegressor(solver="preconditioned", n_iter=4, batch_size=128, block_size=16, random_state=0),
     "real", True),
], ids=["hinge-3-classes-weighted", "logistic-weighted", "softmax-balanced", "hinge-class-weight-in-order",
        "squared-weighted", "squared-2-outputs", "preconditioned-weighted"])
def test_fit_on_dask_equals_numpy_without_gathering(data, sync, no_gather, est, target, weighted):
    X, y_class, y_reg, w = data
    y = {"two": y_class, "three": np.digitize(X[:, 0], [-0.5, 0.5]), "real": y_reg,
         "multi": np.column_stack([y_reg, -y_reg])}[target]
    ref, got = _fit_both(est, X, y, w if weighted else None)
    assert_same_model(ref, got, WEIGHTED_RTOL if weighted else None)


def test_float32_warm_start_and_predictions(data, sync, no_gather):
    X, _, y, w = data
    X32, y32 = X.astype(np.float32), y.astype(np.float32)
    est = DoublyStochasticRegressor(n_iter=8, warm_start=True, **SMALL)
    ref, got = _fit_both(est, X32, y32)
    assert got.coef_.dtype == np.float32
    assert_same_model(ref, got)
    ref.set_params(n_iter=14).fit(X32, y32)
    got.set_params(n_iter=14).fit(_dask(X32), _dask(y32))  # continues the iteration counter and seeds
    assert_same_model(ref, got)
    np.testing.assert_array_equal(got.predict(X32), ref.predict(X32))


def _take_rows(monkeypatch):
    """Rows fetched by each call of DaskRows.taker's function (one dask compute each), recorded."""
    rows, taker = [], DaskRows.taker

    def counted(self, *arrays):
        take = taker(self, *arrays)
        return lambda groups: rows.append(sum(len(g) for g in groups)) or take(groups)

    monkeypatch.setattr(DaskRows, "taker", counted)
    return rows


def test_one_dask_compute_per_group_of_iterations_not_per_iteration(data, sync, monkeypatch):
    X, y, _, _ = data
    computes = []
    est = DoublyStochasticClassifier(GaussianKernel(sigma=2.0), n_iter=20, **SMALL)
    rows = _take_rows(monkeypatch)
    with dask.callbacks.Callback(start=lambda dsk: computes.append(1)):
        got = clone(est).fit(_dask(X), _dask(y))
    per_group = math.ceil(N / 64)  # one pass of 64-row batches: 5 iterations
    assert rows == [N] * math.ceil(20 / per_group)  # each group holds one pass's rows
    # the labels, the persisted X and one-hot targets, then one compute per group
    assert len(computes) == 2 + len(rows) == 6, len(computes)
    # numpy keeps running scores of its 300 rows here (4 n <= 64 x 20); a dask X stays distributed
    # and rescores each batch: numpy's rescoring model bit for bit, its running one up to rounding
    import kernelscale.doubly_stochastic.fitting as module

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(module, "_use_running_scores", lambda *a: False)
        assert_same_model(clone(est).fit(X, y), got)
    np.testing.assert_allclose(clone(est).fit(X, y).coef_, got.coef_, rtol=1e-12, atol=1e-12)


def test_epoch_windows_are_a_permutation_in_windows_of_whole_chunks():
    from kernelscale.doubly_stochastic.batches import _epoch_windows

    chunks = (70, 70, 70, 70, 20)
    offsets = np.cumsum((0,) + chunks)
    windows = _epoch_windows(chunks, 150, np.random.default_rng(0))
    np.testing.assert_array_equal(np.sort(np.concatenate(windows)), np.arange(N))
    held = []
    for w in windows:  # each window: whole chunks, at most 150 rows (two 70-row chunks, or one)
        owners = np.unique(np.searchsorted(offsets, w, side="right") - 1)
        assert w.size == sum(chunks[c] for c in owners) <= 150
        held.extend(owners)
    assert sorted(held) == list(range(5)) and len(windows) <= 4  # every chunk in exactly one window
    again = _epoch_windows(chunks, 150, np.random.default_rng(1))
    assert not np.array_equal(np.concatenate(windows), np.concatenate(again))


def test_a_pass_larger_than_a_fetch_is_drawn_window_by_window(data, sync, no_gather, monkeypatch):
    """A pass over more rows than FETCH_MAX_BYTES: the rows are fetched window by window, each
    fetch computing the chunks of one window only, each chunk once per pass, every row once per
    pass; the fit still learns."""
    import kernelscale.doubly_stochastic.batches as module

    X, y, _, _ = data
    row_bytes = 8 * X.shape[1] + 8 * 1  # float64 rows and their +-1 target
    # fetches of 140 rows: windows of at most 140 - 64 rows, so single 70-row chunks
    monkeypatch.setattr(module, "FETCH_MAX_BYTES", 140 * row_bytes)
    rows = _take_rows(monkeypatch)
    touched = []
    take = module.DaskRows.taker

    def chunks_per_fetch(self, *arrays):
        inner = take(self, *arrays)
        offsets = np.cumsum(self.chunks)

        def counted(groups):
            touched.append(np.unique(np.searchsorted(offsets, np.concatenate(groups), side="right")))
            return inner(groups)
        return counted

    monkeypatch.setattr(module.DaskRows, "taker", chunks_per_fetch)
    est = DoublyStochasticClassifier(GaussianKernel(sigma=2.0), loss="logistic", n_iter=20, **SMALL)
    got = clone(est).fit(_dask(X), _dask(y))
    assert max(rows) <= 70 and sum(rows) == 4 * N  # 20 batches of 64: four passes (5 batches each)
    assert all(t.size == 1 for t in touched)  # one chunk per fetch ...
    counts = np.bincount(np.concatenate(touched))
    np.testing.assert_array_equal(counts, 4)  # ... and each chunk once per pass
    assert np.mean(got.predict(X) == y) > 0.8 and np.all(np.isfinite(got.coef_))
    # the batches are consecutive slices of the windows, and each gets its own rows
    batches, windows = got._fit_batches(N, 20, 0, _dask(X).chunks[0], 140)
    np.testing.assert_array_equal(np.concatenate(batches), np.concatenate(windows)[: 20 * 64 - 4 * 20])
    Xd = _dask(X)
    for b, (Xb, _, _) in zip(batches, module._batch_rows(Xd, None, None, batches, 140 * row_bytes, windows)):
        np.testing.assert_array_equal(Xb, X[b])
    # under the cap a pass is one permutation, as on numpy (the tests above): here it is not
    assert not np.array_equal(got.coef_, clone(est).fit(X, y).coef_)


def test_window_rows_copy_each_batch_out_of_its_windows():
    """Batches spanning two windows get the end of one and the start of the next; no batch is a
    view of a fetched window (which would keep it alive while the next one is fetched)."""
    from kernelscale.doubly_stochastic.batches import _window_rows

    X = np.arange(200.0).reshape(100, 2)
    rng = np.random.default_rng(0)
    windows = [rng.permutation(np.arange(s, s + 25)) for s in range(0, 100, 25)]
    order = np.concatenate(windows)
    batches = [order[s:s + 30] for s in range(0, 100, 30)]  # 30, 30, 30, 10: three span a seam
    fetched = []

    def take(groups):
        fetched.append(X[groups[0]])
        return [(fetched[-1], None, None)]

    for b, (Xb, Yb, wb) in zip(batches, _window_rows(take, batches, iter(windows), 100)):
        np.testing.assert_array_equal(Xb, X[b])
        assert Yb is None and wb is None
        assert not any(np.shares_memory(Xb, f) for f in fetched)
    assert len(fetched) == 4  # each window fetched once


def test_partial_fit_streams_the_call_in_groups_within_the_budget(data, sync, no_gather, monkeypatch):
    X, y_class, _, w = data
    classes = np.unique(y_class)
    est = DoublyStochasticClassifier(GaussianKernel(sigma=2.0), loss="logistic", batch_size=32, block_size=16,
                                     class_weight={1: 3.0}, random_state=0, max_memory="255KB")
    ref, got = clone(est), clone(est)
    rows = _take_rows(monkeypatch)
    for part in (slice(0, 150), slice(150, N)):
        ref.partial_fit(X[part], y_class[part], classes=classes, sample_weight=w[part])
        got.partial_fit(_dask(X[part]), _dask(y_class[part]), classes=classes, sample_weight=_dask(w[part]))
    assert_same_model(ref, got)  # weights as given (no total): bit for bit
    # each row fetched once, in groups of what fits the quarter of the budget left by the iterations
    # (about 16 KB of 239 KB here: two 32-row batches)
    assert sum(rows) == N and len(rows) > 2 and max(rows) < 150, rows
    with pytest.raises(ValueError, match=r"y contains labels \[7\] not in classes_"):
        got.partial_fit(_dask(X), _dask(np.where(y_class == 1, 7, 0)))
    with pytest.raises(ValueError, match=r"classes must be passed on the first call to partial_fit"):
        clone(est).partial_fit(_dask(X), _dask(y_class))
    with pytest.raises(ValueError, match=r"class_weight='balanced' .* not available in partial_fit"):
        clone(est).set_params(class_weight="balanced").partial_fit(_dask(X), _dask(y_class), classes=classes)


def test_regressor_partial_fit_with_the_median_bandwidth(data, sync, no_gather):
    X, _, y, w = data
    est = DoublyStochasticRegressor(**SMALL)
    ref, got = clone(est), clone(est)
    for part in (slice(0, 200), slice(200, N)):
        ref.partial_fit(X[part], y[part], sample_weight=w[part])
        got.partial_fit(_dask(X[part]), _dask(y[part]), sample_weight=_dask(w[part]))
    assert_same_model(ref, got)



# -- a distributed client: the mini-batches scored by the workers ------------------------------------

from dask_support import client, cluster_client  # noqa: E402,F401 (fixtures)

import kernelscale.doubly_stochastic.distributed as distributed_module  # noqa: E402
import kernelscale.doubly_stochastic.fitting as fitting_module  # noqa: E402
from kernelscale.ops.features import FeatureOperator  # noqa: E402

#: blocks of 2048 columns: groups (one GEMM each) of 2 blocks, so iteration t scores ceil(t / 2)
#: runs, split between the two workers from t = 3 on
CLUSTER = dict(batch_size=64, block_size=2048, random_state=0)


def _runs(t_first, t_stop):
    """(runs, tasks) the workers score over iterations [t_first, t_stop) (t = blocks before)."""
    ts = [t for t in range(t_first, t_stop) if t]
    return sum(math.ceil(t / 2) for t in ts), sum(min(2, math.ceil(t / 2)) for t in ts)


@pytest.fixture
def on_workers(client, monkeypatch):
    """Every mini-batch with earlier blocks scored by the workers (no work threshold); during a fit
    on dask arrays the client's FeatureOperator.scores refuses a mini-batch; returns a function
    giving the (runs, tasks) the workers scored since the fixture started, and per worker."""
    monkeypatch.setattr(distributed_module, "_DISTRIBUTED_SCORE_WORK", 0)
    monkeypatch.setattr(distributed_module, "_workers_outnumber_cores", lambda client: True)
    scores, iterations = FeatureOperator.scores, fitting_module.dsg_iterations

    def refuse(self, X, coef, blocks):
        if len(blocks) and X.shape[0] < N and any(refusing):  # a mini-batch (not a prediction of all rows)
            raise AssertionError("a mini-batch was scored on the client")
        return scores(self, X, coef, blocks)

    def iterate(X, *args, **kwargs):
        refusing.append(dask.is_dask_collection(X) or None)
        try:
            return iterations(X, *args, **kwargs)
        finally:
            refusing.clear()

    refusing = []
    monkeypatch.setattr(FeatureOperator, "scores", refuse)
    monkeypatch.setattr(fitting_module, "dsg_iterations", iterate)
    before = client.run(distributed_module._worker_stats)

    def done():
        after = client.run(distributed_module._worker_stats)
        per = {w: [after[w].get(key, 0) - before.get(w, {}).get(key, 0) for key in ("runs", "tasks")]
               for w in after}
        return tuple(sum(p[i] for p in per.values()) for i in (0, 1)), per

    return done


@pytest.mark.parametrize("loss, target, weighted", [
    ("hinge", "three", False), ("logistic", "two", True), ("softmax", "three", False), ("squared", "real", True),
])
def test_workers_score_the_batches_as_numpy_does(data, on_workers, loss, target, weighted):
    X, y_class, y_reg, w = data
    y = {"two": y_class, "three": np.digitize(X[:, 0], [-0.5, 0.5]), "real": y_reg}[target]
    est = (DoublyStochasticRegressor(n_iter=9, **CLUSTER) if loss == "squared"
           else DoublyStochasticClassifier(loss=loss, n_iter=9, **CLUSTER))
    got = clone(est).fit(_dask(X), _dask(y), sample_weight=_dask(w) if weighted else None)
    total, per_worker = on_workers()
    ref = clone(est).fit(X, y, sample_weight=w if weighted else None)  # rescores (4 n > 64 x 9)
    # bit for bit; with weights to 1e-12: rescaled by their total, which dask sums by chunks
    assert_same_model(ref, got, WEIGHTED_RTOL if weighted else None)
    assert total == _runs(0, 9), per_worker
    assert all(tasks >= 6 for _, tasks in per_worker.values()), per_worker  # both workers scored


def test_partial_fit_and_a_warm_start_scored_on_the_workers(data, on_workers):
    X, y_class, y, w = data
    classes = np.unique(y_class)
    est = DoublyStochasticClassifier(GaussianKernel(sigma=2.0), loss="logistic", class_weight={1: 3.0}, **CLUSTER)
    ref, got = clone(est), clone(est)
    for part in (slice(0, 150), slice(150, N)):  # 3 + 3 iterations
        ref.partial_fit(X[part], y_class[part], classes=classes, sample_weight=w[part])
        got.partial_fit(_dask(X[part]), _dask(y_class[part]), classes=classes, sample_weight=_dask(w[part]))
    assert_same_model(ref, got)  # weights as given: bit for bit
    reg = DoublyStochasticRegressor(n_iter=4, warm_start=True, **CLUSTER)
    a = clone(reg).fit(X, y)
    b = clone(reg).fit(_dask(X), _dask(y))
    a.set_params(n_iter=7).fit(X, y)
    b.set_params(n_iter=7).fit(_dask(X), _dask(y))  # continues with blocks 4..6
    assert_same_model(a, b)
    (runs, tasks), _ = on_workers()
    assert (runs, tasks) == tuple(map(sum, zip(_runs(0, 6), _runs(0, 4), _runs(4, 7)))), (runs, tasks)


def test_small_batches_stay_on_the_client(data, client, monkeypatch):
    X, y, _, _ = data
    monkeypatch.setattr(distributed_module, "_workers_outnumber_cores", lambda client: True)
    before = client.run(distributed_module._worker_stats)
    DoublyStochasticClassifier(n_iter=5, **CLUSTER).fit(_dask(X), _dask(y))  # below the work threshold
    assert client.run(distributed_module._worker_stats) == before


def test_workers_score_only_when_their_threads_outnumber_the_cores_here(client, monkeypatch):
    """On one host the client's BLAS threads score faster than one-thread workers on the same cores."""
    threads = sum(client.nthreads().values())
    monkeypatch.setattr(os, "cpu_count", lambda: threads)
    assert distributed_module._scoring_client(_dask(np.zeros((4, 2)))) is None
    monkeypatch.setattr(os, "cpu_count", lambda: threads - 1)
    assert distributed_module._scoring_client(_dask(np.zeros((4, 2)))) is client
