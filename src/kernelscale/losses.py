"""Loss functions with value, subgradient, prox and the resolvent -J_alpha (docs/algorithms.md section 3.1).

Problem (2) of the fixed-point / coordinate-descent paper is

    min_c F(c) = f(K c) + c^T K c / 2,   f(z) = sum_i C_i L(y_i, z_i),   C_i = w_i / lam = C w_i,

with sample weights ``w_i``. The solvers only need, per loss, the resolvent of the inverse
subdifferential J_alpha = (I + alpha (df)^{-1})^{-1}, which by Moreau's identity is

    -J_alpha(v) = alpha prox_{f/alpha}(v / alpha) - v.                            (docs/algorithms.md section 3.1)

Every closed form below was derived from that identity and is tested against it with a numeric
prox. With x = v / alpha and t = C / alpha (so t L is the scaled loss), u = prox_{tL}(x) gives
-J = alpha (u - x), which equals -C times a subgradient of L at u.

Conventions (chosen so that ``C`` means what it means in scikit-learn / LIBLINEAR):

- ``squared``:             L = (y - z)^2 / 2       -J = C (alpha y - v) / (alpha + C)
- ``hinge``:               L = (1 - y z)_+         -J = y min(C, (alpha - y v)_+)
- ``squared_hinge``:       L = (1 - y z)_+^2       -J = y 2C (alpha - y v)_+ / (alpha + 2C)
- ``absolute``:            L = |y - z|             -J = sign(r) min(C, |r|),  r = alpha y - v
- ``epsilon_insensitive``: L = (|y - z| - eps)_+   -J = sign(r) min(C, (|r| - alpha eps)_+)
- ``logistic``:            L = log(1 + e^{-y z})   -J = y C sigmoid(-s), where s solves
  s - y x = t sigmoid(-s) on [y x, y x + t] (safeguarded Newton, no closed form).

Classification losses take y in {-1, +1}. The squared hinge has no 1/2 in front (as in the
paper's Table 1 and in LIBLINEAR, whose ``C`` it then shares); the squared hinge with a 1/2 is
the same loss with C halved (docs/algorithms.md section 3.4 gives both forms). With C = 1/lam and alpha = 1 the forms reduce to the
corrected Table 1.

The solvers also use the Fenchel conjugate term f_i^*(-c_i) = C_i L^*(y_i, -c_i / C_i) (the dual
D(c) = f^*(-c) + c^T K c / 2 that coordinate descent minimises exactly; F(c) + D(c) >= 0 is the
duality gap) and ``at_kink`` (coefficients sitting where the dual is not smooth, for shrinking).
"""

from __future__ import annotations

import math
import numbers

import numpy as np
from scipy.special import expit, log_expit, xlogy

__all__ = [
    "Loss",
    "SquaredLoss",
    "HingeLoss",
    "SquaredHingeLoss",
    "AbsoluteLoss",
    "EpsilonInsensitiveLoss",
    "LogisticLoss",
    "LOSSES",
    "CLASSIFICATION_LOSSES",
    "REGRESSION_LOSSES",
    "make_loss",
    "primal_objective",
    "dual_objective",
    "sigmoid",
    "logistic_margin_scalar",
    "softmax",
    "softmax_loss",
]

NEWTON_MAX_ITER = 200
NEWTON_RTOL = 1e-15  # a few ulps: below this, Newton steps are rounding noise


def _per_sample_C(lam, sample_weight):
    """C_i = w_i / lam (the weight of point i's loss term in f)."""
    if isinstance(lam, bool) or not isinstance(lam, (numbers.Real, np.ndarray)):
        raise TypeError(f"lam must be a positive number, got {lam!r}.")
    lam = np.asarray(lam, dtype=np.float64)
    if not np.all(np.isfinite(lam)) or np.any(lam <= 0):
        raise ValueError(f"lam must be finite and > 0, got {lam!r}; lam is 1/C.")
    C = 1.0 / lam
    if sample_weight is not None:
        w = np.asarray(sample_weight, dtype=np.float64)
        if np.any(w < 0) or not np.all(np.isfinite(w)):
            raise ValueError("sample_weight must be finite and >= 0.")
        C = C * w
    return C


