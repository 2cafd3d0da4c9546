"""DoublyStochasticClassifier / DoublyStochasticRegressor on dask arrays chunked by rows (issues #15, #40).

Each iteration is one sum over the rows of its mini-batch, computed where their row chunks are
(kernelscale.doubly_stochastic.distributed): a task per row chunk (per worker on a distributed
client) scores its rows on the earlier blocks, computes the new block's features on them and
returns its part of the new block's gradient (and, preconditioned, of its covariance); the client
gets only those sums, takes the step and stores the block as numpy does. So the model is numpy's
up to the order of the sums: to DSG_RTOL in float64, FLOAT32_RTOL in float32.

When X, the targets and the weights fit what the workers may hold they are persisted and the
mini-batches are numpy's. When they do not, a shuffled pass is drawn window by window of row
chunks (each window held while its batches read it): each chunk is computed once per pass, the
order is not numpy's, and the model equals numpy's on the same batches (to DSG_RTOL) and, on
numpy's own batches, reaches the same objective (to a few percent).
"""

import math

import numpy as np
import pytest
from sklearn.base import clone, is_classifier

from kernelscale import DoublyStochasticClassifier, DoublyStochasticRegressor
from kernelscale.kernels import GaussianKernel

from dask_support import (  # noqa: F401 (fixtures)
    FLOAT32_RTOL, N, ROWS, _dask, assert_same_model, da, dask, data, no_gather, sync,
)

#: the sums over a mini-batch's rows are added chunk by chunk (measured: 1e-13 relative after 12
#: iterations; the preconditioned ridge solves amplify it most)
DSG_RTOL = 1e-8
SMALL = dict(batch_size=64, block_size=16, random_state=0)


def _fit_both(est, X, y, w=None):
    ref = clone(est).fit(X, y, sample_weight=w)
    got = clone(est).fit(_dask(X), _dask(y), sample_weight=None if w is None else _dask(w))
    return ref, got


def _counted(X, seen):
    """X as a dask array whose row chunks append their index to ``seen`` when computed."""
    def load(block, block_info=None):
        seen.append(block_info[0]["chunk-location"][0])
        return block

    return _dask(X).map_blocks(load, dtype=X.dtype, meta=np.empty((0, 0), dtype=X.dtype))


def _hold(monkeypatch, nbytes):
    """What the fit may hold of its data (kernelscale.dask.fit.hold_budget) set to ``nbytes``."""
    import kernelscale.dask.fit as dask_fit

    monkeypatch.setattr(dask_fit, "hold_budget", lambda max_memory: nbytes)


@pytest.mark.parametrize("est, target, weighted", [
    (DoublyStochasticClassifier(loss="hinge", n_iter=12, **SMALL), "three", True),
    (DoublyStochasticClassifier(loss="logistic", n_iter=12, **SMALL), "two", True),
    (DoublyStochasticClassifier(loss="softmax", n_iter=12, class_weight="balanced", **SMALL), "three", False),
    (DoublyStochasticClassifier(loss="hinge", n_iter=12, class_weight={0: 2.0}, shuffle=False, **SMALL), "two", False),
    (DoublyStochasticRegressor(n_iter=12, **SMALL), "real", True),  # "auto" step from the first batch's curvature
    (DoublyStochasticRegressor(n_iter=12, **SMALL), "multi", False),
    (DoublyStochasticRegressor(solver="preconditioned", n_iter=4, batch_size=128, block_size=16, random_state=0),
     "real", True),
    (DoublyStochasticClassifier(solver="preconditioned", loss="softmax", n_iter=6, batch_size=128, block_size=16,
                                random_state=0), "three", False),
], ids=["hinge-3-classes-weighted", "logistic-weighted", "softmax-balanced", "hinge-class-weight-in-order",
        "squared-weighted", "squared-2-outputs", "preconditioned-weighted", "preconditioned-softmax"])
def test_fit_on_dask_equals_numpy_without_gathering(data, sync, no_gather, est, target, weighted):
    X, y_class, y_reg, w = data
    y = {"two": y_class, "three": np.digitize(X[:, 0], [-0.5, 0.5]), "real": y_reg,
         "multi": np.column_stack([y_reg, -y_reg])}[target]
    ref, got = _fit_both(est, X, y, w if weighted else None)
    assert_same_model(ref, got, DSG_RTOL)


