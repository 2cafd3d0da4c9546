"""Shared prediction logic of one-vs-rest classifiers built on per-class scores."""

import numpy as np


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