class Loss:
    """Base class: a convex loss L(y, z) of one prediction z for the target y.

    Subclasses implement the vectorised ``value``, ``derivative``, ``prox`` and ``_neg_resolvent``
    (in terms of C = 1/lam), the scalar ``step`` used by coordinate descent, ``conjugate`` and
    ``at_kink``. All functions broadcast over numpy arrays.
    """

    name = ""
    classification = False

    def __repr__(self):
        return f"{type(self).__name__}()"

    # -- user-facing -----------------------------------------------------------------------
    def value(self, y, z):
        """L(y, z), elementwise."""
        raise NotImplementedError

    def derivative(self, y, z):
        """A subgradient of L(y, .) at z, elementwise (at kinks: the one-sided value noted)."""
        raise NotImplementedError

    def prox(self, v, y, t):
        """argmin_u t L(y, u) + (u - v)^2 / 2 for t >= 0, elementwise."""
        raise NotImplementedError

    def neg_resolvent(self, v, y, alpha, lam=1.0, sample_weight=None):
        """-J_alpha(v) for f(z) = sum_i w_i L(y_i, z_i) / lam (eq. 6), elementwise.

        ``alpha > 0`` may be a scalar or per-point (coordinate descent uses alpha_i = 1/k_ii);
        ``lam > 0``; ``sample_weight`` (>= 0) scales each point's loss, i.e. lam_i = lam / w_i
        (a zero weight gives -J = 0: that point's coefficient is 0).
        """
        alpha = np.asarray(alpha, dtype=np.float64)
        if np.any(alpha <= 0):
            raise ValueError("alpha must be > 0.")
        return self._neg_resolvent(np.asarray(v, dtype=np.float64), np.asarray(y, dtype=np.float64),
                                   alpha, _per_sample_C(lam, sample_weight))

    # -- used by the solvers ---------------------------------------------------------------------
    def _neg_resolvent(self, v, y, alpha, C):
        """-J_alpha(v) with C = w / lam, vectorised (no validation)."""
        raise NotImplementedError

    def step(self, v, y, alpha, C):
        """Scalar -J_alpha(v) on Python floats: the coordinate-descent update S_i (eq. 13)."""
        raise NotImplementedError

    def conjugate(self, c, y, C):
        """C L^*(y, -c / C): the term f_i^*(-c_i) of the dual objective (inf outside its domain;
        0 at c = 0 when C = 0)."""
        raise NotImplementedError

    def at_kink(self, c, y, C):
        """True where c_i sits at a point where the dual term is not differentiable (a bound of
        its domain, or 0 for the epsilon-insensitive loss): candidates for shrinking."""
        return np.zeros(np.shape(c), dtype=bool)

    def kink_push(self, c, v, y, alpha, C):
        """How far the unclipped update from v goes past the kink where c sits (in units of c;
        > 0 means the resolvent keeps c there), -inf where c is not at a kink. Shrinking drops
        coordinates pushed further than the last sweep's largest change, as LIBLINEAR does."""
        return np.full(np.shape(c), -np.inf)

    def check_targets(self, y, name="y"):
        """Raise a ValueError when y is not valid for this loss (+-1 labels for classification)."""
        if self.classification and not np.all(np.abs(np.asarray(y)) == 1):
            raise ValueError(
                f"{self.name} loss needs {name} in {{-1, +1}}; encode the two classes as -1 and +1 "
                f"(the estimators do this for you)."
            )


def _inf_outside(values, inside):
    return np.where(inside, values, np.inf)


