"""Dask arrays as estimator input (kernelscale.dask.dispatch, at the estimator boundary).

Every estimator of the registry, on a dask array chunked by rows, fits the model numpy fits and
predicts lazily, chunk by chunk, what numpy predicts (to 1e-8 relative in float64); on the
synchronous scheduler for all of them, on a two-process LocalCluster for a few. The estimators of
``kernelscale.dask.fit.DISTRIBUTED`` fit over the row chunks (one task per chunk per pass, sums
reduced by a tree, nothing n-sized gathered): their models equal numpy's up to the order of the
sums (1e-8 relative); the others gather the arrays and fit numpy's model exactly. Bad dask input gets an error naming the argument and the fix; inside a dask worker the
default memory budget is the worker's memory limit per thread.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.pipeline import make_pipeline

import kernelscale
from kernelscale import GeneralizedLeastSquaresClassifier, registry
from kernelscale.ops.memory import DEFAULT_MEMORY_FRACTION, available_memory, dask_worker_memory, default_memory_budget

from kernelscale.dask.fit import DISTRIBUTED, supports

from dask_support import (  # noqa: F401 (fixtures)
    DISTRIBUTED_RTOL, N, ROWS, WORKER_MEMORY, _configs, _dask, _refuse_gather, _target, assert_same_model,
    assert_same_predictions, client, cluster_client, da, dask, data, model_rtol, no_gather, sync,
)

MAPPED = ("predict", "decision_function", "predict_proba", "predict_log_proba", "transform")


@pytest.mark.parametrize("entry", registry.ESTIMATORS, ids=lambda e: e.name)
def test_fit_and_predict_on_dask_equal_numpy(entry, data, sync):
    X, _, _, w = data
    y = _target(entry, data)
    Xd = _dask(X, cols=3)  # columns in two chunks: rechunked to one
    for est in map(_few_iterations, _configs(entry.cls)):
        if y is None:
            ref, got = clone(est).fit(X), clone(est).fit(Xd)
        else:
            ref = clone(est).fit(X, y, sample_weight=w)
            got = clone(est).fit(Xd, _dask(y), sample_weight=_dask(w))
        assert_same_model(ref, got, model_rtol(est))
        methods = [m for m in MAPPED if hasattr(ref, m)]
        assert methods
        for method in methods:
            expected = getattr(ref, method)(X)
            assert_same_predictions(expected, getattr(got, method)(Xd), Xd, est)
            with dask.config.set(scheduler="threads", num_workers=2):  # chunks at once on one shared model
                assert_same_predictions(expected, getattr(got, method)(Xd), Xd, est)
        if entry.kind == "transformer":  # TransformerMixin's fit_transform: a gathering fit, a lazy transform
            assert_same_predictions(clone(est).fit_transform(X), clone(est).fit_transform(Xd), Xd, est)
        if hasattr(ref, "score") and y is not None:
            rel = max(model_rtol(est) or 0.0, 1e-8)  # a distributed float32 fit: FLOAT32_RTOL
            expected = ref.score(X, y, sample_weight=w)
            assert got.score(Xd, _dask(y), sample_weight=_dask(w)) == pytest.approx(expected, rel=rel)
            assert got.score(Xd, y) == pytest.approx(ref.score(X, y), rel=rel)  # a numpy y with a dask X


@pytest.mark.parametrize("entry", [e for e in registry.ESTIMATORS if hasattr(e.cls, "partial_fit")],
                         ids=lambda e: e.name)
def test_partial_fit_on_dask_equals_numpy(entry, data, sync):
    X, y_class, _, w = data
    y = _target(entry, data)
    est = _configs(entry.cls)[0]
    extra = {"classes": np.unique(y_class)} if entry.kind == "classifier" else {}
    ref, got = clone(est), clone(est)
    for part in (slice(0, 140), slice(140, N)):
        ref.partial_fit(X[part], y[part], sample_weight=w[part], **extra)
        got.partial_fit(_dask(X[part]), _dask(y[part]), sample_weight=_dask(w[part]), **extra)
    # a distributed partial_fit (the doubly stochastic ones) sums over row chunks: numpy's model to rounding
    assert_same_model(ref, got, DISTRIBUTED_RTOL if supports(est, "partial_fit") else None)
    np.testing.assert_allclose(got.predict(_dask(X)).compute(), ref.predict(X), rtol=1e-8)


def test_multioutput_targets_and_float32_input(data, sync):
    X, _, y, _ = data
    Y = np.column_stack([y, -2 * y])
    ref = kernelscale.ExactKernelRidge(alpha=0.5).fit(X, Y)
    got = kernelscale.ExactKernelRidge(alpha=0.5).fit(_dask(X), _dask(Y))
    assert_same_model(ref, got)
    lazy = got.predict(_dask(X))
    assert lazy.shape == (N, 2) and lazy.chunks == (_dask(X).chunks[0], (2,))
    np.testing.assert_allclose(lazy.compute(), ref.predict(X), rtol=1e-8)
    X32 = X.astype(np.float32)
    ref32 = kernelscale.ExactKernelRidge(alpha=0.5).fit(X32, Y.astype(np.float32))
    got32 = kernelscale.ExactKernelRidge(alpha=0.5).fit(_dask(X32), _dask(Y.astype(np.float32)))
    assert_same_model(ref32, got32)
    lazy = got32.predict(_dask(X32))
    assert lazy.dtype == np.float32 == ref32.predict(X32).dtype  # float32 in, float32 out, as numpy
    np.testing.assert_allclose(lazy.compute(), ref32.predict(X32), rtol=1e-5, atol=1e-5)


def test_a_pipeline_of_kernelscale_steps_takes_dask_arrays(data, sync):
    X, _, y, _ = data
    pipe = make_pipeline(kernelscale.RandomFourierFeatures(n_components=32, random_state=0),
                         kernelscale.ExactKernelRidge(kernel="linear", alpha=1.0))
    ref, got = clone(pipe).fit(X, y), clone(pipe).fit(_dask(X), _dask(y))
    assert_same_model(ref[-1], got[-1])
    assert_same_predictions(ref.predict(X), got.predict(_dask(X)), _dask(X), ref)


def test_predictions_are_lazy_one_task_per_row_chunk_and_the_state_shipped_once(data, sync):
    X, y, _, _ = data
    est = kernelscale.DoublyStochasticClassifier("gaussian", loss="logistic", n_iter=10, batch_size=64, block_size=16,
                                                 random_state=0).fit(X, y)
    calls = []

    def load(block):  # the chunks of X, counted when they are computed
        calls.append(block.shape[0])
        return block

    Xd = _dask(X).map_blocks(load, dtype=X.dtype, meta=np.empty((0, 0)))
    lazy = est.predict_proba(Xd)
    assert calls == [] and isinstance(lazy, da.Array)  # nothing computed yet
    graph = dict(lazy.__dask_graph__())
    assert len([k for k in graph if isinstance(k, tuple) and k[0] == lazy.name]) == len(Xd.chunks[0])
    states = [k for k in graph if isinstance(k, str) and k.startswith("kernelscale-DoublyStochasticClassifier")]
    assert len(states) == 1  # one key with the fitted estimator, every chunk task depends on it
    expected = est.predict_proba(X)
    est.set_params(random_state=1).fit(X[::-1], y[::-1])  # a refit does not change the graph's model
    np.testing.assert_allclose(lazy.compute(), expected, rtol=1e-8)
    assert sorted(calls) == sorted(Xd.chunks[0])


def test_import_does_not_import_dask():
    code = ("import sys, numpy as np, kernelscale\n"
            "X = np.random.default_rng(0).normal(size=(40, 3))\n"
            "kernelscale.ExactKernelRidge().fit(X, X[:, 0]).predict(X)\n"
            "assert not {'dask', 'distributed'} & set(sys.modules), sorted(m for m in sys.modules if 'dask' in m)\n")
    env = dict(os.environ, PYTHONPATH=str(Path(kernelscale.__file__).parents[1]))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


# -- bad input -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def fitted(data):
    X, _, y, _ = data
    return kernelscale.ExactKernelRidge(alpha=1.0).fit(X, y)


def test_unknown_chunk_sizes_are_refused_naming_compute_chunk_sizes(data, fitted, sync):
    X, _, y, _ = data
    Xd = _dask(X)
    masked = Xd[Xd[:, 0] > 0]
    assert np.isnan(masked.shape[0])
    with pytest.raises(ValueError, match=r"X is a dask array with unknown chunk sizes.*X\.compute_chunk_sizes\(\)"):
        fitted.predict(masked)
    with pytest.raises(ValueError, match=r"X is a dask array with unknown chunk sizes"):
        kernelscale.ExactKernelRidge().fit(masked, y[: 10])
    yd = _dask(y)
    with pytest.raises(ValueError, match=r"y is a dask array with unknown chunk sizes.*y\.compute_chunk_sizes"):
        kernelscale.ExactKernelRidge().fit(X, yd[yd > 0])
    with pytest.raises(ValueError, match=r"y is a dask array with unknown chunk sizes"):
        kernelscale.ExactKernelRidge().fit(Xd, yd[yd > 0])
    masked.compute_chunk_sizes()  # the fix the message names
    np.testing.assert_allclose(fitted.predict(masked).compute(), fitted.predict(X[X[:, 0] > 0]), rtol=1e-8)


def test_nan_in_one_chunk_is_reported_with_the_chunk_index(data, fitted, sync):
    X, _, y, _ = data
    bad = X.copy()
    bad[150, 2] = np.nan  # row chunk 2: rows 140 to 209
    lazy = fitted.predict(_dask(bad))  # found when the chunk is computed
    with pytest.raises(ValueError, match=r"X contains NaN or infinity in row chunk 2 \(rows 140 to 209\)"):
        lazy.compute()
    with pytest.raises(ValueError, match=r"X contains NaN or infinity in row chunk 2 \(rows 140 to 209\)"):
        kernelscale.ExactKernelRidge().fit(_dask(bad), _dask(y))
    y_bad = y.copy()
    y_bad[10] = np.inf
    with pytest.raises(ValueError, match=r"y contains NaN or infinity in row chunk 0 \(rows 0 to 69\)"):
        kernelscale.ExactKernelRidge().fit(_dask(X), _dask(y_bad))


def test_misaligned_row_chunks_are_refused_naming_the_argument(data, fitted, sync):
    X, _, y, w = data
    Xd = _dask(X)
    y50 = da.from_array(y, chunks=50)
    with pytest.raises(ValueError, match=r"row chunks of y .* do not match those of X.*y\.rechunk\(\{0: X\.chunks\[0\]\}\)"):
        kernelscale.ExactKernelRidge().fit(Xd, y50)
    with pytest.raises(ValueError, match=r"row chunks of sample_weight"):
        kernelscale.ExactKernelRidge().fit(Xd, _dask(y), sample_weight=da.from_array(w, chunks=50))
    with pytest.raises(ValueError, match=r"row chunks of y"):
        fitted.score(Xd, y50)
    with pytest.raises(ValueError, match=r"y has 299 rows but X has 300"):
        fitted.score(Xd, _dask(y[:-1]))
    ref = kernelscale.ExactKernelRidge().fit(X, y)
    assert_same_model(ref, kernelscale.ExactKernelRidge().fit(Xd, y50.rechunk({0: Xd.chunks[0]})))  # the fix


def test_other_bad_dask_input(data, fitted, sync):
    X, _, y, _ = data
    with pytest.raises(NotFittedError):  # at once, not when computing
        kernelscale.ExactKernelRidge().predict(_dask(X))
    with pytest.raises(ValueError, match=r"X has 4 features, but ExactKernelRidge is expecting 5"):
        fitted.predict(_dask(X[:, :4]))
    with pytest.raises(ValueError, match=r"X must be a 2-d dask array.*reshape"):
        fitted.predict(da.from_array(X[:, 0], chunks=ROWS))


def test_a_gathering_fit_computes_row_chunks_not_one_concatenation(data, sync, monkeypatch):
    """dask.compute of the whole array concatenates its chunks in one task, on a worker of a
    distributed cluster (the whole array inside one memory_limit, which restarted workers with 250000
    virtual digits): the gather computes a few single chunks at a time and fills its own array."""
    from kernelscale.dask import dispatch

    X, y, _, _ = data
    computed = []
    real = dask.compute

    def recording(*args, **kwargs):
        computed.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(dask, "compute", recording)
    got = kernelscale.ExactKernelRidge().fit(_dask(X), _dask(y.astype(float)))
    monkeypatch.setattr(dask, "compute", real)
    ref = kernelscale.ExactKernelRidge().fit(X, y.astype(float))
    np.testing.assert_allclose(got.dual_coef_, ref.dual_coef_)
    chunks = -(-X.shape[0] // ROWS)
    assert sum(len(args) for args in computed) == 2 * chunks  # each chunk of X and of y once
    assert all(1 <= len(args) <= dispatch.GATHER_CHUNKS for args in computed)
    assert all(type(arg).__name__ == "Delayed" for args in computed for arg in args)  # single chunks


def test_a_fit_beyond_the_memory_budget_is_refused_saying_what_to_do(data, sync):
    X, y, _, _ = data
    est = kernelscale.RegularizedKernelClassifier(max_memory="8KB")
    with pytest.raises(ValueError, match=r"RegularizedKernelClassifier\.fit on dask input gathers X, y into this "
                                         r"process: .*memory budget.*RegularizedKernelClassifier fits over dask row "
                                         r"chunks only with solver='fixed_point' .*; the estimators whose fit is "
                                         r"distributed .* are "
                                         r"GeneralizedLeastSquaresClassifier, CalibratedLeastSquaresClassifier, "
                                         r"StagewiseClassifier, StagewiseRegressor, SLKLRegressor, SLKLClassifier, "
                                         r"RegularizedKernelClassifier, RegularizedKernelRegressor, LSSVMClassifier, "
                                         r"LSSVMRegressor, DoublyStochasticClassifier, DoublyStochasticRegressor "
                                         r".*numpy array or a numpy\.memmap"):
        est.fit(_dask(X), _dask(y))
    assert not hasattr(est, "classes_")
    # the same budget is enough for a distributed fit: one row chunk at a time
    ref = kernelscale.GeneralizedLeastSquaresClassifier(max_iter=20).fit(X, y)
    got = kernelscale.GeneralizedLeastSquaresClassifier(max_iter=20, max_memory="24KB").fit(_dask(X), _dask(y))
    assert_same_model(ref, got, DISTRIBUTED_RTOL)
    with pytest.raises(ValueError, match=r"memory"):  # numpy's fit holds all 300 rows at once
        kernelscale.GeneralizedLeastSquaresClassifier(max_iter=20, max_memory="24KB").fit(X, y)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_on_one_machine_data_beyond_the_budget_is_read_again_by_each_pass_not_kept(data, sync, monkeypatch):
    X, y, _, _ = data
    persisted = []
    real = dask.persist
    monkeypatch.setattr(dask, "persist", lambda *a, **kw: persisted.extend(x.shape for x in a if x is not None)
                        or real(*a, **kw))
    ref = kernelscale.GeneralizedLeastSquaresClassifier(max_iter=5).fit(X, y)
    small = kernelscale.GeneralizedLeastSquaresClassifier(max_iter=5, max_memory="16KB").fit(_dask(X), _dask(y))
    assert X.shape not in persisted  # 12 KB of X and 4.8 KB of one-hot targets exceed 16 KB: not held
    assert_same_model(ref, small, DISTRIBUTED_RTOL)
    kept = kernelscale.GeneralizedLeastSquaresClassifier(max_iter=5).fit(_dask(X), _dask(y))
    assert X.shape in persisted  # within the default budget: held for the passes
    assert_same_model(ref, kept, DISTRIBUTED_RTOL)


# -- memory budget inside a dask worker ----------------------------------------------------------

def test_outside_a_worker_the_budget_is_the_hosts():
    pytest.importorskip("distributed")
    assert dask_worker_memory() is None
    assert 0 < available_memory()


# -- a two-process LocalCluster ------------------------------------------------------------------


def test_worker_budget_is_the_memory_limit_per_thread(client):
    share = client.submit(dask_worker_memory, pure=False).result()
    assert share == WORKER_MEMORY  # one thread per worker
    assert client.submit(default_memory_budget, pure=False).result() == int(DEFAULT_MEMORY_FRACTION * WORKER_MEMORY)


@pytest.mark.parametrize("entry", registry.ESTIMATORS, ids=lambda e: e.name)
def test_fit_and_predict_on_a_local_cluster_equal_numpy(client, data, entry):
    """Every estimator (its first test configuration) on two worker processes: the model numpy
    fits (gathered from the workers, or fitted on them) and numpy's predictions, chunk by chunk."""
    X, _, _, w = data
    y = _target(entry, data)
    est = _few_iterations(_configs(entry.cls)[0])
    ref = clone(est).fit(X) if y is None else clone(est).fit(X, y, sample_weight=w)
    got = clone(est).fit(_dask(X)) if y is None else clone(est).fit(_dask(X), _dask(y), sample_weight=_dask(w))
    assert_same_model(ref, got, model_rtol(est))
    method = next(m for m in ("predict_proba", "transform", "predict") if hasattr(ref, m))
    assert_same_predictions(getattr(ref, method)(X), getattr(got, method)(_dask(X)), _dask(X), est)


