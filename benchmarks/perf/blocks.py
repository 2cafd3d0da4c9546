"""Throughput of the blocked kernel product K(X, Z) @ V against a plain numpy GEMM.

For float32 and float64, X and Z are random normal (20000, 784) (``--quick``: 4000) and V has
one column and ten columns. ``kernel_matvec`` with GaussianKernel(sigma=sqrt(784)) is timed next
to ``X @ Z.T`` with DISTINCT operands of the same shape (numpy turns ``A @ A.T`` into a symmetric
rank-k update at half the flops), once allocating its output and once writing into a
preallocated buffer (``np.matmul(X, Z.T, out=buf)``); the ratio is taken against the faster of
the two. GFLOP/s counts 2 n m d (+ 2 n m k for the product with V) for ours, 2 n m d for the
GEMM. Target: at least 70% of the GEMM throughput.

The Laplacian (L1 distances, no GEMM form) and Matérn 1.5 kernels are timed in float64 on a
smaller n as context, without a target.

Run: ``python -m benchmarks blocks [--quick]`` or ``kernelscale bench blocks``.
"""

from __future__ import annotations

import logging
import math
import sys

import numpy as np

from benchmarks.harness import Suite, cli_main, compare, gemm_flops, measure_many, print_table
from kernelscale.ops import kernel_matvec
from kernelscale.kernels import GaussianKernel, LaplacianKernel, MaternKernel

SUITE = "blocks"
TARGET_RATIO = 0.70
D = 784
logger = logging.getLogger("kernelscale.benchmarks.blocks")