class SquaredLoss(Loss):
    """L(y, z) = (y - z)^2 / 2 (regularised least squares; KernelRidge with alpha = 1/C)."""

    name = "squared"

    def value(self, y, z):
        return 0.5 * (np.asarray(y) - z) ** 2

    def derivative(self, y, z):
        return np.asarray(z) - y

    def prox(self, v, y, t):
        return (np.asarray(v) + t * np.asarray(y)) / (1.0 + t)

    def _neg_resolvent(self, v, y, alpha, C):
        return C * (alpha * y - v) / (alpha + C)

    def step(self, v, y, alpha, C):
        return C * (alpha * y - v) / (alpha + C)

    def conjugate(self, c, y, C):
        c = np.asarray(c, dtype=np.float64)
        C = np.broadcast_to(np.asarray(C, dtype=np.float64), c.shape)
        quad = np.divide(c * c, 2.0 * C, out=np.zeros_like(c), where=C > 0)
        return _inf_outside(quad - c * y, (C > 0) | (c == 0))


class HingeLoss(Loss):
    """L(y, z) = (1 - y z)_+ (the SVM; LinearSVC(loss="hinge") for the linear kernel)."""

    name = "hinge"
    classification = True

    def value(self, y, z):
        return np.maximum(0.0, 1.0 - np.asarray(y) * z)

    def derivative(self, y, z):
        y = np.asarray(y)
        return np.where(y * np.asarray(z) < 1.0, -y, 0.0)

    def prox(self, v, y, t):
        y = np.asarray(y, dtype=np.float64)
        s = y * v  # in the margin coordinate s = y u: move up by t, but not past 1
        return y * np.where(s >= 1.0, s, np.minimum(1.0, s + t))

    def _neg_resolvent(self, v, y, alpha, C):
        return y * np.minimum(C, np.maximum(0.0, alpha - y * v))

    def step(self, v, y, alpha, C):
        a = alpha - y * v
        return 0.0 if a <= 0.0 else y * (a if a < C else C)

    def conjugate(self, c, y, C):
        a = np.asarray(y) * c
        return _inf_outside(-a, (a >= 0) & (a <= C))

    def at_kink(self, c, y, C):
        a = np.asarray(y) * c
        return (a == 0) | (a == C)

    def kink_push(self, c, v, y, alpha, C):
        a, free = np.asarray(y) * c, alpha - np.asarray(y) * v  # free: the unclipped y c
        return np.where(a == 0, -free, np.where(a == C, free - C, -np.inf))


class SquaredHingeLoss(Loss):
    """L(y, z) = (1 - y z)_+^2 (LinearSVC(loss="squared_hinge") for the linear kernel).

    No 1/2 in front, as in LIBLINEAR; (1 - y z)_+^2 / 2 is this loss with C / 2.
    """

    name = "squared_hinge"
    classification = True

    def value(self, y, z):
        return np.maximum(0.0, 1.0 - np.asarray(y) * z) ** 2

    def derivative(self, y, z):
        y = np.asarray(y)
        return -2.0 * y * np.maximum(0.0, 1.0 - y * np.asarray(z))

    def prox(self, v, y, t):
        y = np.asarray(y, dtype=np.float64)
        s = y * v
        return y * np.where(s >= 1.0, s, (s + 2.0 * t) / (1.0 + 2.0 * t))

    def _neg_resolvent(self, v, y, alpha, C):
        return y * (2.0 * C) * np.maximum(0.0, alpha - y * v) / (alpha + 2.0 * C)

    def step(self, v, y, alpha, C):
        a = alpha - y * v
        return 0.0 if a <= 0.0 else y * (2.0 * C) * a / (alpha + 2.0 * C)

    def conjugate(self, c, y, C):
        a = np.asarray(y) * np.asarray(c, dtype=np.float64)
        C = np.broadcast_to(np.asarray(C, dtype=np.float64), a.shape)
        quad = np.divide(a * a, 4.0 * C, out=np.zeros_like(a), where=C > 0)
        return _inf_outside(quad - a, (a >= 0) & ((C > 0) | (a == 0)))

    def at_kink(self, c, y, C):
        return np.asarray(c) == 0

    def kink_push(self, c, v, y, alpha, C):
        return np.where(np.asarray(c) == 0, np.asarray(y) * v - alpha, -np.inf)


