"""The scikit-learn classes :func:`kernelscale.save` stores beside kernelscale's own, and what of them.

A fitted preprocessing + model pipeline is saved in the same non-executable format as a
kernelscale model (:mod:`kernelscale.persistence`): a ``Pipeline``, ``FeatureUnion`` or
``ColumnTransformer`` whose steps are kernelscale estimators and the scikit-learn transformers
listed in :data:`ALLOWED`. For each allowed class the list names every fitted attribute, private
ones included, that loading may set (beside its constructor parameters and :data:`COMMON`): these
are data (arrays, numbers, strings, dtypes, slices, lists, tuples, str-keyed dicts and nested
allowed objects), never code. A class outside the list, a fitted attribute outside its entry (a
scikit-learn version that stores something new) or a parameter holding code is refused when
saving, naming the step, the class and what is wrong.

Two classes are allowed only in a form that holds no code: ``FunctionTransformer`` without
functions (``func=None``, ``inverse_func=None``: the identity, which is what a ColumnTransformer
makes of ``"passthrough"``), and ``Pipeline`` with ``memory=None`` (a cache directory would make a
loaded pipeline write files when refitted).

Loading imports the modules of the allowed classes (``sklearn.pipeline``, ``sklearn.compose``,
``sklearn.preprocessing``, ``sklearn.impute``, ``sklearn.decomposition``,
``sklearn.feature_selection``) and no other, builds the classes with ``cls(**params)`` (scikit-
learn's ``__init__`` stores its parameters) and sets the listed attributes only. A file saved with
another scikit-learn version loads with a :class:`~kernelscale.persistence.PersistenceWarning`:
the fitted attributes are scikit-learn's internals, which may change between versions.
"""

from __future__ import annotations

import importlib

from sklearn.base import BaseEstimator

__all__ = ["ALLOWED", "COMMON", "COMPOSITES", "allowed_path", "resolve", "fitted_names", "check_params", "saved_state",
           "not_allowed"]

#: fitted attributes every allowed class may have (scikit-learn's validation and set_output)
COMMON = ("n_features_in_", "feature_names_in_", "_sklearn_output_config")

#: the public path of each allowed class -> its fitted attributes beside :data:`COMMON`
ALLOWED = {
    "sklearn.pipeline.Pipeline": (),
    "sklearn.pipeline.FeatureUnion": (),
    "sklearn.compose.ColumnTransformer": (
        "_columns", "_transformer_to_input_indices", "_remainder", "_n_features", "_name_to_fitted_passthrough",
        "sparse_output_", "transformers_", "output_indices_",
    ),
    "sklearn.preprocessing.StandardScaler": ("n_samples_seen_", "mean_", "var_", "scale_"),
    "sklearn.preprocessing.MinMaxScaler": ("n_samples_seen_", "scale_", "min_", "data_min_", "data_max_",
                                           "data_range_"),
    "sklearn.preprocessing.MaxAbsScaler": ("n_samples_seen_", "max_abs_", "scale_"),
    "sklearn.preprocessing.RobustScaler": ("center_", "scale_"),
    "sklearn.preprocessing.Normalizer": (),
    "sklearn.preprocessing.OneHotEncoder": (
        "categories_", "drop_idx_", "_drop_idx_after_grouping", "_infrequent_enabled", "_n_features_outs",
        "_infrequent_indices", "_default_to_infrequent_mappings",
    ),
    "sklearn.preprocessing.PolynomialFeatures": ("n_output_features_", "_min_degree", "_max_degree", "_n_out_full"),
    "sklearn.preprocessing.FunctionTransformer": (),
    "sklearn.impute.SimpleImputer": ("statistics_", "indicator_", "_fit_dtype", "_fill_dtype"),
    "sklearn.impute.MissingIndicator": ("features_", "_precomputed", "_n_features"),
    "sklearn.decomposition.PCA": (
        "n_components_", "components_", "explained_variance_", "explained_variance_ratio_", "singular_values_",
        "mean_", "noise_variance_", "n_samples_", "_fit_svd_solver",
    ),
    "sklearn.feature_selection.VarianceThreshold": ("variances_",),
}

