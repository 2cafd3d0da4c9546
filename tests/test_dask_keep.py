"""What a distributed fit keeps in memory between passes (kernelscale.dask.fit._keep): X and the
per-row arrays are persisted when they fit the memory they would stay in, except an X that the
fit reduces first (a stagewise PCA), whose projection is kept instead."""

import pytest
from sklearn.base import clone

import kernelscale
from kernelscale.dask import fit as _dask_fit

from dask_support import DISTRIBUTED_RTOL, _dask, assert_same_model, dask, data, sync  # noqa: F401 (fixtures)


def _persisted(monkeypatch):
    """Record the shapes of the arrays each call of dask.persist gets."""
    calls = []
    original = dask.persist

    def persist(*arrays, **kwargs):
        calls.append([a.shape for a in arrays])
        return original(*arrays, **kwargs)

    monkeypatch.setattr(dask, "persist", persist)
    return calls


def test_a_stagewise_pca_fit_keeps_the_projection_not_x(data, sync, monkeypatch):
    X, y, _, _ = data
    est = kernelscale.StagewiseClassifier(block_size=8, n_stages=2, pca_components=3, random_state=0)
    calls = _persisted(monkeypatch)
    got = clone(est).fit(_dask(X), _dask(y))
    kept = [shape for call in calls for shape in call]
    assert X.shape not in kept and (X.shape[0], 2) in kept, kept  # the one-hot targets; the projection is
    # persisted where the fit computes it (ops.rows.DaskRows.map)
    assert_same_model(clone(est).fit(X, y), got, DISTRIBUTED_RTOL)
    calls.clear()
    clone(est).set_params(pca_components=None).fit(_dask(X), _dask(y))
    assert X.shape in calls[0], "without a PCA, X is read by every pass and kept"


def test_with_a_client_only_what_fits_the_workers_budgets_is_kept(data, sync, monkeypatch):
    X, y, _, _ = data
    est = kernelscale.GeneralizedLeastSquaresClassifier(max_iter=3)
    calls = _persisted(monkeypatch)
    monkeypatch.setattr(_dask_fit, "current_client", lambda: object())  # as if a client were there
    monkeypatch.setattr(_dask_fit, "cluster_budget", lambda: X.nbytes // 2)
    ref = clone(est).fit(X, y)
    got = clone(est).fit(_dask(X), _dask(y))
    assert not any(X.shape in call for call in calls), "X beyond the workers' budgets was kept"
    assert any((X.shape[0], 2) in call for call in calls), "the one-hot targets, which fit, were not kept"
    assert_same_model(ref, got, DISTRIBUTED_RTOL)
    monkeypatch.setattr(_dask_fit, "cluster_budget", lambda: 10 * X.nbytes)
    clone(est).fit(_dask(X), _dask(y))
    assert any(X.shape in call for call in calls)


def test_the_cluster_budget_adds_up_the_workers_memory_limits():
    distributed = pytest.importorskip("distributed")
    from kernelscale.dask.client import cluster_budget, current_client
    from kernelscale.ops.memory import DEFAULT_MEMORY_FRACTION

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, memory_limit=2**30,
                                  dashboard_address=None, silence_logs=50) as cluster:
        with distributed.Client(cluster, set_as_default=False) as client, client.as_current():
            assert cluster_budget() == int(DEFAULT_MEMORY_FRACTION * 2 * 2**30)
            assert current_client() is client


def test_a_stagewise_fit_keeps_no_feature_block_on_the_workers(data, sync, monkeypatch):
    """Each least-squares stage regenerates its n x block_size features in every pass that reads
    them: the workers hold per-row state of a few columns (projection, predictions, targets), so
    their memory does not grow with block_size x n."""
    from kernelscale.ops import rows

    X, y, _, _ = data
    kept = []
    original = rows.DaskRows.map

    def map_(self, fn, *arrays, width=None, persist=True, **kwargs):
        if persist:
            kept.append((fn.__name__, width))
        return original(self, fn, *arrays, width=width, persist=persist, **kwargs)

    monkeypatch.setattr(rows.DaskRows, "map", map_)
    est = kernelscale.StagewiseClassifier(block_size=32, n_stages=3, pca_components=3, random_state=0)
    got = clone(est).fit(_dask(X), _dask(y))
    assert kept and all(width is None or width <= 3 for _, width in kept), kept
    assert_same_model(clone(est).fit(X, y), got, DISTRIBUTED_RTOL)
