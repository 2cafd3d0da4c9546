"""SLKL for more than two classes: one-vs-one over shared candidates, and the memory plan that
chooses between one-vs-one and one-vs-rest (docs/algorithms.md section 1.4).

A classifier regresses +-1 labels. One-vs-rest solves one problem per class on all rows. One-vs-one
solves one problem per pair of classes (a, b) on the rows of a and b only, with targets +1 on a and
-1 on b, all over the same M candidates. Each pair's problem is the Gram solver's: with C_c the
candidate columns restricted to the rows of class c (rows scaled by sqrt(w)),

    Q_ab = C_a^T C_a + C_b^T C_b,   r_ab = C_a^T sqrt(w_a) - C_b^T sqrt(w_b),
    y^T W y = sum(w_a) + sum(w_b),

so ONE pass over the rows sums, per class, C_c^T C_c (M x M), C_c^T sqrt(w_c), sum(w_c) and the
number of rows of positive weight (:func:`class_gram_sums`), and the k (k - 1) / 2 pairs are then
solved from these M-sized quantities without touching a row again. :func:`class_gram_sums` is a
row executor's ``sum`` function (:mod:`kernelscale.ops.rows`): applied to the whole arrays on the
host, or per row chunk of dask arrays and added up a tree.

The memory plan counts everything a decomposition holds before anything class-sized is
allocated (:func:`ovo_bytes`, :func:`one_vs_rest_bytes`), against a budget in bytes resolved once
per fit by the estimator: ``multi_class="auto"`` takes one-vs-one when it fits in half of it
(:func:`choose_decomposition`).
"""

from __future__ import annotations

import numpy as np

from ..base.classifier import check_class_memory
from ..base.validation import array_bytes
from ..ops.kernel import KernelOperator
from ..ops.rows import SPLIT_EVERY

__all__ = ["class_gram_sums", "pair_sums", "pair_gram", "partial_sums", "ovo_gram_bytes", "ovo_bytes",
           "one_vs_rest_bytes", "choose_decomposition", "check_ovo_memory", "check_one_vs_rest_memory"]


def class_gram_sums(X, Y, w, *, kernel, points, scale, budget):
    """The one-vs-one Gram quantities of the rows X, from their one-hot classes Y (n, k) and
    weights w (None for ones): per class c, C_c^T C_c (k, M, M) and C_c^T sqrt(w_c) (M, k) with
    C_c = sqrt(w_c) K(X_c, points) scale, sum(w_c) and the number of rows of positive weight.
    A pair (a, b) is then Q_a + Q_b, r_a - r_b, sum(w_a) + sum(w_b) (:func:`pair_sums`)."""
    member = np.asarray(Y) > 0
    M, k = points.shape[0], member.shape[1]
    Qs, R, wsum, counts = np.zeros((k, M, M)), np.zeros((M, k)), np.zeros(k), np.zeros(k)
    for c in range(k):
        rows = np.flatnonzero(member[:, c])
        if rows.size == 0:
            continue
        sqrt_w = None if w is None else np.sqrt(np.asarray(w[rows], dtype=np.float64))
        target = np.ones((rows.size, 1)) if sqrt_w is None else sqrt_w[:, None]
        Xc = X[rows]
        Qs[c], R[:, c:c + 1] = KernelOperator(kernel, Xc, budget).column_gram(
            None, target, scale=scale, weights=sqrt_w, budget=budget, points=points,
            fixed_bytes=Qs.nbytes + R.nbytes + array_bytes(Xc))
        wsum[c] = rows.size if w is None else float(np.sum(w[rows], dtype=np.float64))
        counts[c] = rows.size if w is None else np.count_nonzero(w[rows] > 0)
    return Qs, R, wsum, counts


def pair_sums(R, wsum, counts, pairs):
    """Per pair (a, b) of ``pairs`` (p, 2): C^T W t = r_a - r_b (M, p), y^T W y = sum(w_a) + sum(w_b)
    and the rows of positive weight, from the per-class sums of :func:`class_gram_sums`."""
    first, second = pairs[:, 0], pairs[:, 1]
    return R[:, first] - R[:, second], wsum[first] + wsum[second], counts[first] + counts[second]


def pair_gram(Qs, pair):
    """Q = Q_a + Q_b of the pair (a, b) (a new M x M array: the solver's state of this pair)."""
    return Qs[pair[0]] + Qs[pair[1]]


def partial_sums(distributed):
    """How many per-class Gram sums a one-vs-one fit may hold at once: one, or on dask row chunks
    a node of the tree reduction's SPLIT_EVERY chunk sums, its result and a chunk in progress."""
    return SPLIT_EVERY + 2 if distributed else 1


def ovo_gram_bytes(M, k, partial_sums=1):
    """The one-vs-one Gram solver's bytes: the per-class M x M Gram matrices (``partial_sums``
    copies of them: a distributed fit's tree adds up to SPLIT_EVERY chunks' at once), C^T W per
    class and pair and the solver state of one pair (Q_a + Q_b, G and their temporaries)."""
    return 8 * (partial_sums * k * M * M + 4 * M * M + M * (k + k * (k - 1) // 2))


def ovo_bytes(n, M, k, partial_sums=1):
    """All a one-vs-one fit holds beside X and its kernel blocks: the one-hot targets (with the
    copy of the rows of positive weight), the Gram solver's state of :func:`ovo_gram_bytes` and
    the weights, steps and coefficients of the M candidates for every pair."""
    return 16 * n * k + ovo_gram_bytes(M, k, partial_sums) + 8 * 5 * M * (k * (k - 1) // 2)


def one_vs_rest_bytes(n, M, k):
    """float64 bytes of the arrays with one column per output: the targets (with their weighted
    copies), C^T Y of the Gram solver and the weights, steps and coefficients of the M candidates."""
    return 8 * k * (3 * n + 6 * M)


def choose_decomposition(multi_class, columns, n_classes, n, M, budget, distributed):
    """"ovo" or "ovr": ``multi_class`` resolved for ``n_classes`` classes of n samples and M
    candidates (a ValueError for one-vs-one with a column mode other than the Gram solver).
    "auto" takes one-vs-one where all it holds (:func:`ovo_bytes`) fits in half of ``budget``
    (bytes)."""
    if n_classes == 2 or multi_class == "ovr":
        return "ovr"
    gram_solver = columns in ("auto", "gram")
    if multi_class == "ovo":
        if not gram_solver:
            raise ValueError(
                f"multi_class='ovo' runs on the Gram solver (got columns={columns!r}); use columns='auto' "
                f"or 'gram', or multi_class='ovr'.")
        return "ovo"
    need = ovo_bytes(n, M, n_classes, partial_sums(distributed))
    return "ovo" if gram_solver and 2 * need <= budget else "ovr"


def check_ovo_memory(n, M, k, budget, distributed):
    """A ValueError, before anything class-sized is allocated, when one-vs-one does not fit ``budget``."""
    check_class_memory(ovo_bytes(n, M, k, partial_sums(distributed)), budget, k,
                       f"the per-class Gram matrices and the state of the {k * (k - 1) // 2} one-vs-one problems "
                       f"(or pass multi_class='ovr')")


def check_one_vs_rest_memory(n, M, k, budget):
    """A ValueError, before anything class-sized is allocated, when one-vs-rest does not fit ``budget``."""
    check_class_memory(one_vs_rest_bytes(n, M, 1 if k == 2 else k), budget, k,
                       "the one-vs-rest targets and the per-class SLKL state")
