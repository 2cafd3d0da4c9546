"""One-vs-one exact LS-SVM: the front door's exact model for three classes or more when the
search finds it better than one-vs-rest.

For every pair (a, b) of classes, the exact LS-SVM with bias (:func:`kernelscale.exact.exact_lssvm`,
docs/algorithms.md section 4.1) fits +1 on the rows of a and -1 on those of b; a new point goes to
the class with the most pairwise wins, ties broken by the summed decision values
(:func:`kernelscale.base.classifier.one_vs_one_scores`, LIBSVM's rule). The squared loss on +-1
codes estimates 2 P(a | x, {a, b}) - 1, which one-vs-rest codes cannot do when many classes
share the rest: on 30 well-separated classes one-vs-one least squares makes a third fewer errors
than one-vs-rest (benchmarks/studies/auto.md). It is also cheaper: the pairs' systems, of about
2n/k rows each, cost 4 n^3 / (3 k) flops in all against n^3 / 3.

Storage is one (n, k) array, not one column per pair: the rows are kept sorted by class, and a
row of class a holds in column b its coefficient in the problem (a, b). The decision value of a
pair is then K(x, X_a) A_a[:, b] + K(x, X_b) A_b[:, a] + b_ab, and all of them come from k kernel
products of total cost O(n_test n k), as for one-vs-rest.
"""

from __future__ import annotations

from numbers import Real

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ..base.boundary import BoundaryMixin
from ..base.classifier import class_pairs, encode_classes, one_vs_one_scores_in_blocks
from ..base.estimator import INPUT_ATTRIBUTES, commit_fit, resolve_kernel, validate_fit_data
from ..base.params import MEMORY_CONSTRAINT
from ..base.validation import validate_data
from ..exact import exact_lssvm, kernel_predict
from ..kernels import KERNEL_NAMES, Kernel
from ..ops.memory import parse_memory
from ..simplex import project_simplex

__all__ = ["OneVsOneLSSVMClassifier"]


class OneVsOneLSSVMClassifier(ClassifierMixin, BoundaryMixin, BaseEstimator):
    """Exact LS-SVM with bias on every pair of classes (one-vs-one), majority vote.

    Parameters
    ----------
    kernel : Kernel or str, default="gaussian"
    C : float > 0, default=10
        The LS-SVM regularisation (the ridge on K is 1 / C), shared by all pairs.
    max_memory : int, str or None
        Budget of each pair's kernel matrix and of the prediction's kernel blocks.
    random_state : int, RandomState or None
        Seeds the median heuristic of an unresolved kernel (``sigma="median"``).

    Attributes
    ----------
    classes_ : (k,)
    X_fit_ : (n, d) the training rows, sorted by class
    class_starts_ : (k + 1,) class c owns rows ``class_starts_[c]:class_starts_[c + 1]`` of X_fit_
    dual_coef_ : (n, k) row i of class a holds in column b its coefficient in the pair (a, b)
    intercept_ : (k, k) ``intercept_[a, b]`` (a < b) the bias of the pair (a, b)
    kernel_ : Kernel
    n_features_in_ : int
    """

    _parameter_constraints: dict = {
        "kernel": [Kernel, StrOptions(set(KERNEL_NAMES))],
        "C": [Interval(Real, 0, None, closed="neither")],
        "max_memory": MEMORY_CONSTRAINT,
        "random_state": ["random_state"],
    }

    def __init__(self, kernel="gaussian", *, C=10.0, max_memory=None, random_state=None):
        self.kernel = kernel
        self.C = C
        self.max_memory = max_memory
        self.random_state = random_state

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Fit the k (k - 1) / 2 pairwise exact LS-SVMs on X (n, d) and class labels y (n,)."""
        X, y, fitted = validate_fit_data(self, X, y, dtype=[np.float64, np.float32])
        classes, codes = encode_classes(y)
        kernel = resolve_kernel(self.kernel, X, self.random_state)
        order = np.argsort(codes, kind="stable")
        X, codes = X[order], codes[order]
        k = classes.size
        starts = np.searchsorted(codes, np.arange(k + 1))
        coef = np.zeros((X.shape[0], k), dtype=X.dtype)
        intercept = np.zeros((k, k), dtype=X.dtype)
        for a, b in class_pairs(k):
            rows = np.r_[starts[a]:starts[a + 1], starts[b]:starts[b + 1]]  # X may be scipy.sparse
            size_a = starts[a + 1] - starts[a]
            t = np.where(np.arange(rows.size) < size_a, 1.0, -1.0).astype(X.dtype)
            bias, dual = exact_lssvm(kernel, X[rows], t, self.C, max_memory=self.max_memory)
            coef[starts[a]:starts[a + 1], b] = dual[:size_a]
            coef[starts[b]:starts[b + 1], a] = dual[size_a:]
            intercept[a, b] = bias
        fitted.update(classes_=classes, X_fit_=X, class_starts_=starts, dual_coef_=coef,
                      intercept_=intercept, kernel_=kernel)
        return commit_fit(self, fitted, stale=INPUT_ATTRIBUTES)

    def pairwise_decision(self, X):
        """(n, k (k - 1) / 2) decision values, pairs in the order of ``class_pairs``: positive
        for the pair's first (smaller) class."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        return self._pair_values(X, parse_memory(self.max_memory))

    def _pair_values(self, X, budget):
        k = self.classes_.size
        starts = self.class_starts_
        # S[:, c, :] = K(x, X_c) A_c: the contributions of class c's rows to every pair with c
        S = np.stack([kernel_predict(self.kernel_, X, self.X_fit_[starts[c]:starts[c + 1]],
                                     self.dual_coef_[starts[c]:starts[c + 1]], max_memory=budget)
                      for c in range(k)], axis=1)
        a, b = class_pairs(k).T
        return S[:, a, b] + S[:, b, a] + self.intercept_[a, b]

    def _scores(self, X):
        """(n, k) votes plus squashed summed decision values, over row blocks within the budget."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        budget = parse_memory(self.max_memory)
        return one_vs_one_scores_in_blocks(lambda rows: self._pair_values(rows, budget), X, self.classes_.size,
                                           budget)

    def decision_function(self, X):
        """(n, k) votes plus squashed summed decision values, whose argmax is ``predict``; for two
        classes the (n,) decision value, positive for ``classes_[1]``."""
        if self.classes_.size == 2:
            return -self.pairwise_decision(X)[:, 0]
        return self._scores(X)

    def predict(self, X):
        """The class with the most pairwise wins."""
        return self.classes_[np.argmax(self._scores(X), axis=1)]

    def predict_proba(self, X):
        """The scores of the vote projected onto the probability simplex, as for the library's
        other one-vs-one classifier (SLKL); the argmax is ``predict``."""
        return project_simplex(self._scores(X))