def test_nan_chunk_on_a_local_cluster(client, data, fitted):
    X = data[0].copy()
    X[290, 0] = np.inf  # row chunk 4: rows 280 to 299
    with pytest.raises(ValueError, match=r"X contains NaN or infinity in row chunk 4 \(rows 280 to 299\)"):
        fitted.predict(_dask(X)).compute()


def test_a_persisted_x_is_checked_once_and_read_as_it_is(client, data):
    """A dense X persisted in the fit's dtype already: one pass checks it, and every pass reads the
    persisted chunks, not a converted copy of them (which would be recomputed by every pass when
    the workers cannot keep a second X). A bad chunk is named as in the pass of any other X."""
    import distributed

    X, y, _, _ = data
    est = GeneralizedLeastSquaresClassifier(max_iter=3)
    Xd = client.persist(_dask(X))
    with distributed.get_task_stream(client) as stream:
        got = clone(est).fit(Xd, _dask(y))
    keys = [str(task["key"]) for task in stream.data]
    assert sum("_checked_chunk" in key for key in keys) == len(Xd.chunks[0])
    assert not any("float_chunk" in key for key in keys), "X's chunks were converted"
    assert_same_model(clone(est).fit(X, y), got, DISTRIBUTED_RTOL)
    bad = X.copy()
    bad[290, 0] = np.inf  # row chunk 4: rows 280 to 299
    with pytest.raises(ValueError, match=r"X contains NaN or infinity in row chunk 4 \(rows 280 to 299\)"):
        clone(est).fit(client.persist(_dask(bad)), _dask(y))


