"""The registry is the one list of estimators: the package exports, the demo, the shared test
configurations and the estimator table of docs/choosing.md all cover it."""

import inspect
import pathlib

import pytest
from estimator_list import ESTIMATORS as CONFIGURED
from sklearn.base import BaseEstimator
from sklearn.pipeline import Pipeline

import kernelscale
from kernelscale import cli
from kernelscale.registry import ESTIMATORS, by_name

CHOOSING = pathlib.Path(__file__).resolve().parents[1] / "docs" / "choosing.md"
#: exported estimators that are not models a user fits on its own, with the reason
NOT_REGISTERED = {
    "SeededFeatureMap": "a view of the seeded feature blocks that DSG and stagewise store",
}
NAMES = [entry.name for entry in ESTIMATORS]


def test_every_exported_estimator_is_registered():
    exported = {name for name in kernelscale.__all__
                if inspect.isclass(getattr(kernelscale, name)) and issubclass(getattr(kernelscale, name), BaseEstimator)
                and not issubclass(getattr(kernelscale, name), kernelscale.Kernel)}
    assert exported - set(NOT_REGISTERED) == set(NAMES)
    assert len(NAMES) == len(set(NAMES))


@pytest.mark.parametrize("name", NAMES)
def test_registered_estimator_has_a_test_configuration(name):
    assert any(type(est).__name__ == name for est in CONFIGURED), f"add {name} to tests/estimator_list.py"


def _steps(est):
    if isinstance(est, Pipeline):
        return [type(step).__name__ for _, step in est.steps]
    inner = getattr(est, "regressor", None)
    return [type(est).__name__] + ([type(inner).__name__] if inner is not None else [])


@pytest.mark.parametrize("name", NAMES)
def test_registered_estimator_is_in_the_demo(name):
    demo = {step for entry in cli._demo_entries() for step in _steps(entry.make())}
    assert name in demo, f"add {name} to kernelscale demo (cli._demo_entries)"


def test_every_registered_estimator_is_in_the_docs_estimator_table():
    text = CHOOSING.read_text()
    table = text[text.index("## The estimators, by paper"):]
    missing = [name for name in NAMES if f"`{name}`" not in table]
    assert not missing, f"name {missing} in the estimator table of docs/choosing.md"


def test_cli_builds_registered_estimators_and_names_them_on_error():
    assert type(cli.build_estimator("SLKLRegressor", ["n_components=8"])) is by_name("SLKLRegressor").cls
    with pytest.raises(SystemExit, match="SLKLRegressor"):
        cli.build_estimator("KernelRidge", [])
    with pytest.raises(KeyError, match="not a kernelscale estimator"):
        by_name("SVC")


@pytest.mark.parametrize("entry", ESTIMATORS, ids=lambda e: e.name)
def test_every_estimator_documents_each_of_its_parameters(entry):
    """The class docstring (built from shared fragments where estimators share parameters) names
    every constructor parameter as numpydoc does ("name : type")."""
    import re

    doc = entry.cls.__doc__
    assert doc, f"{entry.name} has no docstring (a docstring built by + must be assigned to __doc__)"
    documented = re.findall(r"(?:^\s{4}|; )(\w+(?:, \w+)*) :", doc, flags=re.M)  # "a, b : type; c : type"
    names = {n for group in documented for n in group.split(", ")}
    missing = set(entry.cls().get_params(deep=False)) - names
    assert not missing, f"{entry.name} does not document {sorted(missing)}"
