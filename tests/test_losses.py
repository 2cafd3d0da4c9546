"""Tests of kernelscale.losses: every closed form against its definition, computed numerically.

The reference prox is a bounded scalar minimisation (scipy) of t L(y, u) + (u - x)^2 / 2 written
from the loss *value* only, so the closed forms, the Newton solve of the logistic loss and the
resolvent identity -J_alpha(v) = alpha prox_{f/alpha}(v / alpha) - v are all checked against
something they do not share code with.
"""

import math

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from kernelscale import losses
from kernelscale.losses import (
    CLASSIFICATION_LOSSES,
    LOSSES,
    EpsilonInsensitiveLoss,
    HingeLoss,
    LogisticLoss,
    SquaredHingeLoss,
    SquaredLoss,
    make_loss,
)

ALL = list(LOSSES)


def value_of(name, y, u, eps=0.3):
    """The losses written out independently, on Python floats."""
    return {
        "squared": lambda: 0.5 * (y - u) ** 2,
        "hinge": lambda: max(0.0, 1.0 - y * u),
        "squared_hinge": lambda: max(0.0, 1.0 - y * u) ** 2,
        "absolute": lambda: abs(y - u),
        "epsilon_insensitive": lambda: max(0.0, abs(y - u) - eps),
        "logistic": lambda: math.log1p(math.exp(-y * u)) if y * u > -30 else -y * u + math.log1p(math.exp(y * u)),
    }[name]()


def numeric_prox(name, x, y, t, eps=0.3):
    """argmin_u t L(y, u) + (u - x)^2 / 2 by bounded Brent: the minimiser lies within t of x
    for the 1-Lipschitz losses, and between x and y for the (squared) quadratic ones."""
    if t == 0:
        return x
    lo = min(x, y, x - t) - 1.0
    hi = max(x, y, x + t) + 1.0
    res = minimize_scalar(lambda u: t * value_of(name, y, u, eps) + 0.5 * (u - x) ** 2, bounds=(lo, hi),
                          method="bounded", options={"xatol": 1e-12 * (1 + hi - lo), "maxiter": 5000})
    return res.x


def loss_obj(name, eps=0.3):
    return make_loss(name, epsilon=eps)


def draws(name, n, seed):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        y = float(rng.choice([-1.0, 1.0])) if name in CLASSIFICATION_LOSSES else float(rng.normal(0, 2))
        yield (y, float(rng.normal(0, 3)), float(10 ** rng.uniform(-2, 1)), float(10 ** rng.uniform(-2, 1)),
               float(rng.choice([0.0, rng.uniform(0.1, 3.0)], p=[0.1, 0.9])))


@pytest.mark.parametrize("name", ALL)
def test_neg_resolvent_equals_its_definition(name):
    """-J_alpha(v) = alpha prox_{f/alpha}(v/alpha) - v for f = w L / lam, random alpha, lam, w, y, v."""
    loss = loss_obj(name)
    for y, v, alpha, lam, w in draws(name, 150, seed=1):
        t = w / (lam * alpha)  # f / alpha = (w / (lam alpha)) L
        expected = alpha * numeric_prox(name, v / alpha, y, t) - v
        got = loss.neg_resolvent(v, y, alpha, lam, sample_weight=w)
        assert got == pytest.approx(expected, abs=1e-6 * (1 + abs(v) + abs(alpha * y))), (y, v, alpha, lam, w)


@pytest.mark.parametrize("name", ALL)
def test_prox_equals_numeric_prox(name):
    loss = loss_obj(name)
    for y, x, t, _, _ in draws(name, 150, seed=2):
        assert float(loss.prox(x, y, t)) == pytest.approx(numeric_prox(name, x, y, t), abs=1e-7 * (1 + abs(x) + t))


@pytest.mark.parametrize("name", ALL)
def test_scalar_step_equals_vectorised_resolvent(name):
    loss = loss_obj(name)
    rng = np.random.default_rng(3)
    n = 500
    y = rng.choice([-1.0, 1.0], n) if name in CLASSIFICATION_LOSSES else rng.normal(0, 2, n)
    v, alpha, C = rng.normal(0, 3, n), 10 ** rng.uniform(-3, 2, n), 10 ** rng.uniform(-3, 3, n)
    C[::7] = 0.0
    vec = loss._neg_resolvent(v, y, alpha, C)
    scal = np.array([loss.step(*args) for args in zip(v.tolist(), y.tolist(), alpha.tolist(), C.tolist())])
    np.testing.assert_allclose(scal, vec, rtol=1e-12, atol=1e-14)
    assert np.all(vec[::7] == 0)  # zero weight: the point's coefficient is 0


def test_closed_forms_of_the_algorithm_notes_and_table_1():
    """The general forms of docs/algorithms.md section 3.1, and Table 1 of the paper where alpha = 1."""
    rng = np.random.default_rng(4)
    v, alpha, lam = rng.normal(0, 3, 200), 10 ** rng.uniform(-2, 1, 200), 10 ** rng.uniform(-2, 1, 200)
    yc, yr = rng.choice([-1.0, 1.0], 200), rng.normal(0, 2, 200)
    np.testing.assert_allclose(SquaredLoss().neg_resolvent(v, yr, alpha, lam), (alpha * yr - v) / (1 + alpha * lam))
    np.testing.assert_allclose(HingeLoss().neg_resolvent(v, yc, alpha, lam),
                               yc * np.minimum(1 / lam, np.maximum(0, alpha - yc * v)))
    # the squared hinge with a 1/2 in front (docs/algorithms.md section 3.4): ours (no 1/2) with lam doubled
    np.testing.assert_allclose(SquaredHingeLoss().neg_resolvent(v, yc, alpha, 2 * lam),
                               yc * np.maximum(0, alpha - yc * v) / (1 + alpha * lam))
    # Table 1 at alpha = 1: RLA and SVR
    r = yr - v
    np.testing.assert_allclose(losses.AbsoluteLoss().neg_resolvent(v, yr, 1.0, lam),
                               np.sign(r) * np.minimum(1 / lam, np.abs(r)))
    np.testing.assert_allclose(EpsilonInsensitiveLoss(0.2).neg_resolvent(v, yr, 1.0, lam),
                               np.sign(r) * np.minimum(1 / lam, np.maximum(0, np.abs(r) - 0.2)))