def test_float32_warm_start_and_predictions(data, sync, no_gather):
    X, _, y, w = data
    X32, y32 = X.astype(np.float32), y.astype(np.float32)
    est = DoublyStochasticRegressor(n_iter=8, warm_start=True, **SMALL)
    ref, got = _fit_both(est, X32, y32)
    assert got.coef_.dtype == np.float32
    assert_same_model(ref, got, FLOAT32_RTOL)
    ref.set_params(n_iter=14).fit(X32, y32)
    got.set_params(n_iter=14).fit(_dask(X32), _dask(y32))  # continues the iteration counter and seeds
    assert_same_model(ref, got, FLOAT32_RTOL)
    np.testing.assert_allclose(got.predict(X32), ref.predict(X32), rtol=FLOAT32_RTOL,
                               atol=FLOAT32_RTOL * np.abs(ref.predict(X32)).max())


def test_each_iteration_is_one_sum_over_its_batch_rows_where_they_are(data, sync, monkeypatch):
    """One compute per iteration, one task per row chunk holding rows of the batch, each task
    given only its rows of the batch; X is computed once (persisted), never per iteration."""
    import kernelscale.doubly_stochastic.distributed as module

    X, y, _, _ = data
    tasks, seen = [], []
    moments = module._batch_moments

    def counted(local, Xc, *args, **kwargs):
        tasks.append((kwargs["t"], len(Xc[local])))
        return moments(local, Xc, *args, **kwargs)

    monkeypatch.setattr(module, "_batch_moments", counted)
    est = DoublyStochasticClassifier(GaussianKernel(sigma=2.0), n_iter=20, **SMALL)
    computes = []
    with dask.callbacks.Callback(start=lambda dsk: computes.append(any("kernelscale-at" in str(k) for k in dsk))):
        got = clone(est).fit(_counted(X, seen), _dask(y))
    assert sorted(seen) == list(range(5))  # each row chunk computed once, for the persisted X
    batches, _ = got._fit_batches(N, 20, 0)
    offsets = np.arange(0, N, ROWS)
    for t, b in enumerate(batches):  # the tasks of iteration t: one per chunk holding its rows
        mine = sorted(rows for s, rows in tasks if s == t)
        owners = np.searchsorted(offsets, b, side="right") - 1
        assert mine == sorted(np.bincount(owners)[np.unique(owners)]), t
    assert sum(computes) == 20  # one compute of a sum over rows per iteration (the others: a block's key, once)
    ref = clone(est).fit(X, y)  # numpy keeps running scores of its 300 rows: the same model up to rounding
    assert_same_model(ref, got, DSG_RTOL)


def test_residency_holds_each_window_from_its_first_batch_to_its_last():
    from kernelscale.doubly_stochastic.batches import _residency

    chunks = (70, 70, 70, 70, 20)
    offsets = np.cumsum((0,) + chunks)
    windows = [np.arange(70, 210), np.arange(0, 70), np.arange(210, 300)]  # chunks {1, 2}, {0}, {3, 4}
    order = np.concatenate(windows)
    batches = [order[s:s + 64] for s in range(0, 300, 64)]  # 64 x 4 and 44: batch 2 spans windows 0 and 1
    plan = _residency(batches, windows, chunks, 300)
    assert plan == [([1, 2], []), ([], []), ([0], [1, 2]), ([3, 4], [0]), ([], [3, 4])]
    held = set()
    for b, (hold, release) in zip(batches, plan):
        held |= set(hold)
        assert set(np.searchsorted(offsets, b, side="right") - 1) <= held  # a batch's chunks are held
        held -= set(release)
    assert not held


def test_coefficients_travel_as_few_keys(sync):
    from kernelscale.doubly_stochastic.distributed import _CoefficientKeys

    coef = np.random.default_rng(0).normal(size=(13, 4, 2))
    keys = _CoefficientKeys(coef, 5)  # 4 + 1
    assert [(a, b) for a, b, _ in keys.parts] == [(0, 4), (4, 5)]
    for t in range(5, 12):
        keys.add(coef, t)
        assert len(keys.parts) == bin(t + 1).count("1")  # a binary counter of keys
        np.testing.assert_array_equal(np.concatenate(dask.compute(*keys.values())), coef[:t + 1])
    coef[:12] *= 0.5  # a renormalisation: every block changed
    keys.reset(coef, 12)
    np.testing.assert_array_equal(np.concatenate(dask.compute(*keys.values())), coef[:12])