class AbsoluteLoss(Loss):
    """L(y, z) = |y - z| (least absolute deviations)."""

    name = "absolute"

    def value(self, y, z):
        return np.abs(np.asarray(y) - z)

    def derivative(self, y, z):
        return np.sign(np.asarray(z) - y)

    def prox(self, v, y, t):
        r = np.asarray(v) - y
        return y + np.sign(r) * np.maximum(0.0, np.abs(r) - t)

    def _neg_resolvent(self, v, y, alpha, C):
        r = alpha * y - v
        return np.sign(r) * np.minimum(C, np.abs(r))

    def step(self, v, y, alpha, C):
        r = alpha * y - v
        if r >= 0.0:
            return r if r < C else C
        return r if -r < C else -C

    def conjugate(self, c, y, C):
        c = np.asarray(c)
        return _inf_outside(-c * y, np.abs(c) <= C)

    def at_kink(self, c, y, C):
        return np.abs(c) == C

    def kink_push(self, c, v, y, alpha, C):
        c, r = np.asarray(c), alpha * np.asarray(y) - v
        return np.where((np.abs(c) == C) & (np.sign(r) == np.sign(c)), np.abs(r) - C, -np.inf)


class EpsilonInsensitiveLoss(Loss):
    """L(y, z) = (|y - z| - epsilon)_+ (support vector regression without intercept)."""

    name = "epsilon_insensitive"

    def __init__(self, epsilon=0.1):
        if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real):
            raise TypeError(f"epsilon must be a number >= 0, got {epsilon!r}.")
        if not math.isfinite(epsilon) or epsilon < 0:
            raise ValueError(f"epsilon must be finite and >= 0, got {epsilon!r}; pass epsilon >= 0.")
        self.epsilon = float(epsilon)

    def __repr__(self):
        return f"EpsilonInsensitiveLoss(epsilon={self.epsilon!r})"

    def value(self, y, z):
        return np.maximum(0.0, np.abs(np.asarray(y) - z) - self.epsilon)

    def derivative(self, y, z):
        r = np.asarray(z) - y
        return np.where(np.abs(r) > self.epsilon, np.sign(r), 0.0)

    def prox(self, v, y, t):
        v = np.asarray(v, dtype=np.float64)
        r = v - y
        return v - np.sign(r) * np.minimum(t, np.maximum(0.0, np.abs(r) - self.epsilon))

    def _neg_resolvent(self, v, y, alpha, C):
        r = alpha * y - v
        return np.sign(r) * np.minimum(C, np.maximum(0.0, np.abs(r) - alpha * self.epsilon))

    def step(self, v, y, alpha, C):
        r = alpha * y - v
        m = abs(r) - alpha * self.epsilon
        if m <= 0.0:
            return 0.0
        m = m if m < C else C
        return m if r > 0.0 else -m

    def conjugate(self, c, y, C):
        c = np.asarray(c)
        return _inf_outside(-c * y + self.epsilon * np.abs(c), np.abs(c) <= C)

    def at_kink(self, c, y, C):
        c = np.asarray(c)
        return (c == 0) | (np.abs(c) == C)

    def kink_push(self, c, v, y, alpha, C):
        c, r = np.asarray(c), alpha * np.asarray(y) - v
        excess = np.abs(r) - alpha * self.epsilon  # the unclipped |c|
        at_bound = (np.abs(c) == C) & (np.sign(r) == np.sign(c))
        return np.where(c == 0, -excess, np.where(at_bound, excess - C, -np.inf))


def sigmoid(s):
    """1 / (1 + e^{-s}) on a Python float, without overflow."""
    if s >= 0.0:
        return 1.0 / (1.0 + math.exp(-s))
    e = math.exp(s)
    return e / (1.0 + e)