def test_sample_weight_scales_lam():
    rng = np.random.default_rng(5)
    v, y, w = rng.normal(size=50), rng.choice([-1.0, 1.0], 50), rng.uniform(0.1, 4, 50)
    for name in ALL:
        loss = loss_obj(name)
        np.testing.assert_allclose(loss.neg_resolvent(v, y, 0.7, 2.0, sample_weight=w),
                                   loss.neg_resolvent(v, y, 0.7, 2.0 / w), rtol=1e-12)


@pytest.mark.parametrize("name", ALL)
def test_derivative_is_a_subgradient(name):
    loss = loss_obj(name)
    rng = np.random.default_rng(6)
    y = rng.choice([-1.0, 1.0], 400) if name in CLASSIFICATION_LOSSES else rng.normal(0, 2, 400)
    z, z2 = rng.normal(0, 2, 400), rng.normal(0, 2, 400)
    g = loss.derivative(y, z)
    assert np.all(loss.value(y, z2) >= loss.value(y, z) + g * (z2 - z) - 1e-12)
    h = 1e-6  # at smooth points the subgradient is the derivative
    fd = (loss.value(y, z + h) - loss.value(y, z - h)) / (2 * h)
    np.testing.assert_allclose(g, fd, atol=1e-5)
    expected = np.array([value_of(name, a, b) for a, b in zip(y, z)])
    np.testing.assert_allclose(loss.value(y, z), expected, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", ALL)
def test_conjugate_and_fenchel_young(name):
    """C L^*(y, -c/C) = sup_z (-c z - C L(y, z)), numerically; equality in Fenchel-Young at the
    resolvent's output (c = -C L'(u), u the prox point)."""
    loss = loss_obj(name)
    for y, v, alpha, lam, _ in draws(name, 40, seed=7):
        C = 1.0 / lam
        c = float(loss._neg_resolvent(np.array(v), np.array(y), alpha, C))
        # the conjugate term at c, from its definition
        res = minimize_scalar(lambda z: C * value_of(name, y, z) + c * z, bounds=(-60, 60), method="bounded",
                              options={"xatol": 1e-11})
        assert float(loss.conjugate(c, y, C)) == pytest.approx(-res.fun, abs=1e-6 * (1 + C))
        u = numeric_prox(name, v / alpha, y, C / alpha)
        gap = C * value_of(name, y, u) + float(loss.conjugate(c, y, C)) + c * u
        assert gap == pytest.approx(0.0, abs=1e-5 * (1 + C))


def test_conjugate_is_infinite_outside_the_dual_domain():
    assert HingeLoss().conjugate(-0.1, 1.0, 1.0) == np.inf
    assert HingeLoss().conjugate(1.5, 1.0, 1.0) == np.inf
    assert LogisticLoss().conjugate(-2.0, -1.0, 1.0) == np.inf
    assert EpsilonInsensitiveLoss(0.1).conjugate(2.0, 0.0, 1.0) == np.inf
    assert SquaredLoss().conjugate(0.0, 3.0, 0.0) == 0.0


@pytest.mark.parametrize("x, t", [(0.0, 1e9), (-80.0, 1e8), (30.0, 1e-3), (-1.0, 1e-14), (500.0, 2.0),
                                  (-500.0, 2.0), (3.0, 0.0)])
def test_logistic_newton_solves_extreme_cases(x, t):
    s_vec = float(losses._logistic_margin(np.array([x]), np.array([t]))[0])
    s_sc = losses.logistic_margin_scalar(x, t)
    for s in (s_vec, s_sc):
        sig = 1 / (1 + math.exp(s)) if s > -700 else 1.0
        assert x <= s <= x + t
        assert abs(s - x - t * sig) <= 1e-12 * (1 + abs(s) + t * sig)
    assert s_vec == pytest.approx(s_sc, rel=1e-13, abs=1e-13)


def test_bad_input():
    with pytest.raises(ValueError, match="epsilon"):
        EpsilonInsensitiveLoss(-0.1)
    with pytest.raises(ValueError, match="epsilon"):
        make_loss("epsilon_insensitive", epsilon=-1.0)
    with pytest.raises(ValueError, match="loss='hinge2'"):
        make_loss("hinge2")
    with pytest.raises(ValueError, match="lam"):
        HingeLoss().neg_resolvent(0.0, 1.0, 1.0, lam=0.0)
    with pytest.raises(ValueError, match="alpha"):
        HingeLoss().neg_resolvent(0.0, 1.0, -1.0)
    with pytest.raises(ValueError, match=r"\{-1, \+1\}"):
        HingeLoss().check_targets(np.array([0.0, 1.0]))
    SquaredLoss().check_targets(np.array([0.3, 7.0]))  # regression targets are anything