def test_a_renormalised_scale_and_a_blow_up_as_on_numpy(data, sync, monkeypatch):
    import kernelscale.doubly_stochastic.solver as solver

    X, _, y, _ = data
    monkeypatch.setattr(solver, "_RENORMALIZE_BELOW", 0.999)  # the decay is folded into the blocks every time
    est = DoublyStochasticRegressor(n_iter=10, alpha=1e-2, step_size=0.5, **SMALL)
    ref, got = _fit_both(est, X, y)
    assert ref.scale_ == got.scale_ == 1.0
    assert_same_model(ref, got, DSG_RTOL)
    bad = DoublyStochasticRegressor(n_iter=10, step_size=1e4, **SMALL)
    with pytest.raises(ValueError, match="blew up at iteration") as numpy_error:
        clone(bad).fit(X, y * 1e3)
    with pytest.raises(ValueError, match="blew up at iteration") as dask_error:
        clone(bad).fit(_dask(X), _dask(y * 1e3))
    assert str(dask_error.value) == str(numpy_error.value)


# -- data larger than the workers may hold -------------------------------------------------------

def test_a_pass_larger_than_the_workers_hold_is_drawn_window_by_window(data, sync, no_gather, monkeypatch):
    """Windows of at most 150 rows (two 70-row chunks, or the last two): each held from its first
    batch to its last, so each row chunk is computed once per pass; every row comes once per pass;
    the model is numpy's on the same batches."""
    X, y, _, _ = data
    row = 8 * (X.shape[1] + 1)  # a window's row: X and the +-1 target
    _hold(monkeypatch, 300 * row)  # less than X with its targets twice: windows of 150 rows
    seen = []
    est = DoublyStochasticClassifier(GaussianKernel(sigma=2.0), loss="logistic", n_iter=20, **SMALL)
    got = clone(est).fit(_counted(X, seen), _dask(y))
    batches, windows = got._fit_batches(N, 20, 0, _dask(X).chunks[0], 150)
    assert windows is not None and all(len(w) <= 150 for w in windows)
    from kernelscale.doubly_stochastic.batches import _residency

    holds = np.bincount([c for hold, _ in _residency(batches, windows, _dask(X).chunks[0], N) for c in hold])
    np.testing.assert_array_equal(np.bincount(seen), holds)  # each chunk computed when its window is held ...
    assert 4 <= holds.min() and holds.max() <= math.ceil(20 * 64 / N)  # ... once per pass (20 x 64 rows: 4.3 passes)
    for p in range(4):  # the first four passes: every row once
        np.testing.assert_array_equal(np.sort(np.concatenate(batches[5 * p:5 * p + 5])), np.arange(N))
    import kernelscale.doubly_stochastic.fitting as fitting

    monkeypatch.setattr(fitting._DoublyStochasticBase, "_fit_batches", lambda self, *a: (batches, None))
    ref = clone(est).fit(X, y)  # numpy, on the same batches
    assert_same_model(ref, got, DSG_RTOL)
    assert np.mean(got.predict(X) == y) > 0.8


def test_windowed_passes_reach_numpy_s_objective():
    """Another order of the same rows each pass: the final model's training objective (mean
    logistic loss over all rows) within 3% of the in-memory fit's (measured: +0.5%; -0.8% and -1.3% with
    random_state 1 and 2)."""
    import kernelscale.dask.fit as dask_fit

    rng = np.random.default_rng(1)
    X = rng.normal(size=(4000, 6))
    y = (np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] > 0).astype(int)
    est = DoublyStochasticClassifier(GaussianKernel(sigma=1.5), loss="logistic", n_iter=120, batch_size=100,
                                     block_size=32, random_state=0)
    with dask.config.set(scheduler="synchronous"), pytest.MonkeyPatch.context() as mp:
        mp.setattr(dask_fit, "hold_budget", lambda max_memory: 1500 * 8 * 7)  # windows of 750 rows
        got = clone(est).fit(da.from_array(X, chunks=(250, 6)), da.from_array(y, chunks=250))
    ref = clone(est).fit(X, y)
    assert not np.allclose(got.coef_, ref.coef_)  # another order

    def objective(model):
        f = model.decision_function(X)
        return np.mean(np.logaddexp(0.0, -np.where(y == 1, 1.0, -1.0) * f))

    assert objective(got) == pytest.approx(objective(ref), rel=0.03)
    assert objective(ref) < 0.6  # both learnt (log 2 = 0.69 at f = 0)


