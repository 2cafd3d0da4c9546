"""The compute layer's rule: no module outside ``kernelscale/ops/`` evaluates a kernel block or a
feature block over rows of X, or does any other product over the n rows (the ops package
docstring). Two checks:

- by sizes, at run time (``ops_probe.py``): every matrix product of every module outside ops is
  measured while every estimator of the shared list fits and predicts; a product with an operand
  of the data's row count and more than a linear model's work per row fails unless an ops
  function runs it (a row executor mapping a per-chunk function) or it is listed in
  ALLOWED_PRODUCTS with the reason;
- by an AST scan: no call that evaluates kernel blocks (``kernel(...)``, ``.block(X, prepared)``,
  ``._fill(...)``, ``.prepare(...)``) outside ops. ``kernels.py`` holds the formulas that ops call.
"""

import ast
import json
import pathlib
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ops_probe

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "src" / "kernelscale"
FORMULAS = {"kernels.py"}

#: (module, function) -> why its products over the rows stay outside ops
ALLOWED_PRODUCTS = {
    # paper 5's least squares run on a design matrix the caller gives (features already made):
    # X W is a linear model's product on the user's own columns, not a kernel or feature block
    ("kernelscale.least_squares.calibrated", "calibrated_step"): "linear model on the given design matrix",
}


@pytest.fixture(scope="module")
def probed_products():
    """Every block-sized product over the rows outside ops while the shared estimator list fits and
    predicts (ops_probe.py, in a fresh interpreter: it rewrites kernelscale's modules on import)."""
    run = subprocess.run([sys.executable, str(pathlib.Path(ops_probe.__file__))], capture_output=True, text=True,
                         timeout=600, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_no_product_over_the_rows_outside_ops(probed_products):
    found = {(p["where"].split(":")[0], p["function"]): p for p in probed_products}
    unexplained = {k: v for k, v in found.items() if k not in ALLOWED_PRODUCTS}
    assert not unexplained, "products over the rows outside kernelscale.ops (move them into an ops verb): " + \
        "; ".join(f"{p['where']} in {p['function']}: {p['what']} of {p['shapes']}" for p in unexplained.values())


def test_every_allowed_product_still_exists(probed_products):
    """An allow-list entry whose product is gone is removed, so the list stays the truth."""
    found = {(p["where"].split(":")[0], p["function"]) for p in probed_products}
    assert set(ALLOWED_PRODUCTS) <= found, set(ALLOWED_PRODUCTS) - found


N, M = ops_probe.N_FIT, ops_probe.N_PREDICT


def _run_planted(source, *shapes):
    """Run the one function of ``source``, rewritten as a module outside ops, on arrays of ones of
    these shapes; return the products it recorded."""
    ns = ops_probe.probe_source(source, module="kernelscale.planted")
    (func,) = [v for k, v in ns.items() if k.startswith("f_")]
    before = len(ops_probe.found)
    func(*(np.ones(shape) for shape in shapes))
    return ops_probe.found[before:]


@pytest.mark.parametrize("source, shapes", [
    ("def f_gram(rows):\n    return rows @ rows.T", [(12, N)]),  # a Gram over the n rows
    ("def f_scores(Phi, a):\n    return Phi @ a", [(N, 32), (32, 1)]),  # features times coefficients
    ("def f_gram(A):\n    return np.dot(A.T, A)", [(M, 16)]),
    ("def f_gram(A):\n    G = A.T\n    G @= A\n    return G", [(N, 16)]),
    ("def f_gram(A):\n    return np.einsum('ij,ik->jk', A, A)", [(N, 16)]),
    ("def f_gram(A):\n    return A.T.dot(A)", [(N, 16)]),
])
def test_the_probe_catches_a_planted_product_over_the_rows(source, shapes):
    (found,) = _run_planted(source, *shapes)
    assert found["where"].startswith("kernelscale.planted") and found["function"].startswith("f_")


@pytest.mark.parametrize("source, shapes", [
    ("def f_linear(X, w):\n    return X @ w", [(N, 3), (3, 3)]),  # O(n d) of a linear model
    ("def f_small(G, v):\n    return G @ v", [(40, 40), (40, 3)]),  # no dimension of the data's rows
])
def test_the_probe_passes_a_linear_model_and_small_algebra(source, shapes):
    assert not _run_planted(source, *shapes)


_KERNEL_CALL = re.compile(r"^(kernel|kernel_)$")
_BLOCK_METHODS = {"block", "_fill", "prepare"}


def _name(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def violations(source):
    """(line, function, what) for each kernel block evaluated in ``source``."""
    found = []

    class Scan(ast.NodeVisitor):
        def __init__(self):
            self.function = None

        def visit_FunctionDef(self, node):
            outer, self.function = self.function, node.name if self.function is None else self.function
            self.generic_visit(node)
            self.function = outer

        visit_AsyncFunctionDef = visit_FunctionDef

        def visit_Call(self, node):
            name = _name(node.func)
            if name and _KERNEL_CALL.match(name):
                found.append((node.lineno, self.function, f"kernel block {name}(...)"))
            elif isinstance(node.func, ast.Attribute) and name in _BLOCK_METHODS and (
                name == "prepare" or len(node.args) >= 2  # kernel.block(X, prepared), not spec.block(t)
            ):
                found.append((node.lineno, self.function, f"kernel block .{name}(...)"))
            self.generic_visit(node)

    Scan().visit(ast.parse(source))
    return found


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] == "ops" or str(rel) in FORMULAS:
            continue
        yield str(rel), path


@pytest.mark.parametrize("module", [m for m, _ in _modules()])
def test_no_kernel_blocks_outside_ops(module):
    found = violations((PACKAGE / module).read_text())
    assert not found, f"{module} evaluates kernel blocks outside kernelscale.ops: " + "; ".join(
        f"line {line} in {func}: {what}" for line, func, what in found
    )


@pytest.mark.parametrize("snippet", [
    "def f(kernel, X, Z):\n    return kernel(X, Z)",
    "def f(self, X):\n    return self.kernel_(X, self.X_fit_)",
    "def f(kernel, X, prep):\n    return kernel.block(X, prep)",
])
def test_scan_catches_kernel_blocks(snippet):
    assert violations(textwrap.dedent(snippet))


@pytest.mark.parametrize("snippet", [
    "def f(op, V):\n    return op.matvec(V)",
    "def f(kernel):\n    return make_kernel(kernel)",
    "def f(spec, t):\n    return spec.block(t)",
])
def test_scan_passes_ops_calls(snippet):
    assert not violations(textwrap.dedent(snippet))
