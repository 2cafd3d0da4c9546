"""Saving scikit-learn pipelines of kernelscale estimators (issue 39, item 2): a fitted Pipeline,
FeatureUnion or ColumnTransformer of allowed scikit-learn transformers and kernelscale estimators
saves in the non-executable format of kernelscale.persistence and loads predicting identically;
anything outside the allow-list (kernelscale.sklearn_allowlist) is refused naming the step and the
class, when saving and when loading a tampered file."""

import json
import warnings

import numpy as np
import pytest
from estimator_list import ESTIMATORS as CONFIGURED
from sklearn.base import clone, is_classifier, is_regressor
from sklearn.compose import ColumnTransformer, make_column_selector, make_column_transformer
from sklearn.decomposition import PCA
from sklearn.feature_selection import VarianceThreshold
from sklearn.impute import SimpleImputer
from sklearn.pipeline import Pipeline, make_pipeline, make_union
from sklearn.preprocessing import (
    FunctionTransformer, MaxAbsScaler, MinMaxScaler, Normalizer, OneHotEncoder, PolynomialFeatures,
    QuantileTransformer, RobustScaler, StandardScaler,
)
from sklearn.svm import SVC

import kernelscale
from kernelscale import sklearn_allowlist
from kernelscale.persistence import META_KEY, PersistenceWarning, describe, load, save
from kernelscale.registry import ESTIMATORS

pd = pytest.importorskip("pandas", reason="pandas is not installed")
IDS = [f"{i:02d}-{type(e).__name__}" for i, e in enumerate(CONFIGURED)]
METHODS = ("predict", "predict_proba", "decision_function", "transform")


def _table(n=90, seed=0):
    """A table with numbers (one missing), strings (one missing) and small integers."""
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n) * 10,
                       "c": rng.choice(["red", "green", "blue"], n), "d": rng.integers(0, 3, n)})
    df.loc[3, "a"] = np.nan
    df.loc[4, "c"] = None
    return df, (df["b"] + 5 * (df["c"] == "red") > 0).astype(int)


def _same_outputs(a, b, X):
    """Every output method of the two models is identical on X."""
    used = 0
    for method in METHODS:
        if hasattr(a, method):
            np.testing.assert_array_equal(getattr(b, method)(X), getattr(a, method)(X), err_msg=method)
            used += 1
    assert used


def _round_trip(model, tmp_path):
    path = tmp_path / "pipeline.ksm"
    save(model, path)
    return load(path)


def _preprocessing():
    """A ColumnTransformer of the kinds of columns a table has."""
    numbers = make_pipeline(SimpleImputer(add_indicator=True), StandardScaler())
    words = make_pipeline(SimpleImputer(strategy="most_frequent"),
                          OneHotEncoder(handle_unknown="ignore", sparse_output=False))
    return make_column_transformer((numbers, ["a", "b"]), (words, ["c"]),
                                   (OneHotEncoder(drop="first", sparse_output=False), ["d"]),
                                   remainder="drop", sparse_threshold=0.0)


def test_a_table_pipeline_predicts_identically_after_loading(tmp_path):
    df, y = _table()
    model = make_pipeline(_preprocessing(), MinMaxScaler(), PCA(n_components=5),
                          kernelscale.SLKLClassifier(n_components=30, random_state=0)).fit(df, y)
    loaded = _round_trip(model, tmp_path)
    assert isinstance(loaded, Pipeline) and [n for n, _ in loaded.steps] == [n for n, _ in model.steps]
    _same_outputs(model, loaded, df)
    new, _ = _table(seed=1)  # other rows, unseen words ignored by the encoder
    new.loc[0, "c"] = "purple"
    _same_outputs(model, loaded, new)
    np.testing.assert_array_equal(loaded[:-1].get_feature_names_out(), model[:-1].get_feature_names_out())
    meta = describe(tmp_path / "pipeline.ksm")
    assert meta["class"] == "sklearn.pipeline.Pipeline" and "sklearn_version" in meta


