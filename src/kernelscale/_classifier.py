"""Shared logic of the classifiers: class encoding and one-vs-rest prediction from per-class scores."""

import numpy as np
from sklearn.utils.multiclass import check_classification_targets


def require_two_classes(classes, name="y"):
    """A ValueError naming ``name`` when ``classes`` (sorted unique labels) has a single class."""
    if classes.size < 2:
        raise ValueError(
            f"{name} has only one class ({classes[0]!r}); a classifier needs samples of at least 2 "
            f"classes (got 1 class)."
        )


def encode_classes(y, name="y"):
    """classes, integer codes of y; a ValueError when y holds a single class."""
    check_classification_targets(y)
    classes, codes = np.unique(y, return_inverse=True)
    require_two_classes(classes, name)
    return classes, codes


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
