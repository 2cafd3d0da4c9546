"""Writes a folder of small fitted models, one per estimator of the registry, with their outputs on
fixed rows: ``python tests/data/write_models.py OLD_CHECKOUT/src tests/data/models-VERSION``.
tests/test_persistence_compat.py loads each with today's code and compares the outputs."""
import json, pathlib, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import kernelscale
from kernelscale.registry import ESTIMATORS
from sklearn.base import is_classifier, is_regressor

out = pathlib.Path(sys.argv[2])
rng = np.random.default_rng(0)
X = rng.normal(size=(40, 3))
X_new = rng.normal(size=(7, 3))
y_cls = (X[:, 0] + X[:, 1] > 0).astype(int) + (X[:, 2] > 0.5)
y_reg = np.sin(X.sum(axis=1))
expected = {"X_new": X_new}
small = dict(random_state=0)
for entry in ESTIMATORS:
    cls = entry.cls
    params = cls().get_params()
    kw = {k: v for k, v in {"random_state": 0, "n_components": 16, "n_iter": 20, "block_size": 16,
                            "n_stages": 2, "max_iter": 20, "pca_components": None}.items() if k in params}
    if cls.__name__ == "LSSVMClassifier" or cls.__name__ == "LSSVMRegressor":
        kw.pop("block_size", None)
    est = cls(**kw)
    if is_classifier(est):
        est.fit(X, y_cls)
        expected[cls.__name__] = est.decision_function(X_new) if hasattr(est, "decision_function") else est.predict_proba(X_new)
    elif is_regressor(est):
        est.fit(X, y_reg)
        expected[cls.__name__] = est.predict(X_new)
    else:
        est.fit(X)
        expected[cls.__name__] = est.transform(X_new)
    kernelscale.save(est, out / f"{cls.__name__}.ksm")
(out / "expected.json").write_text(json.dumps({k: np.asarray(v).tolist() for k, v in expected.items()}))
print(kernelscale.__file__, sorted(expected))
