"""A memory budget: the peak of a kernel product under max_memory

``ks.ops.kernel_matvec`` computes K(X, X) v in blocks of rows cut to fit ``max_memory``. The
script measures the Python-allocation peak (tracemalloc) under budgets from 1 MB to 64 MB, plots
it against the budget, and shows the message of a budget too small for one block.
"""

import os
import time
import tracemalloc
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import kernelscale as ks

small = os.environ.get("KERNELSCALE_EXAMPLE_SIZE", "full") == "small"
out = Path(os.environ.get("KERNELSCALE_EXAMPLE_OUT", "."))
n = 2000 if small else 8000
X = np.random.default_rng(0).normal(size=(n, 20))
v = np.ones(n)
kernel = ks.GaussianKernel(sigma=4.0)
budgets = [2**20, 4 * 2**20, 16 * 2**20, 64 * 2**20]
peaks = []
for budget in budgets:
    tracemalloc.start()
    start = time.perf_counter()
    ks.ops.kernel_matvec(kernel, X, X, v, max_memory=budget)
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    peaks.append(peak)
    print(f"max_memory {budget / 2**20:4.0f} MiB: peak {peak / 2**20:6.2f} MiB, {seconds:.3f} s")
try:
    ks.ExactKernelRidge(kernel=kernel, max_memory="100KB").fit(X, np.sin(X[:, 0]))
except (ValueError, MemoryError) as exc:
    print(f"a budget too small: {type(exc).__name__}: {exc}")
fig, ax = plt.subplots(figsize=(6, 4))
ax.plot([b / 2**20 for b in budgets], [p / 2**20 for p in peaks], "o-", label="peak")
ax.plot([b / 2**20 for b in budgets], [b / 2**20 for b in budgets], "--", label="budget")
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xlabel("max_memory (MiB)")
ax.set_ylabel("peak Python allocations (MiB)")
ax.set_title(f"kernel_matvec, n = {n}")
ax.legend()
fig.tight_layout()
fig.savefig(out / "memory_budget.png", dpi=90)
