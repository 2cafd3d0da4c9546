"""A runtime probe of the compute layer's rule: no product over the n rows of the data outside
``kernelscale.ops`` (used by test_ops_boundary.py).

Run as a script, it imports kernelscale with every module outside ``ops/`` rewritten on import
(:class:`ProbeFinder`): each matrix product in it (``a @ b``, ``a @= b``, ``np.dot``,
``np.matmul``, ``np.einsum``, ``np.inner``, ``np.tensordot``, ``np.vdot``, ``a.dot(b)``) becomes a
call of :func:`product` that measures its operands' shapes before computing it. It then fits every
estimator of ``estimator_list.py`` on N_FIT rows and predicts on N_PREDICT rows (two primes that no
parameter of the list equals, with 3 features and 3 classes) and prints, as JSON, each product
whose operand has a dimension of N_FIT or N_PREDICT rows and whose multiply-adds exceed
``WORK_PER_ROW`` per row: work of kernel or feature blocks (n x m with m centres, features,
columns), not the O(n (d + k)) of a linear model, labels or weights. Sizes, not names: a Gram
``rows @ rows.T`` over the n rows is caught whatever its operands are called.

A product run by a function of ``kernelscale.ops`` up the stack (a row executor mapping a
family's per-chunk function over row chunks) is ops' work and not recorded. The modules numba
compiles (their loops must stay plain numba code) and the kernel formulas of ``kernels.py`` (which
ops evaluates block by block) are read as they are.
"""

from __future__ import annotations

import ast
import importlib.abc
import importlib.machinery
import json
import sys
import warnings
from pathlib import Path

import numpy as np

N_FIT, N_PREDICT = 263, 241
#: multiply-adds per row above which an n-sized product is block work (d = 3 features, k <= 3
#: classes in the probe's data: a linear model's X w or Y^T w costs at most 3 per row and column)
WORK_PER_ROW = 24
#: modules read unchanged: those numba compiles, and the kernel formulas that ops evaluates
UNPROBED = {"kernelscale.regularized.cd_loops", "kernelscale.slkl.loop", "kernelscale.kernels"}
_PRODUCTS = {"dot", "matmul", "einsum", "inner", "tensordot", "vdot"}

found = []


def _work(name, arrays, result):
    """Multiply-adds of the product (from the operand and result sizes)."""
    if name == "einsum":
        sizes = {}
        spec = arrays[0]
        if isinstance(spec, str):
            inputs = spec.split("->")[0].split(",")
            for labels, a in zip(inputs, arrays[1:]):
                for label, size in zip(labels.strip(), np.shape(a)):
                    sizes[label] = size
            return int(np.prod(list(sizes.values()), dtype=np.float64)) if sizes else 0
        return 0
    first = arrays[0]
    inner = first.shape[-1] if first.ndim else 1
    return int(np.prod(np.shape(result), dtype=np.float64) * max(inner, 1))


def product(name, where, receiver, func, *args, **kwargs):
    """Compute ``func(*args)`` (a method of ``receiver``, or a numpy function) and record it when
    it is block work over the data's rows."""
    result = func(*args, **kwargs)
    if not isinstance(receiver, np.ndarray) and receiver is not np:
        return result  # another object's method: its own body is probed where it is kernelscale's
    arrays = [a for a in ([receiver] if receiver is not np else []) + list(args)
              if isinstance(a, (np.ndarray, str))]
    if not any(isinstance(a, np.ndarray) for a in arrays):
        return result
    shapes = [tuple(a.shape) for a in arrays if hasattr(a, "shape")]
    rows = [n for n in (N_FIT, N_PREDICT) if any(n in s for s in shapes)]
    if rows:
        work = _work(name, arrays, result)
        if work > WORK_PER_ROW * rows[0] and not _under_ops():
            frame = sys._getframe(1)
            found.append({"where": where, "function": frame.f_code.co_name, "what": name,
                          "shapes": shapes, "work": work})
    return result