#: the allowed classes kernelscale.save takes as the model itself (the others only inside them)
COMPOSITES = ("sklearn.pipeline.Pipeline", "sklearn.pipeline.FeatureUnion", "sklearn.compose.ColumnTransformer")

#: parameters of the composites that hold (name, step, ...) tuples: messages name the step
STEP_LISTS = ("steps", "transformer_list", "transformers", "transformers_")


def resolve(path):
    """The allowed class at ``path`` (a key of :data:`ALLOWED`), importing its module; None for
    any other path (nothing is imported then)."""
    if not isinstance(path, str) or path not in ALLOWED:
        return None
    module_name, _, name = path.rpartition(".")
    cls = getattr(importlib.import_module(module_name), name, None)
    if not (isinstance(cls, type) and issubclass(cls, BaseEstimator)):
        return None
    return cls


def allowed_path(cls):
    """The key of :data:`ALLOWED` naming ``cls`` exactly (not a subclass), or None."""
    if not cls.__module__.startswith("sklearn."):
        return None
    for path in ALLOWED:
        if path.rpartition(".")[2] == cls.__name__ and resolve(path) is cls:
            return path
    return None


def fitted_names(path):
    """The fitted attributes loading may set on an object of the allowed class ``path``."""
    return frozenset(ALLOWED[path]) | frozenset(COMMON)


def check_params(path, params):
    """None, or why the parameters ``params`` of the allowed class ``path`` make an object that
    holds code (a FunctionTransformer with a function, a Pipeline with a cache directory)."""
    if path == "sklearn.preprocessing.FunctionTransformer":
        code = [k for k in ("func", "inverse_func") if params.get(k) is not None]
        if code or params.get("feature_names_out") not in (None, "one-to-one"):
            named = ", ".join(f"{k}={params.get(k)!r}" for k in code or ["feature_names_out"])
            return (f"it holds code ({named}); kernelscale.save stores no functions. Only the identity "
                    f"FunctionTransformer() is stored: apply the function before the pipeline, or use a "
                    f"scikit-learn transformer of the allow-list (kernelscale.sklearn_allowlist.ALLOWED)")
    if path == "sklearn.pipeline.Pipeline" and params.get("memory") is not None:
        return (f"memory={params['memory']!r} caches fitted steps in a directory, which a loaded pipeline would "
                f"write to; save it with memory=None")
    return None


def saved_state(est, where):
    """(path, params, fitted) of the allowed object ``est`` as :func:`kernelscale.save` stores it:
    its constructor parameters and the fitted attributes of its entry; a TypeError naming
    ``where`` (the step) when its parameters hold code or it has an attribute the entry does not
    name."""
    path = allowed_path(type(est))
    params = est.get_params(deep=False)
    why = check_params(path, params)
    if why:
        raise TypeError(f"{where} is a {path}, which kernelscale.save cannot store: {why}.")
    fitted = {name: value for name, value in vars(est).items() if name not in params}
    unknown = sorted(set(fitted) - fitted_names(path))
    if unknown:
        raise TypeError(
            f"{where} is a {path} with the attribute(s) {unknown}, which kernelscale's allow-list of its fitted "
            f"state (kernelscale.sklearn_allowlist.ALLOWED) does not name: this scikit-learn version stores "
            f"something kernelscale does not know to be data, so it is not saved."
        )
    return path, params, fitted


def not_allowed(class_path, where):
    """The TypeError of :func:`kernelscale.save` for a scikit-learn estimator (``class_path``) at
    ``where`` (the step) that the allow-list does not name."""
    return TypeError(
        f"{where} is a {class_path}, which kernelscale.save does not store: it stores kernelscale estimators "
        f"and, in pipelines, the scikit-learn classes of its allow-list "
        f"({', '.join(p.rpartition('.')[2] for p in ALLOWED)}); replace that step, or apply it before the pipeline."
    )