def test_a_persisted_maps_large_arguments_are_one_key_not_a_copy_per_task(client):
    """A worker keeps the arguments of a task as long as it holds the task's result: a persisted
    map's client-side arguments given inline stay on the workers once per row chunk (a PCA's
    components, 472 times at 10M rows). Arguments of SHARED_ARGUMENT_BYTES or more go as one key,
    which the held tasks name instead; small ones stay inline (no extra key per pass)."""
    import distributed

    from kernelscale.ops import rows as R

    X = client.persist(da.random.default_rng(0).random((N, 8), chunks=(ROWS, 8)))
    distributed.wait(X)
    ex = R.DaskRows(X.chunks[0], 2**26)
    big = np.random.default_rng(1).random((8, R.SHARED_ARGUMENT_BYTES // 64 + 1))
    small = big[:, :4]

    def held_arguments(dask_worker, prefix, data):
        """Per held task of the map: whether the bytes ``data`` are in its arguments."""
        import pickle

        return [data in pickle.dumps(state.run_spec) for key, state in dask_worker.state.tasks.items()
                if prefix in str(key) and state.state == "memory"]

    for W, inline in ((big, False), (small, True)):
        Z = ex.map(_project, X, W=W, width=W.shape[1], dtype=np.float64)
        distributed.wait(Z)
        held = [f for found in client.run(held_arguments, prefix="kernelscale-_project", data=W.tobytes()).values()
                for f in found]
        assert len(held) == len(X.chunks[0])
        assert all(f == inline for f in held), held
        np.testing.assert_allclose(Z.compute(), X.compute() @ W, rtol=1e-12)
        del Z


def _project(Xc, W):
    return Xc @ W


@pytest.mark.parametrize("split", [8, 2])
def test_a_sum_over_persisted_chunks_runs_a_task_per_worker_thread_and_is_the_trees(client, data, split):
    """Over row chunks persisted on a distributed client, a sum (after the first of its kind,
    which measures its value) runs one task per worker thread, not one per chunk, and its value is
    the tree's bit for bit, at any width of the tree's nodes: the chunks' results come back apart
    and are merged in the tree's order, so a concatenation keeps the row order. Over lazy chunks
    (a task reading several would hold them all): one task per chunk; a task's chunks take at most
    a quarter of its budget."""
    import distributed

    from kernelscale.ops import rows as R

    X, _, _, w = data
    # one value a chunk, of magnitudes whose sum depends on the order of the additions
    A = np.zeros((N, 1))
    A[::ROWS, 0] = [1e17, 1.0, -1e17, 3.0, 5.0]
    wd = da.from_array(w, chunks=ROWS)
    held = client.persist([_dask(A), da.ones(N, chunks=ROWS), wd > 1.0])
    distributed.wait(held)
    ex = R.DaskRows(held[0].chunks[0], 2**26)

    def tasks_of(call):
        with distributed.get_task_stream(client) as stream:
            value = call()
        return value, sum("kernelscale-sum" in str(task["key"]) for task in stream.data)

    token = R.SPLIT.set(split)
    try:
        tree = ex.sum_parts(R.weighted_sum, *held[:2]).compute()
        ex.sum(R.weighted_sum, *held[:2])  # the first of its kind
        got, tasks = tasks_of(lambda: ex.sum(R.weighted_sum, *held[:2]))
        assert tasks == sum(client.nthreads().values()) < len(ex.chunks)
        np.testing.assert_array_equal(got, tree)
        assert got[0] == (5.0 if split == 2 else 8.0)  # ((1e17 + 1) + (-1e17 + 3)) + 5, or from the left
        ex.reduce(R._count, held[2], combine=R._concatenate)
        counts, tasks = tasks_of(lambda: ex.reduce(R._count, held[2], combine=R._concatenate))
        assert tasks == sum(client.nthreads().values())
        assert counts == tuple(int(np.count_nonzero(w[s : s + ROWS] > 1.0)) for s in range(0, N, ROWS))
        got, tasks = tasks_of(lambda: ex.sum(R.weighted_sum, _dask(X), wd))
        assert tasks == len(ex.chunks)
        np.testing.assert_allclose(got, w @ X, rtol=1e-12)
        # a task's chunks within a quarter of its budget (a spilling worker loads them all): here one
        small = R.DaskRows(ex.chunks, 4 * ROWS * 16)
        got, tasks = tasks_of(lambda: small.sum(R.weighted_sum, *held[:2]))
        assert tasks == len(ex.chunks)
        np.testing.assert_array_equal(got, tree)
    finally:
        R.SPLIT.reset(token)


def test_uniform_weights_come_from_the_chunk_sizes_not_from_x(sync):
    """Without sample_weight the weights of a distributed fit need X's chunk sizes only: computing
    X for them (a generated X, such as virtual digits) costs a pass, and held the chunks that the
    first pass over X read again (spilled to disk on a 10M-row fit)."""
    from kernelscale.ops.rows import DaskRows, row_weights

    def never(block):
        raise AssertionError("X was computed for its weights")

    X = da.ones((N, 5), chunks=(ROWS, 5)).map_blocks(never, dtype=np.float64)
    w = row_weights(DaskRows(X.chunks[0], 2**20), X, None, N)
    assert w.chunks == (X.chunks[0],)
    np.testing.assert_array_equal(w.compute(), np.full(N, 1.0 / N))


def test_string_class_labels_in_a_dask_y(data, sync):
    X, y, _, _ = data
    labels = np.array(["neg", "pos"])[y]
    ref = kernelscale.LSSVMClassifier(random_state=0).fit(X, labels)
    got = kernelscale.LSSVMClassifier(random_state=0).fit(_dask(X), _dask(labels))
    assert_same_model(ref, got)
    assert_same_predictions(ref.predict(X), got.predict(_dask(X)), _dask(X), ref)
    assert got.score(_dask(X), _dask(labels)) == ref.score(X, labels)


# -- distributed fits (kernelscale.dask.fit) ----------------------------------------------------

def _distributed_configs():
    """(estimator, target kind) for every configuration of the distributed estimators that fits
    over the chunks (``_dask_fit.supports``; the others gather, as every other estimator)."""
    out = []
    for entry in registry.ESTIMATORS:
        if entry.cls.__name__ in DISTRIBUTED:
            out += [(est, entry.kind) for est in _configs(entry.cls) if supports(est)]
    return out



def test_distributed_estimators_are_the_row_sum_and_mini_batch_estimators():
    names = {e.cls.__name__ for e in registry.ESTIMATORS}
    assert set(DISTRIBUTED) <= names
    assert set(DISTRIBUTED) == {"GeneralizedLeastSquaresClassifier", "CalibratedLeastSquaresClassifier",
                                "StagewiseClassifier", "StagewiseRegressor", "SLKLRegressor", "SLKLClassifier",
                                "RegularizedKernelClassifier", "RegularizedKernelRegressor",
                                "LSSVMClassifier", "LSSVMRegressor", "DoublyStochasticClassifier",
                                "DoublyStochasticRegressor"}
    # the configurations of tests/estimator_list.py that fit over chunks (RegularizedKernelRegressor's
    # fixed-point solver: tests/test_dask_slkl_fixed_point.py)
    assert {type(est).__name__ for est, _ in _distributed_configs()} == set(DISTRIBUTED) - {
        "RegularizedKernelRegressor"}


def test_row_executors_compress_rows_and_the_kernel_product_over_emptied_chunks_equal_numpy(sync):
    """``compress`` (the rows of positive weight) on dask chunks equals numpy's boolean indexing
    and HostRows', with a chunk emptied; ``kernel_matvec`` over the new chunks equals K V."""
    from kernelscale import GaussianKernel
    from kernelscale.ops.kernel import kernel_rows
    from kernelscale.ops.rows import HostRows, executor

    rng = np.random.default_rng(0)
    X, V, w = rng.standard_normal((60, 3)), rng.standard_normal((60, 2)), rng.random(60)
    w[:20] = w[45:50] = 0.0  # the first chunk of 20 rows loses all of them, the third five
    keep = w > 0
    Xd, Vd, wd = (da.from_array(a, chunks=(20,) + a.shape[1:]) for a in (X, V, w))
    ex = executor(2**26, Xd)
    got = ex.compress(wd > 0, Xd, Vd, None, wd)
    host = HostRows(2**26).compress(keep, X, V, None, w)
    assert got[2] is None and host[2] is None
    assert all(a.chunks[0] == (0, 20, 15) for a in (got[0], got[1], got[3]))
    for g, h, a in zip(got, host, (X, V, None, w)):
        if a is not None:
            np.testing.assert_array_equal(g.compute(), a[keep])
            np.testing.assert_array_equal(h, a[keep])
    every = da.ones(60, chunks=20, dtype=bool)
    assert ex.compress(every, Xd)[0] is Xd and HostRows(2**26).compress(np.ones(60, bool), X)[0] is X
    kernel, Xk = GaussianKernel(1.5), X[keep]
    K = kernel_rows(kernel, Xk, np.arange(Xk.shape[0]))
    rows = executor(2**26, got[0])
    np.testing.assert_allclose(rows.kernel_matvec(kernel, got[0], got[1]).compute(), K @ V[keep], rtol=1e-12,
                               atol=1e-12)
    np.testing.assert_allclose(rows.kernel_matvec(kernel, got[0], got[3]).compute(), K @ w[keep], rtol=1e-12,
                               atol=1e-12)


@pytest.mark.parametrize("size", [1, 2, 5])
def test_the_kernel_product_in_groups_of_column_chunks_equals_numpy(sync, size):
    """Without kept kernel blocks, K(X, X) V is one task per row chunk and group of ``size``
    column chunks (as many as half of the budget holds; the products take what is left), the
    groups added by a tree of two: each result equals K V, and the task count is chunks x groups."""
    from kernelscale import GaussianKernel
    from kernelscale.ops import rows as rows_module
    from kernelscale.ops.kernel import kernel_rows

    rng = np.random.default_rng(1)
    X, V = rng.standard_normal((4000, 50)), rng.standard_normal((4000, 2))
    chunk_bytes = 800 * (50 + 2) * 8  # above the products' own floor, so the budget sets the group
    ex = rows_module.DaskRows((800,) * 5, 2 * chunk_bytes * (size - 1) + chunk_bytes + 300_000)
    kernel = GaussianKernel(6.0)
    token = rows_module.SPLIT.set(2)
    try:
        Z = ex.kernel_matvec(kernel, da.from_array(X, chunks=(800, 50)), da.from_array(V, chunks=(800, 2)),
                             persist=False)
    finally:
        rows_module.SPLIT.reset(token)
    tasks = [k for k in dict(Z.__dask_graph__()) if isinstance(k, str) and k.startswith("kernelscale-kernel-matvec-")
             and "-sum-" not in k]
    assert len(tasks) == 5 * -(-5 // size)
    np.testing.assert_allclose(Z.compute(), kernel_rows(kernel, X, np.arange(4000)) @ V, rtol=1e-10, atol=1e-10)


def _few_iterations(est, n_iter=5, max_iter=200):
    """``est`` with at most ``n_iter`` (LS-SVM, DSG) or ``max_iter`` (fixed point) iterations: each
    is a few scheduler round trips, and equality after a few iterations is equality of the solver
    (the iterative solvers' own dask tests run them to convergence)."""
    params = est.get_params()
    if isinstance(params.get("n_iter"), int):
        est.set_params(n_iter=min(est.n_iter, n_iter))
    if params.get("solver") == "fixed_point":
        est.set_params(max_iter=min(est.max_iter, max_iter) if isinstance(est.max_iter, int) else max_iter)
    return est


def test_distributed_fits_never_gather(data, sync, monkeypatch):
    X, y_class, y_reg, w = data
    Xd = _dask(X, cols=3)
    _refuse_gather(monkeypatch)
    for i, (est, kind) in enumerate(_distributed_configs()):
        est = _few_iterations(est, n_iter=10)
        y = y_class if kind == "classifier" else y_reg
        for kwargs in ({"sample_weight": _dask(w)} if i % 2 else {},):  # every other configuration weighted
            ref = clone(est).fit(X, y, **{k: w for k in kwargs})
            got = clone(est).fit(Xd, _dask(y), **kwargs)
            rtol = model_rtol(est)  # float32: FLOAT32_RTOL
            assert_same_model(ref, got, rtol)
            method = next(m for m in ("predict_proba", "decision_function", "predict") if hasattr(got, m))
            monkeypatch.undo()  # the predictions compute their chunks
            np.testing.assert_allclose(getattr(got, method)(Xd).compute(), getattr(ref, method)(X), rtol=rtol,
                                       atol=rtol * np.abs(getattr(ref, method)(X)).max())
            _refuse_gather(monkeypatch)


@pytest.mark.parametrize("options", [
    {"class_weight": "balanced"},
    {"class_weight": {0: 2.0, 1: 0.5}},
])
def test_distributed_class_weights_and_float32(data, sync, no_gather, options):
    X, y, _, w = data
    for est in (kernelscale.GeneralizedLeastSquaresClassifier(max_iter=20, **options),
                kernelscale.StagewiseClassifier(block_size=16, n_stages=2, pca_components=None, random_state=0,
                                                update="calibrated", **options)):
        ref = clone(est).fit(X, y, sample_weight=w)
        got = clone(est).fit(_dask(X), _dask(y), sample_weight=_dask(w))
        assert_same_model(ref, got, DISTRIBUTED_RTOL)
    X32 = X.astype(np.float32)
    # (X has two collinear columns: a float32 Sigma needs a ridge above rounding)
    ref = kernelscale.GeneralizedLeastSquaresClassifier(alpha=1e-3, max_iter=20).fit(X32, y)
    got = kernelscale.GeneralizedLeastSquaresClassifier(alpha=1e-3, max_iter=20).fit(_dask(X32), _dask(y))
    assert got.coef_.dtype == np.float32
    assert_same_model(ref, got, 1e-4)  # float32 sums in another order


def test_distributed_stagewise_with_pca_median_trick_and_warm_start(data, sync, no_gather):
    X, _, y, w = data
    w = w.copy()
    w[:40] = 0.0  # rows of weight zero are left out of the median trick, as on numpy
    big = np.vstack([X] * 4)  # 1200 rows: the median trick draws 1000 of them
    big_y, big_w = np.concatenate([y] * 4), np.concatenate([w] * 4)
    est = kernelscale.StagewiseRegressor(block_size=8, n_stages=2, pca_components=3, random_state=0)
    ref = clone(est).fit(big, big_y, sample_weight=big_w)
    got = clone(est).fit(_dask(big), _dask(big_y), sample_weight=_dask(big_w))
    assert got.kernel_.sigma == pytest.approx(ref.kernel_.sigma, rel=1e-12)
    assert_same_model(ref, got, DISTRIBUTED_RTOL)
    ref.set_params(warm_start=True, n_stages=4).fit(big, big_y, sample_weight=big_w)
    got.set_params(warm_start=True, n_stages=4).fit(_dask(big), _dask(big_y), sample_weight=_dask(big_w))
    assert_same_model(ref, got, DISTRIBUTED_RTOL)


@pytest.mark.parametrize("update", ["linear", "calibrated"])
def test_distributed_stages_in_pieces_of_rows_equal_numpy(data, sync, monkeypatch, update):
    """A task regenerates its chunk's features in pieces of PIECE_ROWS rows: with pieces of 16
    rows (several per chunk, the last one shorter) the model is numpy's, with sample weights."""
    from kernelscale.least_squares import stagewise_solver

    monkeypatch.setattr(stagewise_solver, "PIECE_ROWS", 16)
    X, y, _, w = data
    est = kernelscale.StagewiseClassifier(block_size=16, n_stages=3, update=update, pca_components=None,
                                          random_state=0)
    ref = clone(est).fit(X, y, sample_weight=w)
    got = clone(est).fit(_dask(X), _dask(y), sample_weight=_dask(w))
    assert max(_dask(X).chunks[0]) > 2 * 16
    assert_same_model(ref, got, DISTRIBUTED_RTOL)


def _graph_sizes(monkeypatch):
    """Record, for every pass over rows, (verb, (function, number of row arrays), keys of its graph,
    tasks running the function) for sums; for per-row results the keys and the chunks ("map"
    when persisted, "lazy" when left to be computed by the passes that read it)."""
    from kernelscale.ops import rows

    record = []
    original_sum, original_map = rows.DaskRows.sum_parts, rows.DaskRows.map

    def sum_parts(self, fn, *arrays, **small):
        out = original_sum(self, fn, *arrays, **small)
        graph = dict(out.__dask_graph__())
        tasks = sum(1 for k in graph if str(k).startswith("kernelscale-sum-"))
        record.append(("sum", (fn.__name__, sum(a is not None for a in arrays)), len(graph), tasks))
        return out

    def map_(self, fn, *arrays, **kwargs):
        out = original_map(self, fn, *arrays, **kwargs)
        verb = "map" if kwargs.get("persist", True) else "lazy"
        record.append((verb, (fn.__name__, sum(a is not None for a in arrays)), len(dict(out.__dask_graph__())),
                       len(self.chunks)))
        return out

    monkeypatch.setattr(rows.DaskRows, "sum_parts", sum_parts)
    monkeypatch.setattr(rows.DaskRows, "map", map_)
    return record


@pytest.mark.parametrize("est", [
    kernelscale.GeneralizedLeastSquaresClassifier(max_iter=30, tol=0),
    kernelscale.CalibratedLeastSquaresClassifier(max_iter=6, tol=0),
    kernelscale.StagewiseClassifier(block_size=16, n_stages=6, pca_components=None, random_state=0),
], ids=lambda e: type(e).__name__)
def test_one_task_per_row_chunk_and_the_graph_does_not_grow(data, sync, monkeypatch, est):
    X, y, _, _ = data
    record = _graph_sizes(monkeypatch)
    Xd = _dask(X)
    chunks = len(Xd.chunks[0])
    est = clone(est).fit(Xd, _dask(y))
    assert est.n_iter_ == (30 if isinstance(est, kernelscale.GeneralizedLeastSquaresClassifier) else 6)
    by_function = {}
    for verb, name, keys, tasks in record:
        if verb == "map":
            assert keys == chunks, f"persisted {name} holds {keys} keys, not one per row chunk"
        elif verb == "lazy":  # its own task per chunk, on the persisted keys of its inputs
            assert keys <= 4 * chunks, f"lazy {name} has a graph of {keys} keys for {chunks} row chunks"
        else:
            assert tasks == chunks, f"the sum of {name} runs {tasks} tasks for {chunks} row chunks"
        by_function.setdefault((verb, name), set()).add(keys)
    # the graph of each pass is as large in the last iteration as in the first
    assert all(len(sizes) == 1 for sizes in by_function.values()), by_function
    counts = {}
    for verb, (name, _), _, _ in record:
        counts[name] = counts.get(name, 0) + 1
    iterations = est.n_iter_
    passes = sum(counts.get(name, 0) for name in ("_loss_and_gradient", "_shifted_moments", "_residual_moments"))
    assert passes >= iterations  # one pass (at least) per iteration, each of one task per chunk
    if isinstance(est, kernelscale.GeneralizedLeastSquaresClassifier):
        # ONE sum per trial point's scores (its objective with the next step's gradient); a
        # gradient pass of its own only after a restart (a trial point discarded)
        trials = counts["_gls_scores"] - 1
        assert counts["_loss_and_gradient"] == trials + 1 and "_gls_loss" not in counts
        assert counts.get("_gls_gradient", 0) == trials - iterations
    if isinstance(est, kernelscale.CalibratedLeastSquaresClassifier):
        # two sums an iteration, each a round trip: the objective with the next fit's moments on
        # x, and the calibration's moments (its basis and residual made inside the tasks)
        first = next(i for i, (verb, (name, _), _, _) in enumerate(record) if name == "_linear_update")
        sums = [name for verb, (name, _), _, _ in record[first:] if verb == "sum"]
        assert len(sums) == 2 * iterations, sums


def test_distributed_fit_input_errors(data, sync):
    X, y, _, w = data
    bad = X.copy()
    bad[150, 2] = np.nan
    est = kernelscale.GeneralizedLeastSquaresClassifier()
    with pytest.raises(ValueError, match=r"X contains NaN or infinity in row chunk 2 \(rows 140 to 209\)"):
        est.fit(_dask(bad), _dask(y))
    with pytest.raises(ValueError, match=r"y has only one class"):
        est.fit(_dask(X), _dask(np.zeros(N, dtype=int)))
    with pytest.raises(ValueError, match=r"Unknown label type"):
        est.fit(_dask(X), _dask(X[:, 0]))
    with pytest.raises(ValueError, match=r"Negative values in data passed to sample_weight"):
        est.fit(_dask(X), _dask(y), sample_weight=_dask(-w))
    with pytest.raises(ValueError, match=r"alpha"):
        kernelscale.GeneralizedLeastSquaresClassifier(alpha=-1.0).fit(_dask(X), _dask(y))
    assert not hasattr(est, "classes_")
    # a numpy y beside a dask X
    ref = kernelscale.GeneralizedLeastSquaresClassifier(max_iter=20).fit(X, y)
    got = kernelscale.GeneralizedLeastSquaresClassifier(max_iter=20).fit(_dask(X), y)
    assert_same_model(ref, got, DISTRIBUTED_RTOL)


def test_distributed_multioutput_regression_and_gathered_multilabel(data, sync):
    X, y_class, y, _ = data
    Y = np.column_stack([y, -2 * y])
    est = kernelscale.StagewiseRegressor(block_size=16, n_stages=2, pca_components=None, random_state=0)
    for target in (Y, Y[:, :1]):  # a 2-d y stays 2-d, as on numpy
        ref = clone(est).fit(X, target)
        got = clone(est).fit(_dask(X), _dask(target))
        assert_same_model(ref, got, DISTRIBUTED_RTOL)
        assert got.predict(_dask(X)).shape == target.shape
    labels = np.column_stack([y_class, 1 - y_class, (y > 0).astype(int)])
    cls = kernelscale.CalibratedLeastSquaresClassifier(max_iter=5)
    ref = clone(cls).fit(X, labels)
    got = clone(cls).fit(_dask(X), _dask(labels))  # multi-label: gathered, numpy's model exactly
    assert_same_model(ref, got)


def test_on_a_local_cluster_the_scheduler_holds_as_many_tasks_in_the_last_iteration_as_in_the_first(client, data):
    X, y, _, _ = data
    counts = []

    def tasks(info):  # tasks the scheduler knows after each iteration (persisted state included)
        counts.append(client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)))

    est = kernelscale.GeneralizedLeastSquaresClassifier(max_iter=25, tol=0, callback=tasks)
    est.fit(_dask(X), _dask(y))
    assert len(counts) == est.n_iter_ == 25
    chunks = len(_dask(X).chunks[0])
    # X, Y, the weights, the scores of three points (current, previous, extrapolated) and keys
    # being released: a few arrays of one key per row chunk, not one more per iteration
    assert max(counts) <= 12 * chunks, counts
    # no growth: a graph that kept one key per chunk per iteration would hold 20 * chunks more in
    # each of the last five iterations; released keys the scheduler has not dropped yet come and go
    # (measured: 30 to 46 in the first six iterations, up to 41 in one of the last five while the
    # others held 32-35), so the least of the last five is compared
    assert min(counts[-5:]) <= max(counts[:6]) + chunks, counts


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # 8 iterations on purpose
def test_a_worker_killed_in_the_middle_of_a_distributed_fit_costs_nothing_but_time():
    """Every chunk of the persisted per-row state can be recomputed from the graph, so when a
    worker process dies between two iterations the scheduler recomputes what it held and the
    fit ends with numpy's model (or, had it failed, it would raise: never a silently wrong one)."""
    distributed = pytest.importorskip("distributed")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 6))
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int) + (X[:, 2] > 1)
    Xd, yd = da.from_array(X, chunks=(500, 6)), da.from_array(y, chunks=500)
    kw = dict(max_iter=8, tol=0.0)
    ref = GeneralizedLeastSquaresClassifier(**kw).fit(X, y)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=50) as cluster, distributed.Client(cluster, set_as_default=False) as c:
        killed = []

        def kill_a_worker(info):
            if info["iteration"] == 3:
                victim = sorted(c.scheduler_info()["workers"])[0]
                pid = c.run(os.getpid, workers=[victim])[victim]
                os.kill(pid, signal.SIGKILL)  # its nanny starts a fresh, empty one
                killed.append(victim)
                while victim in c.scheduler_info()["workers"]:  # the scheduler has noticed
                    time.sleep(0.05)

        with c.as_current():
            est = GeneralizedLeastSquaresClassifier(callback=kill_a_worker, **kw).fit(Xd, yd)
    assert killed and est.n_iter_ == ref.n_iter_ == 8
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(est.intercept_, ref.intercept_, rtol=1e-8, atol=1e-12)
