"""Memory-bounded kernel algebra: the only place kernelscale evaluates kernel blocks.

Every function here takes ``max_memory`` (bytes, or a string such as ``"2GB"`` / ``"512MiB"``;
None means :func:`default_memory_budget`, half of the memory currently available). The memory a
call allocates for kernel work (the prepared point set plus one block of rows and its
temporaries) never exceeds the budget; a budget too small for one row raises a ValueError that
says how much one row needs. Results the caller asked for (the product, the requested rows)
are not temporaries and are checked separately where they are kernel blocks themselves.

A GPU or out-of-core backend later replaces this module only.
"""

from __future__ import annotations

import numpy as np

from ._validation import as_float_array, check_same_features, result_dtype
from .kernels import make_kernel
from .ops.memory import (
    MAX_BLOCK_BYTES,
    available_memory,
    default_memory_budget,
    format_bytes,
    parse_memory,
    rows_per_block,
    ufunc_workspace_bytes,
)

__all__ = [
    "parse_memory",
    "format_bytes",
    "available_memory",
    "default_memory_budget",
    "rows_per_block",
    "iter_kernel_blocks",
    "kernel_matvec",
    "kernel_rows",
    "kernel_diag",
    "kernel_matrix",
    "matvec_memory",
]

def _fixed_bytes(kernel, Z, dtype):
    """Memory a blocked call holds besides its blocks: the prepared Z and ufunc scratch."""
    return kernel.aux_bytes(Z.shape[0], Z.shape[1], dtype, Z.dtype) + ufunc_workspace_bytes()


def _prepare_pair(kernel, X, Z, names=("X", "Z")):
    kernel = make_kernel(kernel)
    X = as_float_array(X, names[0])
    Z = X if Z is None else as_float_array(Z, names[1])
    check_same_features(Z, X.shape[1], names[1])
    return kernel, X, Z, result_dtype(X, Z)


