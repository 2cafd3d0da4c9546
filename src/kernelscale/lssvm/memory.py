"""Memory planning of an LS-SVM fit: what it allocates, the refusal that names the fix, and the
block size ``batch_size="auto"`` picks (docs/algorithms.md section 4.4, "Whole-system blocks").

Every function here takes the budget in bytes: the estimators resolve ``max_memory`` once per fit
(:func:`kernelscale.ops.memory.parse_memory`) and :func:`kernelscale.lssvm.solvers.solve_lssvm`
once at its entry.
"""

from __future__ import annotations

import math

import numpy as np

from ..kernels import make_kernel
from ..ops.memory import format_bytes, largest_fitting, ufunc_workspace_bytes

__all__ = ["lssvm_fit_memory", "check_fit_memory", "state_bytes", "class_bytes", "auto_batch_size",
           "auto_n_iter", "AUTO_WHOLE_MAX", "AUTO_BLOCK", "AUTO_MAX_ITER", "AUTO_ROWS_PER_SQRT_N"]


def state_bytes(n, k, J, item, solver, n_averaged):
    """Bytes held besides the kernel block: the (n + 1) x k state arrays of ``solver`` (plus the
    running average when S > 1), the J x J Gram matrix in the fit dtype, two float64 J x J arrays
    of its factorisation, and the J x k right-hand sides."""
    n_vec = {"matching_pursuit": 4, "kaczmarz": 3, "kaczmarz_mp": 6, "nystrom": 3}[solver] + (n_averaged > 1)
    return n_vec * (n + 1) * k * item + 2 * J * J * 8 + J * J * item + 6 * J * k * 8


def class_bytes(n, k, item, solver, n_averaged):
    """Bytes of the arrays with one column per class: the one-hot targets and the solver's
    (n + 1) x k state (for "exact", the right-hand sides and solutions)."""
    state = 3 * n * (k + 1) * item if solver == "exact" else state_bytes(n, k, 1, item, solver, n_averaged)
    return n * k * item + state


def lssvm_fit_memory(n, d, k, batch_size, dtype, kernel, solver="matching_pursuit", n_averaged=1):
    """Bytes a fit of ``solver`` allocates for n samples, d features, k outputs and J = batch_size.

    Counts the (n + 1) x k state arrays (W, Z, the residual R, the committee/average, update
    temporaries), one J x n kernel block with the temporaries of
    :func:`kernelscale.ops.kernel.kernel_rows`, and the J x J Gram matrix and its factor; for
    ``"kaczmarz_mp"`` also one row of the full kernel product (the minimum it needs: its blocks
    take what the budget leaves, up to ``kernelscale.ops.memory.MAX_BLOCK_BYTES``, so with a large
    budget the hybrid uses up to that much more); for ``"exact"`` the n x n matrix.
    """
    kernel = make_kernel(kernel)
    dtype = np.dtype(dtype)
    item = dtype.itemsize
    if solver == "exact":
        return n * n * item + 3 * n * (k + 1) * item
    J = min(int(batch_size), n + 1)
    state = state_bytes(n, k, J, item, solver, n_averaged)
    block = J * n * item
    temps = (
        kernel.aux_bytes(n, d, dtype)
        + ufunc_workspace_bytes()
        + J * d * item
        + max(kernel.bytes_per_row(n, d, dtype) - n * item, 1)
    )
    total = state + block + temps
    if solver == "kaczmarz_mp":
        # the full product Theta dW: its output and one block row against the prepared X the
        # block loop holds
        total += (n + 1) * k * item + kernel.bytes_per_row(n, d, dtype)
    return int(total)