def _logistic_margin(x, t):
    """Root s of phi(s) = s - x - t sigmoid(-s) on [x, x + t], vectorised.

    phi is increasing with phi(x) <= 0 <= phi(x + t); Newton steps that leave the current
    bracket are replaced by bisection, so every iteration shrinks the bracket or converges.
    For long moves (t sigmoid(-x) > 10) Newton starts near the root's asymptote
    log(t) - log(s - x) instead of at the upper end.
    """
    x, t = np.broadcast_arrays(np.asarray(x, dtype=np.float64), np.asarray(t, dtype=np.float64))
    shape = x.shape
    x, t = x.ravel(), t.ravel()
    lo, hi = x.copy(), x + t
    move = t * expit(-x)
    s = np.minimum(x + move, hi)
    far = move > 10.0
    if np.any(far):
        lt = np.log(t[far])
        s[far] = np.clip(lt - np.log(np.maximum(1.0, lt - x[far])), lo[far], hi[far])
    todo = np.flatnonzero(t > 0)
    for _ in range(NEWTON_MAX_ITER):
        if todo.size == 0:
            break
        st, xt, tt = s[todo], x[todo], t[todo]
        e = expit(-st)
        phi = st - xt - tt * e
        lo_t = np.where(phi < 0, st, lo[todo])
        hi_t = np.where(phi > 0, st, hi[todo])
        lo[todo], hi[todo] = lo_t, hi_t
        step = phi / (1.0 + tt * e * (1.0 - e))
        new = st - step
        tol = NEWTON_RTOL * (1.0 + np.abs(st))
        small = np.abs(step) <= tol
        outside = ~small & ((new <= lo_t) | (new >= hi_t))
        new = np.where(outside, 0.5 * (lo_t + hi_t), new)
        s[todo] = new
        done = small | (phi == 0) | (hi_t - lo_t <= tol)
        todo = todo[~done]
    return s.reshape(shape)


def logistic_margin_scalar(x, t):
    """Scalar version of :func:`_logistic_margin` on Python floats."""
    if t <= 0.0:
        return x
    lo, hi = x, x + t
    move = t * sigmoid(-x)
    if move > 10.0:
        lt = math.log(t)
        s = min(max(lt - math.log(max(1.0, lt - x)), lo), hi)
    else:
        s = min(x + move, hi)
    for _ in range(NEWTON_MAX_ITER):
        e = sigmoid(-s)
        phi = s - x - t * e
        if phi == 0.0:
            return s
        if phi < 0.0:
            lo = s
        else:
            hi = s
        step = phi / (1.0 + t * e * (1.0 - e))
        tol = NEWTON_RTOL * (1.0 + abs(s))
        if abs(step) <= tol:
            return s - step
        new = s - step
        if not lo < new < hi:
            new = 0.5 * (lo + hi)
        if hi - lo <= tol:
            return new
        s = new
    return s


class LogisticLoss(Loss):
    """L(y, z) = log(1 + exp(-y z)) (kernel logistic regression); y in {-1, +1}.

    The prox has no closed form: it is a one-dimensional safeguarded Newton solve in the margin
    s = y u (bisection whenever a Newton step leaves the bracket [y x, y x + t]).
    """

    name = "logistic"
    classification = True

    def value(self, y, z):
        return -log_expit(np.asarray(y) * z)

    def derivative(self, y, z):
        y = np.asarray(y)
        return -y * expit(-y * np.asarray(z))

    def prox(self, v, y, t):
        y = np.asarray(y, dtype=np.float64)
        return y * _logistic_margin(y * v, t)

    def _neg_resolvent(self, v, y, alpha, C):
        # -J = alpha (u - x) = y C sigmoid(-s): computed from s, not as a difference (no cancellation)
        s = _logistic_margin(y * v / alpha, C / alpha)
        return y * C * expit(-s)

    def step(self, v, y, alpha, C):
        if C <= 0.0:
            return 0.0
        s = logistic_margin_scalar(y * v / alpha, C / alpha)
        return y * C * sigmoid(-s)

    def conjugate(self, c, y, C):
        c = np.asarray(c, dtype=np.float64)
        C = np.broadcast_to(np.asarray(C, dtype=np.float64), c.shape)
        a = np.divide(np.asarray(y) * c, C, out=np.zeros_like(c), where=C > 0)
        inside = (a >= 0) & (a <= 1) & ((C > 0) | (c == 0))
        a = np.clip(a, 0.0, 1.0)
        return _inf_outside(C * (xlogy(a, a) + xlogy(1.0 - a, 1.0 - a)), inside)


