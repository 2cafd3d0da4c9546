"""The compute layer's rule: no module outside ``kernelscale/ops/`` evaluates a kernel block or a
feature block over rows of X (the ops package docstring).

An AST scan of every other module flags (1) calls that evaluate kernel blocks (``kernel(...)``,
``.block(X, prepared)``, ``._fill(...)``, ``.prepare(...)``) and (2) products whose operand is a data
matrix (a name starting with ``X``, a slice of one, its transpose, or ``self.X``) by ``@``,
``np.matmul``, ``np.dot`` or ``np.einsum``. ``kernels.py`` holds the kernel formulas that ops call.
The few products that stay outside ops are listed in ALLOWED with the reason.
"""

import ast
import pathlib
import re
import textwrap

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "src" / "kernelscale"
FORMULAS = {"kernels.py"}

#: (module, function) -> why its products over X stay outside ops
ALLOWED = {
    ("regularized/fixed_point.py", "linear_fixed_point"): "linear path: the primal w = X^T c of a linear model, no kernel",
    ("regularized/problem.py", "row_sq_norms"): "linear path: the diagonal |x_i|^2 of the linear kernel, O(n d)",
    ("regularized/coordinate_descent.py", "linear_coordinate_descent"): "linear path: the primal w = X^T c, no kernel",
    ("regularized/estimators.py", "_decision_values"): "linear path: scores X w of the fitted primal weights",
    # paper 5's least squares run on a design matrix the caller gives (features already made):
    # X W and X^T R are a linear model's products, not kernel or random-feature blocks
    ("least_squares/estimators.py", "generalized_least_squares"): "linear model on the given design matrix",
    ("least_squares/estimators.py", "calibrated_least_squares"): "linear model on the given design matrix",
    ("least_squares/estimators.py", "_calibrated_step"): "linear model on the given design matrix",
    ("least_squares/estimators.py", "_scores"): "linear model on the given design matrix",
    # the same products, one row chunk at a time (kernelscale.ops.rows maps them over dask chunks)
    ("least_squares/estimators.py", "_gls_scores"): "linear model on the given design matrix, per row chunk",
    ("least_squares/estimators.py", "_gls_gradient"): "linear model on the given design matrix, per row chunk",
    ("least_squares/estimators.py", "_residual_moments"): "linear model on the given design matrix, per row chunk",
    ("least_squares/estimators.py", "_linear_update"): "linear model on the given design matrix, per row chunk",
    ("preprocessing.py", "pca_transform"): "the fitted PCA projection (d x p) of the inputs, before any feature block",
}

_KERNEL_CALL = re.compile(r"^(kernel|kernel_)$")
_BLOCK_METHODS = {"block", "_fill", "prepare"}
_DATA = re.compile(r"^X\w*$")


def _name(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _is_data(node):
    """X, X_train, Xb, X[rows], X.T, self.X, X[s:t].T, X - mean ..."""
    while isinstance(node, (ast.Subscript, ast.Attribute)) and not (
        isinstance(node, ast.Attribute) and _DATA.match(node.attr)
    ):
        if isinstance(node, ast.Attribute) and node.attr != "T":
            return False
        node = node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Sub, ast.Add, ast.Mult)):
        return _is_data(node.left)
    name = _name(node)
    return bool(name and _DATA.match(name))


def violations(source, filename="<module>"):
    """(line, function, what) for each kernel or feature block evaluated in ``source``."""
    found = []

    class Scan(ast.NodeVisitor):
        def __init__(self):
            self.function = None

        def visit_FunctionDef(self, node):
            outer, self.function = self.function, node.name if self.function is None else self.function
            self.generic_visit(node)
            self.function = outer

        visit_AsyncFunctionDef = visit_FunctionDef

        def _flag(self, node, what):
            if (filename, self.function) not in ALLOWED:
                found.append((node.lineno, self.function, what))

        def visit_Call(self, node):
            name = _name(node.func)
            if name and _KERNEL_CALL.match(name):
                self._flag(node, f"kernel block {name}(...)")
            elif isinstance(node.func, ast.Attribute) and name in _BLOCK_METHODS and (
                name == "prepare" or len(node.args) >= 2  # kernel.block(X, prepared), not spec.block(t)
            ):
                self._flag(node, f"kernel block .{name}(...)")
            elif name in ("matmul", "dot", "einsum", "inner") and any(_is_data(a) for a in node.args):
                self._flag(node, f"product {name}(X, ...)")
            self.generic_visit(node)

        def visit_BinOp(self, node):
            if isinstance(node.op, ast.MatMult) and (_is_data(node.left) or _is_data(node.right)):
                self._flag(node, "product X @ ...")
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
def test_no_kernel_or_feature_blocks_outside_ops(module):
    found = violations((PACKAGE / module).read_text(), module)
    assert not found, f"{module} evaluates blocks outside kernelscale.ops: " + "; ".join(
        f"line {line} in {func}: {what}" for line, func, what in found
    )


@pytest.mark.parametrize(
    "snippet",
    [
        "def fit(X, W):\n    return X @ W",
        "def fit(self, idx):\n    return self.X[idx] @ self.W.T",
        "def f(Xb, w):\n    return np.matmul(Xb, w)",
        "def f(X, mean, P):\n    return (X - mean) @ P",
        "def f(X, c):\n    return X.T @ c",
        "def f(kernel, X, Z):\n    return kernel(X, Z)",
        "def f(self, X):\n    return self.kernel_(X, self.X_fit_)",
        "def f(kernel, X, prep):\n    return kernel.block(X, prep)",
    ],
)
def test_scan_catches_blocks_over_rows(snippet):
    assert violations(textwrap.dedent(snippet), "method.py")


@pytest.mark.parametrize(
    "snippet",
    [
        "def f(G, v):\n    return G @ v",
        "def f(op, V):\n    return op.matvec(V)",
        "def f(kernel):\n    return make_kernel(kernel)",
    ],
)
def test_scan_passes_small_algebra_and_ops_calls(snippet):
    assert not violations(textwrap.dedent(snippet), "method.py")