def test_unshuffled_batches_and_partial_fit_read_each_chunk_once_per_pass(data, sync, no_gather, monkeypatch):
    X, y_class, y, w = data
    _hold(monkeypatch, 1000)  # nothing held whole: each chunk held while its batches read it
    seen = []
    est = DoublyStochasticRegressor(n_iter=10, shuffle=False, **SMALL)
    got = clone(est).fit(_counted(X, seen), _dask(y), sample_weight=_dask(w))
    # 10 batches of 64 in order: two passes (each chunk held once per pass); the median bandwidth
    # reads every chunk twice (the rows of positive weight counted, then drawn), the first batch's
    # fetch for the "auto" step reads chunk 0
    counts = np.bincount(seen, minlength=5)
    np.testing.assert_array_equal(counts, [2 + 2 + 1, 2 + 2, 2 + 2, 2 + 2, 2 + 2])
    assert_same_model(clone(est).fit(X, y, sample_weight=w), got, DSG_RTOL)
    classes = np.unique(y_class)
    pest = DoublyStochasticClassifier(GaussianKernel(sigma=2.0), loss="logistic", batch_size=32, block_size=16,
                                      class_weight={1: 3.0}, random_state=0)
    ref, part = clone(pest), clone(pest)
    for rows in (slice(0, 150), slice(150, N)):
        ref.partial_fit(X[rows], y_class[rows], classes=classes, sample_weight=w[rows])
        seen.clear()
        part.partial_fit(_counted(X[rows], seen), _dask(y_class[rows]), classes=classes, sample_weight=_dask(w[rows]))
        np.testing.assert_array_equal(np.bincount(seen), 1)  # a stream: each chunk once
    assert_same_model(ref, part, DSG_RTOL)


def test_partial_fit_errors_and_the_regressor_s_median_bandwidth(data, sync, no_gather):
    X, y_class, y, w = data
    classes = np.unique(y_class)
    est = DoublyStochasticClassifier(GaussianKernel(sigma=2.0), loss="logistic", batch_size=32, block_size=16,
                                     random_state=0)
    got = clone(est).partial_fit(_dask(X), _dask(y_class), classes=classes)
    with pytest.raises(ValueError, match=r"y contains labels \[7\] not in classes_"):
        got.partial_fit(_dask(X), _dask(np.where(y_class == 1, 7, 0)))
    with pytest.raises(ValueError, match=r"classes must be passed on the first call to partial_fit"):
        clone(est).partial_fit(_dask(X), _dask(y_class))
    with pytest.raises(ValueError, match=r"class_weight='balanced' .* not available in partial_fit"):
        clone(est).set_params(class_weight="balanced").partial_fit(_dask(X), _dask(y_class), classes=classes)
    reg = DoublyStochasticRegressor(**SMALL)
    ref, got = clone(reg), clone(reg)
    for part in (slice(0, 200), slice(200, N)):
        ref.partial_fit(X[part], y[part], sample_weight=w[part])
        got.partial_fit(_dask(X[part]), _dask(y[part]), sample_weight=_dask(w[part]))
    assert_same_model(ref, got, DSG_RTOL)


