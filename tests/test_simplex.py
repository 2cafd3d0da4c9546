"""Tests of kernelscale.simplex: the projection is exact (hypothesis properties, an independent
bisection reference) and keeps dtypes."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from kernelscale.simplex import project_hypercube, project_simplex

finite = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False, width=64)
vectors = st.integers(1, 12).flatmap(lambda k: arrays(np.float64, (k,), elements=finite))
radii = st.floats(0.1, 10.0)


def bisection_projection(v, radius=1.0):
    """Independent reference: tau solves sum(max(v - tau, 0)) = radius (decreasing in tau)."""
    lo, hi = v.min() - radius, v.max()
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if np.maximum(v - mid, 0).sum() > radius:
            lo = mid
        else:
            hi = mid
    return np.maximum(v - 0.5 * (lo + hi), 0)


def tol(v, radius=1.0):
    return 1e-9 * (1.0 + np.abs(v).max() + radius)


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(vectors, radii)
def test_output_lies_on_the_simplex(v, radius):
    p = project_simplex(v, radius)
    assert p.shape == v.shape
    assert np.all(p >= 0)
    assert abs(p.sum() - radius) <= tol(v, radius)


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(vectors, radii)
def test_projecting_twice_changes_nothing(v, radius):
    p = project_simplex(v, radius)
    np.testing.assert_allclose(project_simplex(p, radius), p, rtol=0, atol=tol(v, radius))


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(vectors, st.integers(0, 2**32 - 1))
def test_it_is_the_closest_point_of_the_simplex(v, seed):
    p = project_simplex(v)
    rng = np.random.default_rng(seed)
    k = v.size
    candidates = np.vstack([rng.dirichlet(np.ones(k), size=50), np.eye(k), np.full((1, k), 1.0 / k)])
    distances = np.linalg.norm(candidates - v, axis=1)
    assert np.linalg.norm(p - v) <= distances.min() + tol(v)


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(vectors, radii)
def test_matches_bisection_reference_and_kkt_form(v, radius):
    p = project_simplex(v, radius)
    np.testing.assert_allclose(p, bisection_projection(v, radius), rtol=0, atol=1e-7 * (1 + np.abs(v).max()))
    # KKT: one threshold tau with p_i = v_i - tau on the support and v_i <= tau off it
    support = p > 0
    tau = np.mean(v[support] - p[support])
    np.testing.assert_allclose(v[support] - p[support], tau, rtol=0, atol=tol(v, radius))
    assert np.all(v[~support] <= tau + tol(v, radius))


def test_known_values():
    np.testing.assert_allclose(project_simplex([0.5, 0.5, 0.5]), [1 / 3, 1 / 3, 1 / 3])
    np.testing.assert_allclose(project_simplex([3.0, 0.0, -1.0]), [1.0, 0.0, 0.0])
    np.testing.assert_allclose(project_simplex([0.2, 0.3, 0.1]), [1 / 3, 13 / 30, 7 / 30])
    np.testing.assert_allclose(project_simplex([0.1, 0.6, 0.3]), [0.1, 0.6, 0.3])  # already on it


def test_rows_are_projected_independently_and_order_is_kept():
    V = np.random.default_rng(0).normal(size=(50, 7)) * 3
    P = project_simplex(V)
    for v, p in zip(V, P):
        np.testing.assert_allclose(p, bisection_projection(v), atol=1e-9)
    assert np.array_equal(np.argmax(P, axis=1), np.argmax(V, axis=1))


def test_float32_stays_float32():
    V = np.random.default_rng(1).normal(size=(20, 5)).astype(np.float32)
    P = project_simplex(V)
    assert P.dtype == np.float32
    np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-6)
    assert project_hypercube(V).dtype == np.float32


def test_hypercube_is_clipping_and_closest_point():
    V = np.random.default_rng(2).normal(size=(30, 4))
    P = project_hypercube(V)
    np.testing.assert_array_equal(P, np.clip(V, 0, 1))
    Q = np.random.default_rng(3).uniform(size=(30, 4))
    assert np.all(np.linalg.norm(P - V, axis=1) <= np.linalg.norm(Q - V, axis=1) + 1e-12)


@pytest.mark.parametrize(
    "V, radius, match",
    [
        ([np.nan, 1.0], 1.0, "NaN"),
        ([1.0, 2.0], 0.0, "radius"),
        ([1.0, 2.0], -1.0, "radius"),
        (np.zeros((2, 0)), 1.0, "V"),
        (np.zeros((2, 2, 2)), 1.0, "V"),
    ],
)
def test_bad_input(V, radius, match):
    with pytest.raises(ValueError, match=match):
        project_simplex(V, radius)
