"""A worker process killed in the middle of a distributed fit costs time, not the result (issue #40
item 5), for every estimator whose fit is distributed (kernelscale.dask.fit.DISTRIBUTED).

Every chunk a distributed fit persists on the workers (X checked and cast, the targets, the
per-row state) can be recomputed from its graph, so when a worker dies the scheduler recomputes
what it held and the fit goes on. Each estimator is fitted twice on one two-worker cluster: once
undisturbed, once with its callback killing a worker (SIGKILL; its nanny starts an empty one) at
the second call, after the data were persisted and at least one pass ran. The two models are
equal to rounding (the same row chunks and the same tree of sums; only a recomputed chunk's
values could differ by the order of its own sums). A fresh cluster for each.
"""

import os
import signal
import time

import numpy as np
import pytest
from sklearn.base import clone, is_classifier

import kernelscale
from kernelscale.dask.fit import DISTRIBUTED

from dask_support import assert_same_model, da  # noqa: F401

#: one small configuration per distributed estimator, several iterations (the kill lands mid-fit)
CONFIGS = {
    "GeneralizedLeastSquaresClassifier": dict(max_iter=8, tol=0.0),
    "CalibratedLeastSquaresClassifier": dict(max_iter=3),
    "StagewiseClassifier": dict(block_size=16, n_stages=4, pca_components=None, random_state=0),
    "StagewiseRegressor": dict(block_size=16, n_stages=4, pca_components=None, random_state=0),
    "SLKLRegressor": dict(n_components=40, random_state=0),
    "SLKLClassifier": dict(n_components=40, random_state=0),
    "RegularizedKernelClassifier": dict(solver="fixed_point", C=0.1, max_iter=6),
    "RegularizedKernelRegressor": dict(solver="fixed_point", C=0.1, max_iter=6),
    "LSSVMClassifier": dict(batch_size=32, n_iter=6, tol=None, random_state=0),
    "LSSVMRegressor": dict(batch_size=32, n_iter=6, tol=None, random_state=0),
    "DoublyStochasticClassifier": dict(n_iter=12, batch_size=100, block_size=16, random_state=0),
    "DoublyStochasticRegressor": dict(n_iter=12, batch_size=100, block_size=16, random_state=0),
}


def test_every_distributed_estimator_has_a_kill_test():
    assert set(CONFIGS) == set(DISTRIBUTED)


@pytest.fixture
def killable():
    """Two worker processes of one thread each, with nannies (which restart a killed one); a fresh
    cluster per test, so that no test waits for the restart of a worker an earlier test killed
    (on a loaded machine a nanny once took over 180 s to bring one back)."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit="2GiB",
                                  dashboard_address=None, silence_logs=50) as cluster:
        with distributed.Client(cluster, set_as_default=False) as client:
            client.wait_for_workers(2, timeout=120)
            yield client


@pytest.fixture(scope="module")
def fault_data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1500, 5))
    f = np.sin(X[:, 0]) + 0.5 * X[:, 1] * X[:, 2]
    y_class = (f > 0).astype(int) + (X[:, 3] > 1)
    return X, y_class, f + 0.05 * rng.normal(size=X.shape[0])


def _kill_one(client):
    """SIGKILL one worker process and wait until the scheduler has removed it."""
    victim = sorted(client.scheduler_info()["workers"])[0]
    pid = client.run(os.getpid, workers=[victim])[victim]
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 20
    while victim in client.scheduler_info()["workers"] and time.monotonic() < deadline:
        time.sleep(0.05)
    return victim


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_a_worker_killed_during_each_distributed_fit_costs_time_not_the_result(killable, fault_data, name):
    X, y_class, y_reg = fault_data
    est = getattr(kernelscale, name)(**CONFIGS[name])
    if "random_state" in est.get_params():
        est.set_params(random_state=0)  # two fits draw the same numbers
    y = y_class if is_classifier(est) else y_reg
    Xd, yd = da.from_array(X, chunks=(250, X.shape[1])), da.from_array(y, chunks=250)
    calls, killed = [], []

    def count(info):
        calls.append(1)

    def kill_at_the_second_call(info):
        calls.append(1)
        if len(calls) == 2 and not killed:
            killed.append(_kill_one(killable))

    with killable.as_current():
        ref = clone(est).set_params(callback=count).fit(Xd, yd)
        assert len(calls) >= 2, f"{name}: the callback ran {len(calls)} time(s); the kill would not land mid-fit"
        calls.clear()
        got = clone(est).set_params(callback=kill_at_the_second_call).fit(Xd, yd)
    assert killed, f"{name}: no worker was killed"
    assert_same_model(ref, got, rtol=1e-8)