def test_rows_at_sums_over_given_rows_where_their_chunks_are(sync):
    """The row executors' ``at`` verb: numpy's sum over the rows of an index, on numpy and over
    dask chunks (each chunk given its rows in the index's order), with chunks held and released."""
    from kernelscale.ops.rows import HostRows, executor

    rng = np.random.default_rng(0)
    A, B = rng.normal(size=(100, 3)), rng.normal(size=100)
    index = rng.permutation(100)[:37]

    def fn(local, a, b, *, scale):
        return (a[local].T @ b[local]) * scale, len(b[local])

    host = HostRows(0).at(A, B).sum(index, fn, scale=2.0)
    at = executor(0, da.from_array(B, chunks=30)).at(da.from_array(A, chunks=(30, 3)), da.from_array(B, chunks=30))
    assert [c for c, _, _ in at.locate(index)] == sorted(set(index // 30))
    at.hold([0, 2])
    assert set(at.held) == {0, 2}
    got = at.sum(index, fn, scale=2.0)
    at.release([0, 2])
    assert not at.held
    np.testing.assert_allclose(got[0], host[0], rtol=1e-13)
    assert got[1] == host[1] == 37
    assert at.sum(slice(10, 20), fn, scale=1.0)[1] == 10


def test_the_chunks_a_worker_holds_beyond_its_share_are_assigned_to_others():
    """The tasks of a sum over rows run where the chunks are, but balanced: the scheduler left 9 of
    16 equal chunks on one worker (as measured), one of them is assigned to the other; a worker
    holding nothing (added after X was persisted) gets its share."""
    from kernelscale.ops.rows import _balanced

    sizes = (10,) * 16
    out = _balanced({c: "a" if c < 9 else "b" for c in range(16)}, sizes, {"a": 1, "b": 1})
    assert [c for c in range(16) if out[c] == "a"] == list(range(8))
    out = _balanced({c: "a" for c in range(6)}, sizes, {"a": 1, "b": 1, "c": 1})
    assert sorted(out.values()) == ["a", "a", "b", "b", "c", "c"] and out[0] == out[1] == "a"
    out = _balanced({0: "a", 1: "b"}, sizes, {"a": 2, "b": 1})  # shares by threads: no move needed
    assert out == {0: "a", 1: "b"}


# -- a distributed client: the iterations computed by the workers ---------------------------------

from dask_support import client, cluster_client  # noqa: E402,F401 (fixtures)

import kernelscale.doubly_stochastic.distributed as distributed_module  # noqa: E402
import kernelscale.doubly_stochastic.fitting as fitting_module  # noqa: E402
from kernelscale.ops.features import FeatureOperator  # noqa: E402

CLUSTER = dict(batch_size=64, block_size=64, random_state=0)


@pytest.fixture
def on_workers(client, monkeypatch):
    """During a fit on dask arrays this process never scores rows (its FeatureOperator.scores
    refuses); returns a function giving the (tasks, rows, tasks scoring ahead) of each worker
    since it started."""
    scores, iterations = FeatureOperator.scores, fitting_module.chunk_iterations

    def refuse(self, X, coef, blocks):
        if refusing:
            raise AssertionError("the client scored rows during a fit on dask arrays")
        return scores(self, X, coef, blocks)

    def iterate(*args, **kwargs):
        refusing.append(True)
        try:
            return iterations(*args, **kwargs)
        finally:
            refusing.clear()

    refusing = []
    monkeypatch.setattr(FeatureOperator, "scores", refuse)
    monkeypatch.setattr(fitting_module, "chunk_iterations", iterate)
    before = client.run(distributed_module._worker_stats)

    def done():
        after = client.run(distributed_module._worker_stats)
        return {w: tuple(after[w].get(key, 0) - before.get(w, {}).get(key, 0) for key in ("tasks", "rows", "ahead"))
                for w in after}

    return done


@pytest.mark.parametrize("est, target, weighted", [
    (DoublyStochasticClassifier(loss="hinge", n_iter=9, **CLUSTER), "three", False),
    (DoublyStochasticClassifier(loss="logistic", n_iter=9, **CLUSTER), "two", True),
    (DoublyStochasticRegressor(n_iter=9, **CLUSTER), "real", True),
    (DoublyStochasticRegressor(solver="preconditioned", n_iter=4, batch_size=128, block_size=64, random_state=0),
     "real", False),
], ids=["hinge", "logistic-weighted", "squared-weighted", "preconditioned"])
def test_the_workers_compute_the_iterations_as_numpy_does(data, on_workers, est, target, weighted):
    X, y_class, y_reg, w = data
    y = {"two": y_class, "three": np.digitize(X[:, 0], [-0.5, 0.5]), "real": y_reg}[target]
    got = clone(est).fit(_dask(X), _dask(y), sample_weight=_dask(w) if weighted else None)
    per_worker = on_workers()
    ref = clone(est).fit(X, y, sample_weight=w if weighted else None)
    assert_same_model(ref, got, DSG_RTOL)
    batches, _ = got._fit_batches(N, est.n_iter, 0)
    assert sum(rows for _, rows, _ in per_worker.values()) == sum(map(len, batches))  # every batch row, on a worker
    # one task per worker holding rows of the batch (its chunks side by side), not one per chunk
    assert sum(tasks for tasks, _, _ in per_worker.values()) <= 2 * est.n_iter + 5, per_worker


def test_a_warm_start_and_partial_fit_on_the_workers(data, on_workers):
    X, y_class, y, w = data
    classes = np.unique(y_class)
    est = DoublyStochasticClassifier(GaussianKernel(sigma=2.0), loss="logistic", class_weight={1: 3.0}, **CLUSTER)
    ref, got = clone(est), clone(est)
    for part in (slice(0, 150), slice(150, N)):
        ref.partial_fit(X[part], y_class[part], classes=classes, sample_weight=w[part])
        got.partial_fit(_dask(X[part]), _dask(y_class[part]), classes=classes, sample_weight=_dask(w[part]))
    assert_same_model(ref, got, DSG_RTOL)
    reg = DoublyStochasticRegressor(n_iter=4, warm_start=True, **CLUSTER)
    a = clone(reg).fit(X, y)
    b = clone(reg).fit(_dask(X), _dask(y))
    a.set_params(n_iter=7).fit(X, y)
    b.set_params(n_iter=7).fit(_dask(X), _dask(y))  # continues with blocks 4..6
    assert_same_model(a, b, DSG_RTOL)
    rows = N + sum(map(len, b._fit_batches(N, 4, 0)[0] + b._fit_batches(N, 3, 4)[0]))  # a warm start draws anew
    assert sum(rows for _, rows, _ in on_workers().values()) == rows


def test_the_next_batch_is_scored_ahead_while_the_client_steps(data, on_workers, monkeypatch):
    """With a distributed client the tasks of iteration t are followed by the next batch's scores
    on the blocks before t, kept on the workers; iteration t + 1 adds block t to them (rescaled
    when the decay was folded into the blocks between the two): numpy's model to rounding."""
    import kernelscale.doubly_stochastic.solver as solver

    X, _, y, _ = data
    monkeypatch.setattr(solver, "_RENORMALIZE_BELOW", 0.999)  # a renormalisation at every iteration
    est = DoublyStochasticRegressor(n_iter=8, alpha=1e-2, step_size=0.5, **CLUSTER)
    got = clone(est).fit(_dask(X), _dask(y))
    per_worker = on_workers()
    assert_same_model(clone(est).fit(X, y), got, DSG_RTOL)
    # iterations 1 to 6 score the next batch ahead (one task per worker holding its rows)
    assert 6 <= sum(ahead for _, _, ahead in per_worker.values()) <= 12, per_worker


@pytest.mark.parametrize("est", [
    DoublyStochasticRegressor(solver="preconditioned", n_iter=4, batch_size=4096, block_size=64, random_state=0),
    DoublyStochasticClassifier(solver="sgd", loss="logistic", n_iter=5, batch_size=4096, block_size=64,
                               random_state=0),
], ids=["preconditioned", "sgd"])
def test_a_task_with_more_rows_than_its_budget_holds_features_for_computes_them_in_pieces(client, est):
    """A worker's task holds its rows of a mini-batch, their scores and gradients, but the new
    block's features (and their workspace) only for a piece of them at a time when its budget is
    small (distributed.piece_rows): 1 MB here, pieces of about 1000 of the about 2048 rows a worker has
    of a batch of 4096, in the iteration and in the next batch's scores computed ahead. The model
    is numpy's, whose iterations hold the whole batch's features."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(8192, 5))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=X.shape[0])
    if is_classifier(est):
        y = (y > 0).astype(int)
    before = client.run(distributed_module._worker_stats)
    got = clone(est).set_params(max_memory="1MB").fit(da.from_array(X, chunks=1024), da.from_array(y, chunks=1024))
    after = client.run(distributed_module._worker_stats)
    pieces = sum(after[w].get("pieces", 0) - before.get(w, {}).get("pieces", 0) for w in after)
    assert pieces >= 2 * est.n_iter  # every iteration, on both workers, in two pieces at least
    assert_same_model(clone(est).fit(X, y), got, DSG_RTOL)
