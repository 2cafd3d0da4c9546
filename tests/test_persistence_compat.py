"""Models saved by an earlier kernelscale keep loading and predicting identically.

``tests/data/models-0.1.0`` was written by the code before the package layout moved into one
package per method family (commit 466455e; ``tests/data/write_models.py``): its files record the
classes under their old module paths (``kernelscale.least_squares.stagewise.StagewiseClassifier``, ...).
"""

import json
from pathlib import Path

import numpy as np
import pytest

import kernelscale
import kernelscale.base.moved
from kernelscale.registry import ESTIMATORS

FOLDER = Path(__file__).parent / "data" / "models-0.1.0"
#: the estimators 0.1.0 had (the files of the folder); later ones have no 0.1.0 model to load
IN_0_1_0 = [e for e in ESTIMATORS if (FOLDER / f"{e.name}.ksm").is_file()]


def test_every_estimator_of_0_1_0_has_its_file():
    assert len(IN_0_1_0) == 16, "a 0.1.0 model file is missing from tests/data/models-0.1.0"


@pytest.mark.parametrize("entry", IN_0_1_0, ids=lambda e: e.name)
def test_a_model_saved_before_the_layout_moved_loads_and_predicts_identically(entry):
    expected = json.loads((FOLDER / "expected.json").read_text())  # floats as repr: exact
    model = kernelscale.load(FOLDER / f"{entry.name}.ksm")
    assert type(model) is entry.cls
    X_new = np.asarray(expected["X_new"])
    if entry.kind == "transformer":
        out = model.transform(X_new)
    elif entry.kind == "classifier":
        out = model.decision_function(X_new) if hasattr(model, "decision_function") else model.predict_proba(X_new)
    else:
        out = model.predict(X_new)
    # the same arithmetic on the same arrays: only BLAS summation order may differ
    np.testing.assert_allclose(out, expected[entry.name], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("old, new", sorted(kernelscale.base.moved.MOVED.items()))
def test_an_old_import_path_gives_the_moved_module_with_a_deprecation_warning(old, new):
    import importlib
    import sys

    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=new):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)


@pytest.mark.parametrize("entry", ESTIMATORS, ids=lambda e: e.name)
def test_a_model_file_records_the_public_path_of_its_class(entry, tmp_path):
    from kernelscale.persistence import META_KEY

    kernelscale.save(entry.cls(), tmp_path / "m.ksm")
    with np.load(tmp_path / "m.ksm", allow_pickle=False) as f:
        meta = json.loads(bytes(f[META_KEY]).decode("utf-8"))
    assert meta["class"] == f"kernelscale.{entry.name}"