LOSSES = {
    "squared": SquaredLoss,
    "hinge": HingeLoss,
    "squared_hinge": SquaredHingeLoss,
    "absolute": AbsoluteLoss,
    "epsilon_insensitive": EpsilonInsensitiveLoss,
    "logistic": LogisticLoss,
}
CLASSIFICATION_LOSSES = ("hinge", "squared_hinge", "logistic")
REGRESSION_LOSSES = ("squared", "absolute", "epsilon_insensitive")


def make_loss(loss, epsilon=0.1):
    """Return a Loss object for a Loss instance or one of the names in LOSSES.

    ``epsilon`` is used by "epsilon_insensitive" only.
    """
    if isinstance(loss, Loss):
        return loss
    if isinstance(loss, str) and loss in LOSSES:
        return EpsilonInsensitiveLoss(epsilon) if loss == "epsilon_insensitive" else LOSSES[loss]()
    raise ValueError(f"loss={loss!r} is not a loss; pass one of {', '.join(map(repr, LOSSES))}.")


def objectives(loss, y, z, c, C):
    """(F(c), D(c)) of :func:`primal_objective` and :func:`dual_objective`, sharing c^T z."""
    z64, c64 = np.asarray(z, dtype=np.float64), np.asarray(c, dtype=np.float64)
    half_cz = 0.5 * np.sum(c64 * z64)
    return float(np.sum(C * loss.value(y, z64)) + half_cz), float(np.sum(loss.conjugate(c64, y, C)) + half_cz)


def primal_objective(loss, y, z, c, C):
    """F(c) = sum_i C_i L(y_i, z_i) + c^T z / 2 with z = K c (problem (2)); float."""
    z64 = np.asarray(z, dtype=np.float64)
    return float(np.sum(C * loss.value(y, z64)) + 0.5 * np.sum(np.asarray(c, dtype=np.float64) * z64))


def dual_objective(loss, y, z, c, C):
    """D(c) = sum_i f_i^*(-c_i) + c^T z / 2 with z = K c; min D = -min F, and F(c) + D(c) >= 0
    is the duality gap. Coordinate descent (Algorithm 1) is exact coordinate minimisation of D."""
    c64 = np.asarray(c, dtype=np.float64)
    return float(np.sum(loss.conjugate(c64, y, C)) + 0.5 * np.sum(c64 * np.asarray(z, dtype=np.float64)))


def softmax(S):
    """Row-wise softmax of the scores S (n, k), computed stably in S's dtype."""
    P = S - S.max(axis=1, keepdims=True)
    np.exp(P, out=P)
    P /= P.sum(axis=1, keepdims=True)
    return P


def softmax_loss(S, Y, w):
    """Softmax probabilities P and the weighted calibrated loss sum_i w_i (lse(s_i) - y_i . s_i)
    (eq. 13 of the least-squares paper, the multinomial logistic loss), computed stably."""
    m = S.max(axis=1)
    P = S - m[:, None]
    np.exp(P, out=P)
    z = P.sum(axis=1)
    P /= z[:, None]
    lse = m.astype(np.float64) + np.log(z.astype(np.float64))
    loss = w @ (lse - np.einsum("ij,ij->i", Y, S).astype(np.float64))
    return P, float(loss)