def make_data(n, d, dtype, seed):
    """The seeded inputs of one measurement: X, Z (n, d) and the right-hand sides V1 (n,),
    V10 (n, 10), of ``dtype`` (perf/refactor.py times the same ones)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d), dtype=dtype)
    Z = rng.standard_normal((n, d), dtype=dtype)  # distinct operand: a true GEMM, not a SYRK
    V1 = rng.standard_normal(n, dtype=dtype)
    V10 = rng.standard_normal((n, 10), dtype=dtype)
    return X, Z, V1, V10


def _gflops(flops, measurement):
    return flops / measurement.median / 1e9


def _bench_gaussian(suite, n, dtype, repeats, warmup, seed):
    """Records for one dtype: two GEMM baselines, kernel_matvec with k=1, k=10 and a small budget."""
    X, Z, V1, V10 = make_data(n, D, dtype, seed)
    kernel = GaussianKernel(sigma=math.sqrt(D))
    buf = np.empty((n, n), dtype=dtype)
    budget = "512MB"
    fns = {
        "gemm_fresh": lambda: X @ Z.T,
        "gemm_out": lambda: np.matmul(X, Z.T, out=buf),
        "ours_k1": lambda: kernel_matvec(kernel, X, Z, V1),
        "ours_k10": lambda: kernel_matvec(kernel, X, Z, V10),
        "ours_k1_budget": lambda: kernel_matvec(kernel, X, Z, V1, max_memory=budget),
    }
    logger.info("%s n=%d: timing %s (%d repeats)", np.dtype(dtype).name, n, ", ".join(fns), repeats)
    m = measure_many(fns, repeats=repeats, warmup=warmup)
    dataset = f"normal {n}x{D} {np.dtype(dtype).name}"
    base = {"n": n, "m": n, "d": D, "dtype": np.dtype(dtype).name}
    gemm = {}
    for key, label in (("gemm_fresh", "numpy X @ Z.T"), ("gemm_out", "numpy matmul(X, Z.T, out=)")):
        gemm[key] = suite.add(
            dataset, label, role="peer", measurement=m[key],
            params=dict(base, flops=gemm_flops(n, n, D)),
            metrics={"gflops": _gflops(gemm_flops(n, n, D), m[key])},
        )
    best = max(gemm.values(), key=lambda r: r["metrics"]["gflops"])
    ours = {}
    for key, k, max_memory in (("ours_k1", 1, None), ("ours_k10", 10, None), ("ours_k1_budget", 1, budget)):
        flops = gemm_flops(n, n, D, k)
        label = f"kernel_matvec gaussian k={k}" + (f" max_memory={max_memory}" if max_memory else "")
        ours[key] = rec = suite.add(
            dataset, label, role="ours", measurement=m[key],
            params=dict(base, k=k, sigma=math.sqrt(D), max_memory=max_memory, flops=flops,
                        target_gflops_ratio=TARGET_RATIO),
            metrics={"gflops": _gflops(flops, m[key])},
        )
        compare(rec, best, metrics=["gflops", "time_median_s", "peak_memory_bytes"])
    return ours


def _bench_context(suite, n, repeats, warmup, seed):
    """float64 Laplacian and Matérn 1.5 products next to a GEMM of the same shape (no target)."""
    X, Z, V1, _ = make_data(n, D, np.float64, seed)
    sigma = math.sqrt(D)
    fns = {
        "gemm": lambda: X @ Z.T,
        "laplacian": lambda: kernel_matvec(LaplacianKernel(sigma=float(D)), X, Z, V1),
        "matern15": lambda: kernel_matvec(MaternKernel(sigma=sigma, nu=1.5), X, Z, V1),
    }
    logger.info("float64 n=%d: timing %s (%d repeats)", n, ", ".join(fns), repeats)
    m = measure_many(fns, repeats=repeats, warmup=warmup)
    dataset = f"normal {n}x{D} float64"
    base = {"n": n, "m": n, "d": D, "dtype": "float64"}
    gemm = suite.add(dataset, "numpy X @ Z.T", role="peer", measurement=m["gemm"],
                     params=dict(base, flops=gemm_flops(n, n, D)),
                     metrics={"gflops": _gflops(gemm_flops(n, n, D), m["gemm"])})
    flops = gemm_flops(n, n, D, 1)
    for key, label, note in (
        ("laplacian", "kernel_matvec laplacian k=1",
         "L1 distances have no GEMM form (scipy cdist); GFLOP/s counts the GEMM-equivalent 2nmd"),
        ("matern15", "kernel_matvec matern nu=1.5 k=1", "context, no target"),
    ):
        rec = suite.add(dataset, label, role="ours", measurement=m[key], notes=note,
                        params=dict(base, k=1, flops=flops), metrics={"gflops": _gflops(flops, m[key])})
        compare(rec, gemm, metrics=["gflops", "time_median_s", "peak_memory_bytes"])


def run(quick: bool = False, out_dir=None, *, n=None, n_context=None, repeats=None):
    """Run the suite, print its table and the 70% target verdicts; return the JSON path.

    ``n``, ``n_context`` and ``repeats`` override the sizes (for tests and exploration).
    """
    n = n or (4000 if quick else 20000)
    n_context = n_context or (1000 if quick else 3000)
    repeats = repeats or (2 if quick else 3)
    suite = Suite(SUITE, quick=quick, out_dir=out_dir, paper={
        "source": "issue 'blocks.py': K(X, Z) @ V at >= 70% of the GEMM throughput",
        "target_gflops_ratio": TARGET_RATIO,
    })
    verdicts = []
    for i, dtype in enumerate((np.float32, np.float64)):
        ours = _bench_gaussian(suite, n, dtype, repeats, 1, seed=i)
        for rec in ours.values():
            r = rec["ratio_to_peer"]["gflops"]
            verdicts.append(f"{rec['dataset']:<26} {rec['method']:<45} {r:6.1%} of {rec['peer']}: "
                            f"{'PASS' if r >= TARGET_RATIO else 'FAIL'} (target {TARGET_RATIO:.0%})")
    _bench_context(suite, n_context, repeats, 1, seed=7)
    path = suite.write()
    print_table(suite.records)
    print()
    print("\n".join(verdicts))
    return path


def main(argv=None):
    return cli_main(run, argv, __doc__.splitlines()[0])


if __name__ == "__main__":
    sys.exit(main())