def check_fit_memory(n, d, k, J, dtype, kernel, solver, n_averaged, budget):
    """Refuse, before anything is allocated, a fit that needs more than ``budget`` bytes
    (:func:`lssvm_fit_memory`): the message names the largest batch_size that fits, float32, or
    the budget that would do."""
    need = lssvm_fit_memory(n, d, k, J, dtype, kernel, solver, n_averaged)
    if need <= budget:
        return
    if solver == "exact":
        raise ValueError(
            f"max_memory={format_bytes(budget)} is too small for solver='exact', which builds the "
            f"{n} x {n} kernel matrix ({format_bytes(need)}); use an iterative solver (e.g. "
            f"'matching_pursuit'), float32 data, or increase max_memory to {need} bytes."
        )
    lo = largest_fitting(lambda J_: lssvm_fit_memory(n, d, k, J_, dtype, kernel, solver, n_averaged) <= budget, J)
    hint = f"pass batch_size <= {lo}" if lo else "no batch_size fits"
    f32 = ", use dtype=np.float32 (halves it)" if dtype == np.float64 else ""
    raise ValueError(
        f"max_memory={format_bytes(budget)} is too small for solver={solver!r} with "
        f"batch_size={J}: it needs {format_bytes(need)} ({need} bytes; a {J} x {n} kernel block "
        f"plus the state arrays); {hint}{f32}, or increase max_memory to at least {need} bytes."
    )


#: batch_size="auto" takes the whole system up to 4096 rows, and up to AUTO_WHOLE_MAX rows when
#: its n x n arrays fit the memory budget: one Cholesky (n^3 / 3 flops) there costs 3-10 s on 2
#: cores and fits as well as the block iterations of ``n_iter="auto"``; at 16384 rows it took
#: 20-34 s (measurements: benchmarks/studies/lssvm.md, "Capacity that grows with n")
AUTO_WHOLE_MAX = 12288
#: batch_size="auto" beyond the whole system: blocks of this many rows (fewer when the budget
#: cannot hold a block of them); J = 1000 reached a lower error per second than J = 2000 at 50000
#: rows (benchmarks/studies/lssvm.md, "Capacity that grows with n")
AUTO_BLOCK = 1000
#: n_iter="auto": at most this many iterations (the former fixed default)
AUTO_MAX_ITER = 100
#: n_iter="auto" on blocks: T J = AUTO_ROWS_PER_SQRT_N sqrt(n) block rows in all, i.e. up to
#: 150 sqrt(n) coefficients updated (matching pursuit updates only its block's coefficients, so
#: these are the model's centres, O(sqrt n) as for Nystrom ridge regression)
AUTO_ROWS_PER_SQRT_N = 150.0


def auto_batch_size(n, fits=None, block_fits=None):
    """batch_size="auto": the whole system (n + 1 rows, one Cholesky solve of K + D,
    :class:`kernelscale.lssvm.cholesky.WholeSystemCholesky`) up to 4096 rows, or up to
    AUTO_WHOLE_MAX when ``fits(n + 1)`` (its memory is within the budget); else blocks of
    AUTO_BLOCK rows, or of the largest J below it with ``block_fits(J)`` when ``block_fits``
    refuses AUTO_BLOCK (J = AUTO_BLOCK when none fits: the fit's memory check then names the fix).
    Non-decreasing in n for a given budget: the block is at most the whole system it replaces."""
    whole = n + 1
    if whole <= 4096 or (whole <= AUTO_WHOLE_MAX and fits is not None and fits(whole)):
        return whole
    J = min(AUTO_BLOCK, whole)
    if block_fits is None or block_fits(J):
        return J
    return largest_fitting(block_fits, J) or J


def auto_n_iter(n, batch_size):
    """n_iter="auto" for n samples in blocks of ``batch_size`` rows: AUTO_MAX_ITER (100) when one
    block is the whole system (it stops at ``tol`` after one or two iterations), else
    ceil(AUTO_ROWS_PER_SQRT_N sqrt(n) / J) iterations within [1, AUTO_MAX_ITER] (J = 1000: 17 at
    12288 rows, 34 at 50000, 100 from 444445 on; each costs about J^2 n + 2 J n d flops, so the fit
    costs O(n^1.5) up to there and O(n) beyond)."""
    J = int(batch_size)
    if J >= n + 1:
        return AUTO_MAX_ITER
    return int(min(AUTO_MAX_ITER, max(1, math.ceil(AUTO_ROWS_PER_SQRT_N * math.sqrt(n) / J))))
