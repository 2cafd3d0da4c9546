"""Shared logic of the classifiers: class encoding, the memory check of the class-sized arrays,
the target codings (one-vs-rest +-1, one-hot, one-vs-one pairs), and prediction from per-class
scores or from the votes of the pairwise ones."""

import numpy as np
from scipy import sparse
from sklearn.utils.multiclass import check_classification_targets

from ..ops.memory import format_bytes, parse_memory
from .validation import check_label_types


def require_two_classes(classes, name="y"):
    """A ValueError naming ``name`` when ``classes`` (sorted unique labels) has a single class."""
    if classes.size < 2:
        raise ValueError(
            f"{name} has only one class ({classes[0]!r}); a classifier needs samples of at least 2 "
            f"classes (got 1 class)."
        )


def encode_classes(y, name="y"):
    """classes, integer codes of y; a ValueError when y holds a single class or mixes strings
    with numbers."""
    check_label_types(y, name)
    check_classification_targets(y)
    classes, codes = np.unique(y, return_inverse=True)
    require_two_classes(classes, name)
    return classes, codes


def check_class_memory(need, max_memory, n_classes, what):
    """Refuse a fit whose arrays with one column per class (``what``, ``need`` bytes) exceed
    ``max_memory``: called before any of them is allocated."""
    budget = parse_memory(max_memory)
    if need > budget:
        raise ValueError(
            f"max_memory={format_bytes(budget)} is too small for {n_classes} classes: {what} take "
            f"{format_bytes(need)} ({need} bytes) before any kernel is evaluated; increase max_memory to "
            f"at least {need} bytes, or fit fewer classes (e.g. merge rare ones)."
        )


def one_vs_rest_targets(codes, n_classes, dtype=np.float64):
    """+-1 targets, one column per class (a single column, +1 for class 1, for two classes)."""
    if n_classes == 2:
        return np.where(codes == 1, 1.0, -1.0).astype(dtype)[:, None]
    Y = np.full((codes.size, n_classes), -1.0, dtype=dtype)
    Y[np.arange(codes.size), codes] = 1.0
    return Y


def one_vs_rest_from_one_hot(Y):
    """The float64 targets of :func:`one_vs_rest_targets` from one-hot ones (a row chunk of them)."""
    T = 2.0 * np.asarray(Y, dtype=np.float64) - 1.0
    return T[:, 1:] if T.shape[1] == 2 else T


def one_hot_estimates(scores):
    """Estimates of the one-hot codes from the (n, 1) or (n, k) scores of least-squares fits of the
    +-1 codes of :func:`one_vs_rest_targets`: (s + 1) / 2 per class, the single column of two
    classes (the score of class 1) giving [(1 - s) / 2, (1 + s) / 2]. A row's order, and so its
    argmax (the sign of s for two classes), is the scores' order; project onto the probability
    simplex for probabilities."""
    S = np.asarray(scores)
    if S.shape[1] == 1:
        return np.concatenate([(1 - S) / 2, (1 + S) / 2], axis=1)
    return (S + 1) / 2


def one_hot(codes, n_classes, dtype=np.float64):
    """{0, 1} targets, one column per class."""
    Y = np.zeros((codes.size, n_classes), dtype=dtype)
    Y[np.arange(codes.size), codes] = 1.0
    return Y


def class_pairs(n_classes):
    """(a, b) for every pair of class codes a < b, in the order of the one-vs-one problems."""
    a, b = np.triu_indices(n_classes, k=1)
    return np.stack([a, b], axis=1)


def one_vs_one_problems(codes, n_classes):
    """For each pair (a, b) of :func:`class_pairs`: the rows of classes a and b and their +-1
    targets (+1 for a, as LIBSVM's pairwise decision values)."""
    rows = [np.flatnonzero(codes == c) for c in range(n_classes)]
    problems = []
    for a, b in class_pairs(n_classes):
        idx = np.sort(np.concatenate([rows[a], rows[b]]))
        problems.append((idx, np.where(codes[idx] == a, 1.0, -1.0)))
    return problems


def one_vs_one_scores(pair_scores, n_classes):
    """(n, n_classes) scores from the (n, n_pairs) pairwise decision values: each class's votes
    (a positive value votes for the pair's first class) plus its summed signed decision values
    squashed into (-1/3, 1/3), which breaks ties between equal vote counts without overturning a
    vote; the argmax is the majority vote. The pair-to-class maps are sparse (two entries a pair),
    so many classes cost O(n n_pairs), not O(n n_pairs n_classes)."""
    pairs = class_pairs(n_classes)
    m = pairs.shape[0]
    first, second = (sparse.csr_matrix((np.ones(m), (np.arange(m), pairs[:, j])), shape=(m, n_classes))
                     for j in (0, 1))
    wins = (pair_scores > 0).astype(np.float64)
    votes = wins @ first + (1.0 - wins) @ second  # dense @ sparse: a dense array
    confidence = np.asarray(pair_scores, dtype=np.float64) @ (first - second)
    return vote_scores(votes, confidence).astype(pair_scores.dtype, copy=False)


def vote_scores(votes, confidence):
    """Votes plus the summed signed decision values squashed into (-1/3, 1/3) (see
    :func:`one_vs_one_scores`)."""
    return votes + confidence / (3.0 * (np.abs(confidence) + 1.0))


def one_vs_one_scores_in_blocks(pair_scores_of, X, n_classes, max_memory):
    """:func:`one_vs_one_scores` of ``pair_scores_of(X[rows])`` over row blocks of X, so the
    (rows, n_pairs) pairwise values of a block take at most a tenth of ``max_memory``: many
    test points with many classes never hold all n x n_pairs values at once."""
    n_pairs = n_classes * (n_classes - 1) // 2
    rows = max(1, parse_memory(max_memory) // (10 * 8 * (3 * n_pairs + 2 * n_classes)))
    if X.shape[0] <= rows:
        return one_vs_one_scores(pair_scores_of(X), n_classes)
    return np.concatenate([one_vs_one_scores(pair_scores_of(X[start:start + rows]), n_classes)
                           for start in range(0, X.shape[0], rows)])


class OneVsRestScoresMixin:
    """``decision_function`` and ``predict`` for a classifier whose ``_scores(X)`` returns one
    score column per class, or a single column (for ``classes_[1]``) when there are two."""

    def decision_function(self, X):
        """Scores: shape (n,) for two classes (positive means classes_[1]), else (n, n_classes)."""
        scores = self._scores(X)
        return scores[:, 0] if self.classes_.size == 2 else scores

    def predict(self, X):
        """The class of the largest score (of the sign, for two classes)."""
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(int)]
        return self.classes_[np.argmax(scores, axis=1)]