def test_column_transformer_union_and_the_other_allowed_transformers_round_trip(tmp_path):
    df, y = _table()
    X = df[["a", "b", "d"]].fillna(0.0).to_numpy()
    union = make_union(PCA(n_components=2, random_state=0), make_pipeline(MaxAbsScaler(), PolynomialFeatures(2)))
    model = make_pipeline(
        ColumnTransformer([("scaled", RobustScaler(), [0, 1]), ("kept", "passthrough", slice(2, 3))],
                          remainder="drop"),
        VarianceThreshold(), union, Normalizer(), FunctionTransformer(),
        kernelscale.RandomFourierFeatures(n_components=16, random_state=0),
        kernelscale.RegularizedKernelRegressor(kernel="linear"),
    ).fit(X, df["b"].to_numpy())
    _same_outputs(model, _round_trip(model, tmp_path), X)
    transformer = make_column_transformer((StandardScaler(), ["a"]), remainder="passthrough").fit(df[["a", "b", "d"]])
    loaded = _round_trip(transformer, tmp_path)
    np.testing.assert_array_equal(loaded.transform(df[["a", "b", "d"]]), transformer.transform(df[["a", "b", "d"]]))
    assert isinstance(loaded.output_indices_["remainder"], slice)


def _fit_args(est, X):
    if is_classifier(est):
        return X, (X[:, 0] + X[:, 1] > 0).astype(int)
    if is_regressor(est):
        return X, np.sin(X[:, 0]) + X[:, 1]
    return (X,)


@pytest.mark.parametrize("estimator", CONFIGURED, ids=IDS)
def test_every_estimator_in_a_pipeline_round_trips(estimator, tmp_path):
    X = np.random.default_rng(2).normal(size=(60, 4)) * [1, 10, 100, 1]
    model = make_pipeline(StandardScaler(), SimpleImputer(), clone(estimator))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(*_fit_args(estimator, X))
        _same_outputs(model, _round_trip(model, tmp_path), X)


def test_every_registered_estimator_is_covered():
    assert {type(e).__name__ for e in CONFIGURED} >= {entry.name for entry in ESTIMATORS}


@pytest.mark.parametrize("step, cls", [
    (FunctionTransformer(np.log1p), "sklearn.preprocessing.FunctionTransformer"),
    (FunctionTransformer(inverse_func=np.expm1), "sklearn.preprocessing.FunctionTransformer"),
    (QuantileTransformer(n_quantiles=10), "sklearn.preprocessing.QuantileTransformer"),
], ids=["func", "inverse_func", "not-allowed"])
def test_a_step_outside_the_allow_list_is_refused_naming_the_step_and_class(step, cls, tmp_path):
    X = np.abs(np.random.default_rng(0).normal(size=(40, 3)))
    model = make_pipeline(MinMaxScaler(), step, kernelscale.ExactKernelRidge()).fit(X, X[:, 0])
    path = tmp_path / "m.ksm"
    with pytest.raises(TypeError) as info:
        save(model, path)
    name = model.steps[1][0]
    assert f"step {name!r} is a {cls}" in str(info.value)
    assert not path.exists()


def test_a_disallowed_step_deep_in_a_column_transformer_is_named_by_its_path(tmp_path):
    df, y = _table()
    inner = make_column_transformer((make_pipeline(SimpleImputer(), FunctionTransformer(np.sqrt)), ["a"]))
    model = make_pipeline(inner, kernelscale.ExactKernelRidge()).fit(df[["a"]].abs(), y)
    with pytest.raises(TypeError, match=r"Pipeline step 'columntransformer' step 'pipeline' step "
                                        r"'functiontransformer' is a sklearn.preprocessing.FunctionTransformer.*code"):
        save(model, tmp_path / "m.ksm")


def test_other_refusals_when_saving(tmp_path):
    X = np.random.default_rng(0).normal(size=(30, 3))
    y = X[:, 0]
    with pytest.raises(TypeError, match=r"step 'svc' is a sklearn.svm.*SVC, which kernelscale.save does not store"):
        save(make_pipeline(StandardScaler(), SVC()).fit(X, y > 0), tmp_path / "m.ksm")
    with pytest.raises(TypeError, match=r"memory=.* caches fitted steps"):
        save(Pipeline([("s", StandardScaler()), ("k", kernelscale.ExactKernelRidge())], memory=str(tmp_path)).fit(X, y),
             tmp_path / "m.ksm")
    selector = make_column_transformer((StandardScaler(), make_column_selector(dtype_include="number")))
    with pytest.raises(TypeError, match="make_column_selector|_column_transformer"):
        save(make_pipeline(selector, kernelscale.ExactKernelRidge()).fit(pd.DataFrame(X), y), tmp_path / "m.ksm")
    with pytest.raises(TypeError, match="kernelscale.save stores kernelscale estimators"):
        save(StandardScaler().fit(X), tmp_path / "m.ksm")  # a transformer alone: put it in a pipeline
    scaler = StandardScaler().fit(X)
    scaler.extra_ = np.zeros(2)  # an attribute the allow-list does not name
    with pytest.raises(TypeError, match=r"attribute\(s\) \['extra_'\]"):
        save(make_pipeline(scaler, kernelscale.ExactKernelRidge()), tmp_path / "m.ksm")


