"""The package's layout keeps its promises (docs/contributing.md, "Where things live"): no import
cycle, no module over 900 lines outside ops/, no private name used across packages, and the
layers import downwards only."""

import ast
from pathlib import Path

import pytest

from benchmarks.tools import import_graph

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "kernelscale"

#: the method families: none imports another
FAMILIES = ("slkl", "doubly_stochastic", "regularized", "lssvm", "least_squares")
#: the layers below the families, and what each may import from kernelscale
LAYERS = {
    "ops": {"ops", "base.validation", "kernels"},
    "base": {"base", "ops", "dask", "kernels", "losses", "linalg"},
    "dask": {"dask", "ops", "base"},
}


def _unit(module):
    """The package a module belongs to: kernelscale.<package>, or the top-level module itself."""
    parts = module.split(".")
    return ".".join(parts[:2])


@pytest.fixture(scope="module")
def graph():
    mods = import_graph.modules(PACKAGE)
    return mods, import_graph.edges(mods)


def test_no_import_cycle_even_through_imports_inside_functions():
    cycles = import_graph.figures(PACKAGE)["cycles"]
    assert not cycles, f"import cycles: {cycles}"


def test_no_module_over_900_lines_outside_ops():
    over = {m: n for m, n in import_graph.figures(PACKAGE)["over_900_lines"].items()
            if not m.startswith("kernelscale.ops.")}
    assert not over, f"split these modules by idea: {over}"


def test_no_family_imports_another(graph):
    _, pairs = graph
    crossing = [(a, b) for a, b in pairs
                if _unit(a).split(".")[-1] in FAMILIES and _unit(b).split(".")[-1] in FAMILIES
                and _unit(a) != _unit(b)]
    assert not crossing, crossing


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_the_layers_import_downwards(layer, graph):
    _, pairs = graph
    allowed = {f"kernelscale.{m}" for m in LAYERS[layer]}
    wrong = [(a, b) for a, b in pairs if _unit(a) == f"kernelscale.{layer}"
             and not any(b == m or b.startswith(m + ".") for m in allowed)]
    assert not wrong, f"{layer} imports above itself: {wrong}"


def test_no_private_name_crosses_packages(graph):
    mods, _ = graph
    found = []
    for name, (path, is_package) in mods.items():
        package = name if is_package else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if not source.startswith("kernelscale"):
                continue
            for alias in node.names:
                target = f"{source}.{alias.name}" if f"{source}.{alias.name}" in mods else source
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                if private and _unit(target) != _unit(name):
                    found.append(f"{name} imports {alias.name} from {source}")
    assert not found, found
