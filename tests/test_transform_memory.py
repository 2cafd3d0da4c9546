"""``max_memory`` on every transformer (issue 39, item 3): ``transform`` writes its result block
by block into one preallocated array, so its peak memory is the output plus at most the budget
(tracemalloc), for dense and for scipy.sparse input."""

import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

import kernelscale as ks
from kernelscale.registry import ESTIMATORS

BUDGET = 4 * 2**20
SLACK = 256 * 2**10  # Python objects and numpy's small temporaries

TRANSFORMERS = {
    "RandomFourierFeatures cos": lambda: ks.RandomFourierFeatures(n_components=512, random_state=0,
                                                                  max_memory=BUDGET),
    "RandomFourierFeatures cossin": lambda: ks.RandomFourierFeatures(n_components=512, method="cossin",
                                                                     random_state=0, max_memory=BUDGET),
    "PolynomialRandomFeatures tensorsketch": lambda: ks.PolynomialRandomFeatures(n_components=512, random_state=0,
                                                                                 max_memory=BUDGET),
    "PolynomialRandomFeatures maclaurin": lambda: ks.PolynomialRandomFeatures(
        n_components=512, method="maclaurin", random_state=0, max_memory=BUDGET),
    "NystromFeatures": lambda: ks.NystromFeatures(n_components=512, random_state=0, max_memory=BUDGET),
}


def test_every_transformer_is_covered():
    names = {key.split()[0] for key in TRANSFORMERS}
    assert names == {e.name for e in ESTIMATORS if e.kind == "transformer"}
    for make in TRANSFORMERS.values():
        assert make().max_memory == BUDGET


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("name", sorted(TRANSFORMERS))
def test_transform_peak_is_output_plus_budget(name, sparse):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((5000, 50))  # the output, 5000 x 512 float64: 19.5 MiB, about 5x the budget
    if sparse:
        X = sp.csr_matrix(np.where(np.abs(X) > 1.5, X, 0.0))
    model = TRANSFORMERS[name]().fit(X)
    # compiled loops and their threads started before measuring: a one-time cost of the process
    # (about 13 MiB on the first threaded cosine), not of the transform
    model.transform(X)
    tracemalloc.start()
    try:
        out = model.transform(X)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out.shape == (5000, 512)
    assert peak <= out.nbytes + BUDGET + SLACK, (
        f"peak {peak / 2**20:.2f} MiB > output {out.nbytes / 2**20:.2f} MiB + budget {BUDGET / 2**20:.0f} MiB")