# ----------------------------------------------------------------------------------------------
# tampered files


def _saved(tmp_path):
    X = np.random.default_rng(0).normal(size=(30, 3))
    model = make_pipeline(StandardScaler(), FunctionTransformer(), kernelscale.ExactKernelRidge()).fit(X, X[:, 0])
    path = tmp_path / "m.ksm"
    save(model, path)
    return path, model, X


def _rewrite(path, mutate):
    with np.load(path, allow_pickle=False) as f:
        arrays = {k: f[k] for k in f.files}
    meta = json.loads(bytes(arrays[META_KEY]).decode())
    mutate(meta)
    arrays[META_KEY] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def _step(meta, i):
    return meta["params"]["steps"][i]["__tuple__"][1]["__object__"]


@pytest.mark.parametrize("func", [{"__type__": "float"}, {"__type__": "numpy.float64"}, "eval"])
def test_a_file_giving_the_identity_function_transformer_a_function_is_refused(func, tmp_path):
    path, _, _ = _saved(tmp_path)
    _rewrite(path, lambda meta: _step(meta, 1)["params"].__setitem__("func", func))
    with pytest.raises(ValueError, match="refusing sklearn.preprocessing.FunctionTransformer: it holds code"):
        load(path)


@pytest.mark.parametrize("name", ["_private", "__class__", "fit", "transform", "mean"])
def test_a_file_setting_an_attribute_outside_the_allow_list_is_refused(name, tmp_path):
    path, _, _ = _saved(tmp_path)
    _rewrite(path, lambda meta: _step(meta, 0)["fitted"].__setitem__(name, 1))
    with pytest.raises(ValueError, match="refusing fitted attribute name .* of sklearn.preprocessing.StandardScaler"):
        load(path)


@pytest.mark.parametrize("class_path", ["sklearn.svm.SVC", "sklearn.preprocessing._data.StandardScaler",
                                        "sklearn.utils.Bunch", "sklearn.pipeline.make_pipeline", "joblib.Memory"])
def test_a_file_naming_a_class_outside_the_allow_list_is_refused(class_path, tmp_path):
    path, _, _ = _saved(tmp_path)
    _rewrite(path, lambda meta: _step(meta, 0).__setitem__("class", class_path))
    with pytest.raises(ValueError, match="refusing to load class"):
        load(path)


def test_a_file_with_a_cache_directory_or_a_bad_slice_is_refused(tmp_path):
    path, _, _ = _saved(tmp_path)
    _rewrite(path, lambda meta: meta["params"].__setitem__("memory", str(tmp_path)))
    with pytest.raises(ValueError, match="caches fitted steps"):
        load(path)
    path, _, _ = _saved(tmp_path)
    _rewrite(path, lambda meta: _step(meta, 0)["fitted"].__setitem__("mean_", {"__slice__": [0, "1", None]}))
    with pytest.raises(ValueError, match="bad slice"):
        load(path)


def test_a_file_of_another_scikit_learn_version_loads_with_a_warning(tmp_path):
    path, model, X = _saved(tmp_path)
    _rewrite(path, lambda meta: meta.__setitem__("sklearn_version", "0.1"))
    with pytest.warns(PersistenceWarning, match="saved with scikit-learn '0.1'"):
        loaded = load(path)
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


def test_the_allow_list_names_public_scikit_learn_classes():
    for path in sklearn_allowlist.ALLOWED:
        cls = sklearn_allowlist.resolve(path)
        assert cls is not None and sklearn_allowlist.allowed_path(cls) == path
    assert sklearn_allowlist.resolve("sklearn.svm.SVC") is None