def _under_ops():
    """Whether a kernelscale.ops function is up the stack: a row executor mapping the caller over
    row chunks (the family states the pass, ops runs it within the budget)."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_globals.get("__name__", "").startswith("kernelscale.ops"):
            return True
        frame = frame.f_back
    return False


def _matmul(a, b):
    return a @ b


class _Rewrite(ast.NodeTransformer):
    """Products become calls of ``__ks_product__(name, where, func, *args)``."""

    def __init__(self, module):
        self.module = module

    def _call(self, node, name, func, args, keywords=(), receiver=None):
        where = f"{self.module}:{node.lineno}"
        receiver = receiver if receiver is not None else ast.Name("__ks_np__", ast.Load())
        return ast.copy_location(ast.Call(
            func=ast.Name("__ks_product__", ast.Load()),
            args=[ast.Constant(name), ast.Constant(where), receiver, func, *args], keywords=list(keywords)), node)

    def visit_BinOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.MatMult):
            return self._call(node, "matmul", ast.Name("__ks_matmul__", ast.Load()), [node.left, node.right])
        return node

    def visit_AugAssign(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.MatMult):
            target = ast.Name(node.target.id, ast.Load()) if isinstance(node.target, ast.Name) else node.target
            value = self._call(node, "matmul", ast.Name("__ks_matmul__", ast.Load()), [target, node.value])
            return ast.copy_location(ast.Assign(targets=[node.target], value=value), node)
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in _PRODUCTS and not any(
                isinstance(a, ast.Starred) for a in node.args):
            return self._call(node, f.attr, f, node.args, node.keywords, receiver=f.value)
        return node


class ProbeLoader(importlib.machinery.SourceFileLoader):
    def get_code(self, fullname):
        """Always from the source (never a cached .pyc of the unrewritten module)."""
        tree = ast.parse(self.get_data(self.path), filename=self.path)
        tree = ast.fix_missing_locations(_Rewrite(fullname).visit(tree))
        return compile(tree, self.path, "exec", dont_inherit=True)

    def exec_module(self, module):
        module.__dict__["__ks_np__"] = np
        module.__dict__["__ks_product__"] = product
        module.__dict__["__ks_matmul__"] = _matmul
        super().exec_module(module)


class ProbeFinder(importlib.abc.MetaPathFinder):
    """Loads kernelscale's modules outside ops/ (and UNPROBED) through :class:`ProbeLoader`."""

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith("kernelscale") or fullname.startswith("kernelscale.ops") \
                or fullname in UNPROBED:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not str(spec.origin).endswith(".py"):
            return spec
        spec.loader = ProbeLoader(fullname, spec.origin)
        return spec

    def invalidate_caches(self):
        pass


def probe_source(source, module="planted", **namespace):
    """Execute ``source`` rewritten as a module outside ops would be; returns its namespace."""
    tree = ast.fix_missing_locations(_Rewrite(module).visit(ast.parse(source)))
    ns = {"__ks_product__": product, "__ks_matmul__": _matmul, "__ks_np__": np, "np": np, **namespace}
    exec(compile(tree, module, "exec"), ns)
    return ns


def main():
    sys.meta_path.insert(0, ProbeFinder())
    sys.dont_write_bytecode = True
    sys.path.insert(0, str(Path(__file__).parent))
    from estimator_list import ESTIMATORS  # imports kernelscale through the probe
    from sklearn.base import clone, is_classifier, is_regressor

    rng = np.random.default_rng(0)
    X, X_new = rng.normal(size=(N_FIT, 3)), rng.normal(size=(N_PREDICT, 3))
    y_class = np.digitize(X[:, 0] + 0.3 * X[:, 1], [-0.5, 0.5])
    y_reg = np.sin(X[:, 0]) + 0.1 * X[:, 1]
    for est in ESTIMATORS:
        est = clone(est)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if is_classifier(est):
                est.fit(X, y_class)
            elif is_regressor(est):
                est.fit(X, y_reg)
            else:
                est.fit(X)
            for method in ("predict", "decision_function", "predict_proba", "transform"):
                if hasattr(est, method):
                    getattr(est, method)(X_new)
    print(json.dumps(found))


if __name__ == "__main__":
    main()