def iter_kernel_blocks(kernel, X, Z=None, max_memory=None, *, dtype=None, prepared=None, fixed_bytes=0):
    """Yield ``(start, stop, K(X[start:stop], Z))`` over row blocks that fit the budget.

    The block array is reused between iterations: copy it if you keep it. ``dtype`` overrides
    the computation dtype (default: float32 only if X and Z are). ``prepared`` (from
    ``kernel.prepare``) skips re-preparing Z when the caller loops several times; ``fixed_bytes``
    is memory the caller holds that counts against the same budget.
    """
    kernel, X, Z, pair_dtype = _prepare_pair(kernel, X, Z)
    dtype = np.dtype(pair_dtype if dtype is None else dtype)
    budget = parse_memory(max_memory)
    if prepared is None:
        fixed_bytes += _fixed_bytes(kernel, Z, dtype)
    else:
        fixed_bytes += ufunc_workspace_bytes()
    per_row = kernel.bytes_per_row(Z.shape[0], X.shape[1], dtype)
    step = rows_per_block(X.shape[0], per_row, budget, fixed_bytes=fixed_bytes)
    step = max(1, min(step, MAX_BLOCK_BYTES // per_row))
    if prepared is None:
        prepared = kernel.prepare(Z, dtype)
    buffer = np.empty((step, Z.shape[0]), dtype=dtype)
    for start in range(0, X.shape[0], step):
        stop = min(start + step, X.shape[0])
        yield start, stop, kernel.block(X[start:stop], prepared, out=buffer[: stop - start])


def matvec_memory(kernel, n_rows, n_cols, n_features, dtype=np.float64, max_memory=None):
    """Bytes :func:`kernel_matvec` would allocate for kernel work (its temporaries).

    Raises the same ValueError as the product itself when the budget cannot hold one row.
    """
    kernel = make_kernel(kernel)
    budget = parse_memory(max_memory)
    fixed = kernel.aux_bytes(n_cols, n_features, dtype) + ufunc_workspace_bytes()
    per_row = kernel.bytes_per_row(n_cols, n_features, dtype)
    step = rows_per_block(n_rows, per_row, budget, fixed_bytes=fixed)
    return fixed + max(1, min(step, MAX_BLOCK_BYTES // per_row)) * per_row


def kernel_matvec(kernel, X, Z, V, max_memory=None):
    """Return K(X, Z) @ V without holding more than ``max_memory`` bytes of kernel blocks.

    Parameters
    ----------
    kernel : Kernel or str
    X : array of shape (n, d)
    Z : array of shape (m, d), or None for Z = X
    V : array of shape (m,) or (m, k)
    max_memory : int, str or None

    Returns
    -------
    array of shape (n,) or (n, k), in float32 only when X, Z and V are all float32.
    """
    kernel, X, Z, dtype = _prepare_pair(kernel, X, Z)
    V = as_float_array(V, "V", ensure_2d=False)
    if V.ndim not in (1, 2) or V.shape[0] != Z.shape[0]:
        raise ValueError(
            f"V must have shape ({Z.shape[0]},) or ({Z.shape[0]}, k) to match the {Z.shape[0]} "
            f"points of Z, got {V.shape}."
        )
    dtype = np.result_type(dtype, V.dtype)
    V_given, V = V, np.ascontiguousarray(V, dtype=dtype)
    copied = V.nbytes if V is not V_given else 0
    out = np.empty((X.shape[0],) + V.shape[1:], dtype=dtype)
    for start, stop, block in iter_kernel_blocks(kernel, X, Z, max_memory, dtype=dtype, fixed_bytes=copied):
        np.matmul(block, V, out=out[start:stop])
    return out


def kernel_rows(kernel, X, rows, Z=None, max_memory=None, *, out=None, prepared=None):
    """Return the rows K(X[rows], Z) (Z = X when None) as a (len(rows), m) array.

    The result is itself a kernel block, so it counts against ``max_memory``; ask for fewer rows
    at a time otherwise. Iterative solvers that fetch blocks repeatedly pass ``out`` (a C-ordered
    (len(rows), m) array of the computation dtype, reused between calls) and ``prepared`` (from
    ``kernel.prepare(Z, dtype)``, held by the caller and so not counted here).
    """
    kernel, X, Z, dtype = _prepare_pair(kernel, X, Z)
    if prepared is not None:
        dtype = prepared.dtype
    rows = np.asarray(rows)
    if rows.ndim != 1 or not (np.issubdtype(rows.dtype, np.integer) or rows.size == 0):
        raise ValueError(f"rows must be a 1-d array of integer indices, got shape {rows.shape} dtype {rows.dtype}.")
    if rows.size and (rows.min() < -X.shape[0] or rows.max() >= X.shape[0]):
        raise ValueError(f"rows must index the {X.shape[0]} rows of X; got indices out of range.")
    shape = (rows.size, Z.shape[0])
    if out is not None and (out.shape != shape or out.dtype != dtype or not out.flags.c_contiguous):
        raise ValueError(f"out must be a C-ordered array of shape {shape} and dtype {dtype}.")
    budget = parse_memory(max_memory)
    result_bytes = rows.size * Z.shape[0] * np.dtype(dtype).itemsize
    if result_bytes > budget:
        raise ValueError(
            f"max_memory={format_bytes(budget)} is too small for the requested {rows.size} kernel "
            f"rows of length {Z.shape[0]} ({format_bytes(result_bytes)}); request fewer rows at "
            f"a time or increase max_memory."
        )
    # blocks are written straight into the result, so only Z's preparation, the gathered rows
    # of X and the per-row temporaries count against what is left of the budget
    fixed = (ufunc_workspace_bytes() if prepared is not None else _fixed_bytes(kernel, Z, dtype))
    fixed += rows.size * X.shape[1] * X.itemsize
    per_row = kernel.bytes_per_row(Z.shape[0], X.shape[1], dtype) - Z.shape[0] * np.dtype(dtype).itemsize
    step = rows_per_block(max(rows.size, 1), max(per_row, 1), budget, fixed_bytes=fixed + result_bytes)
    if out is None:
        out = np.empty(shape, dtype=dtype)
    if prepared is None:
        prepared = kernel.prepare(Z, dtype)
    Xr = X[rows]
    for start in range(0, rows.size, step):
        stop = min(start + step, rows.size)
        kernel.block(Xr[start:stop], prepared, out=out[start:stop])
    return out


def kernel_diag(kernel, X):
    """Return the diagonal k(x_i, x_i) of K(X, X), O(n d) work and O(n) memory."""
    return make_kernel(kernel).diag(as_float_array(X, "X"))


def kernel_matrix(kernel, X, Z=None, max_memory=None):
    """Return the full kernel matrix K(X, Z), for the exact solvers only.

    This is the one function that builds an n x m kernel matrix, and only when the caller asks:
    it refuses (ValueError) when the matrix does not fit in ``max_memory``.
    """
    kernel, X, Z, _ = _prepare_pair(kernel, X, Z)
    return kernel_rows(kernel, X, np.arange(X.shape[0]), Z, max_memory=max_memory)
