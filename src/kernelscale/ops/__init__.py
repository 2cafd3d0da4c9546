"""The compute layer: all n-sized arithmetic of kernelscale, and nothing else.

The rule: a solver keeps only small state (O(J^2), O(M^2), O(k d)) and calls an operator of
this package for anything that touches n rows: kernel blocks and their products
(:mod:`~kernelscale.ops.kernel`), seeded random-feature blocks
(:mod:`~kernelscale.ops.feature_blocks`) and their products with rows
(:mod:`~kernelscale.ops.features`), under a memory budget planned by
:mod:`~kernelscale.ops.memory`. The operators are written against the backends of
:mod:`~kernelscale.ops.backend`: numpy, and torch (:mod:`~kernelscale.ops.torch_backend`, a GPU
or torch's CPU kernels), picked by each estimator's ``device``. On a torch device the blocks and
their products run there; random draws, the TensorSketch FFTs and the solvers' small
factorisations (J x J, M x M, p x p, scipy in float64) stay on the host, and the operators take
and return host arrays. The least-squares solvers state their passes over rows through a row
executor (:mod:`~kernelscale.ops.rows`): whole host arrays, or dask row chunks with one task per
chunk and tree-reduced sums, the same solver code for both. ``tests/test_ops_boundary.py`` enforces the
rule: no module outside ``ops/`` evaluates a kernel block or a feature block over rows of X.
"""

from . import backend, memory
from .kernel import KernelOperator, kernel_diag, kernel_matrix, kernel_matvec, kernel_rows
from .memory import format_bytes, parse_memory

__all__ = [
    "backend",
    "memory",
    "KernelOperator",
    "kernel_matvec",
    "kernel_rows",
    "kernel_diag",
    "kernel_matrix",
    "format_bytes",
    "parse_memory",
]
