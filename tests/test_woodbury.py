"""G = (D^-1 + C^T C / lam)^-1 kept by the four update cases (eqs. 24-27) against the direct inverse."""

import numpy as np
import pytest

from kernelscale.slkl.woodbury import (
    woodbury_append, woodbury_direct, woodbury_direct_gram, woodbury_remove, woodbury_rescale,
)
from memcheck import peak_bytes


def direct(C, mu, lam):
    return np.linalg.inv(np.diag(1.0 / mu) + C.T @ C / lam)


def test_direct_matches_inverse():
    rng = np.random.default_rng(0)
    C = rng.normal(size=(40, 12))
    mu = rng.uniform(1e-3, 2.0, size=12)
    np.testing.assert_allclose(woodbury_direct(C, mu, 0.7), direct(C, mu, 0.7), rtol=1e-10, atol=1e-12)
    assert woodbury_direct(C[:, :0], mu[:0], 1.0).shape == (0, 0)


@pytest.mark.parametrize("m0", [1, 256, 300, 600])
def test_direct_from_the_gram_matrix(m0):
    """Orders across the mirroring's row blocks: G and G rhs against the dense inverse, G exactly
    symmetric; with ``overwrite`` the caller's array becomes G."""
    rng = np.random.default_rng(m0)
    C = rng.normal(size=(m0 + 50, m0))
    mu, lam, rhs = rng.uniform(1e-4, 2.0, size=m0), 0.3, rng.normal(size=m0)
    ref = direct(C, mu, lam)
    CtC = C.T @ C
    G, solved = woodbury_direct_gram(CtC, mu, lam, rhs=rhs)
    np.testing.assert_allclose(G, ref, rtol=0, atol=1e-11 * np.abs(ref).max())
    np.testing.assert_allclose(solved, ref @ rhs, rtol=0, atol=1e-11 * np.abs(ref @ rhs).max())
    assert np.array_equal(G, G.T) and G.flags.c_contiguous
    assert np.array_equal(CtC, C.T @ C)  # not overwritten by default
    given = CtC.copy()
    G2 = woodbury_direct_gram(given, mu, lam, overwrite=True)
    assert np.shares_memory(G2, given) and np.array_equal(G2, G)


@pytest.mark.parametrize("m0", [1, 63, 64, 65, 128, 129, 200])
def test_scale_and_mirror_never_reads_the_scratch_triangle(m0):
    """The upper triangle U scaled on both sides and mirrored, bit for bit, with NaN and inf in the
    strict lower triangle (LAPACK's scratch) and no floating-point error raised."""
    from kernelscale.slkl.woodbury import _scale_and_mirror

    rng = np.random.default_rng(m0)
    U = np.triu(rng.normal(size=(m0, m0)))
    s = rng.uniform(0.1, 3.0, size=m0)
    s[0] = 0.0
    G = U.copy()
    G[np.tril_indices(m0, -1)] = np.where(rng.random(m0 * (m0 - 1) // 2) < 0.5, np.nan, np.inf)
    with np.errstate(all="raise"):
        _scale_and_mirror(G, s)
    upper = np.triu(U * s[:, None] * s)
    assert np.array_equal(G, upper + np.triu(upper, 1).T)


@pytest.mark.parametrize("m0", [600, 1500])
def test_direct_from_the_gram_matrix_holds_no_square_temporary(m0):
    """With ``overwrite`` nothing of m0 x m0 floats is allocated (numpy's ufunc buffers and the
    diagonal blocks' index arrays are of a fixed size); without it one copy of CtC."""
    rng = np.random.default_rng(5)
    C = rng.normal(size=(m0 + 50, m0))
    CtC, mu = C.T @ C, rng.uniform(1e-4, 2.0, size=m0)
    square, fixed = 8 * m0 * m0, 2**18
    copies = [CtC.copy() for _ in range(2)]  # peak_bytes runs its function twice
    peak, _ = peak_bytes(lambda: woodbury_direct_gram(copies.pop(), mu, 0.3, rhs=mu, overwrite=True))
    assert peak < 0.3 * square + fixed, peak / square
    peak, _ = peak_bytes(lambda: woodbury_direct_gram(CtC, mu, 0.3, rhs=mu))
    assert peak < 1.3 * square + fixed, peak / square


def test_direct_from_the_gram_matrix_refuses_what_is_not_finite():
    C = np.random.default_rng(6).normal(size=(10, 4))
    mu = np.ones(4)
    for CtC, mu_, rhs in ((np.full((4, 4), np.nan), mu, None), (C.T @ C, np.array([1, np.inf, 1, 1.0]), None),
                          (C.T @ C, mu, np.array([1, np.inf, 0, 0.0]))):
        with pytest.raises(np.linalg.LinAlgError, match="not finite|positive definite"):  # LAPACK may see it first
            woodbury_direct_gram(CtC, mu_, 0.5, rhs=rhs)


@pytest.mark.parametrize("lam", [1.0, 0.05])
def test_long_random_sequence_all_four_cases(lam):
    """Thousands of random updates (rescale, remove, add, no-op) keep G equal to the direct inverse."""
    rng = np.random.default_rng(1)
    n, pool = 60, 25
    cols = rng.normal(size=(n, pool)) / np.sqrt(n)
    active = []  # slot order: candidate indices
    mu = {}
    G = np.zeros((0, 0))
    counts = dict(noop=0, rescale=0, remove=0, add=0)
    worst = 0.0
    for step in range(3000):
        j = int(rng.integers(pool))
        new = 0.0 if rng.random() < 0.3 else float(np.exp(rng.uniform(-6, 2)))
        if j not in mu and new == 0.0:
            counts["noop"] += 1  # case 1 (eq. 24): G unchanged
        elif j in mu and new > 0:
            woodbury_rescale(G, active.index(j), mu[j], new)
            mu[j] = new
            counts["rescale"] += 1
        elif j in mu:
            p = active.index(j)
            G = woodbury_remove(G, p)
            active[p] = active[-1]  # swap-with-last, as the solver does
            active.pop()
            del mu[j]
            counts["remove"] += 1
        else:
            C = cols[:, active]
            c = cols[:, j]
            Gz = G @ (C.T @ c)
            b = c @ c / lam - (C.T @ c) @ Gz / lam**2
            G = woodbury_append(G, Gz, b, new, lam)
            active.append(j)
            mu[j] = new
            counts["add"] += 1
        if step % 100 == 0 or step == 2999:
            if active:
                ref = direct(cols[:, active], np.array([mu[a] for a in active]), lam)
                worst = max(worst, np.linalg.norm(G - ref) / np.linalg.norm(ref))
            else:
                assert G.shape == (0, 0)
    assert min(counts.values()) > 100, counts
    assert worst < 1e-8, worst


def test_rescale_to_tiny_weight_is_close_to_removal():
    rng = np.random.default_rng(2)
    C = rng.normal(size=(30, 6))
    mu = rng.uniform(0.5, 1.5, size=6)
    G = woodbury_direct(C, mu, 1.0)
    tiny = woodbury_rescale(G.copy(), 2, mu[2], 1e-12)
    removed = woodbury_remove(G, 2)  # slot 5 moved into slot 2
    order = [0, 1, 5, 3, 4]
    np.testing.assert_allclose(removed, direct(C[:, order], mu[order], 1.0), rtol=1e-9)
    keep = [0, 1, 3, 4, 5]
    np.testing.assert_allclose(tiny[np.ix_(keep, keep)], direct(C[:, keep], mu[keep], 1.0), rtol=1e-9, atol=1e-12)
