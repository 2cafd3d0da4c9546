"""Throughput of the blocked kernel product on a torch device against torch's own GEMM.

``kernel_matvec`` with GaussianKernel(sigma=sqrt(784)) on random normal (n, 784) points (n =
40000 on a GPU, 20000 on torch's CPU kernels; ``--quick``: 4000) and one right-hand side, run
under the torch backend of ``--device`` (default "auto": the first CUDA GPU, else torch CPU),
next to ``torch.matmul`` of two distinct (n, 784) tensors on the same device, in the same run.
GFLOP/s counts 2 n m d (+ 2 n m for the product with V) for ours and 2 n m d for the GEMM;
device work is synchronised before each clock stop. Goal (torch backend issue): at least 80% of
the GEMM's throughput on a GPU. The device's name is recorded with every result.

Run: ``python -m benchmarks gpu [--quick] [--device cuda]``.
"""

from __future__ import annotations

import argparse
import logging
import math
import sys

import numpy as np

from benchmarks.harness import Suite, compare, gemm_flops, measure_many, print_table
from kernelscale.kernels import GaussianKernel
from kernelscale.ops import kernel_matvec
from kernelscale.ops.backend import get_backend, using

SUITE = "gpu-matvec"
TARGET_RATIO = 0.80
D = 784
logger = logging.getLogger("kernelscale.benchmarks.gpu")


def _device_name(backend):
    import torch

    if backend.device.type == "cuda":
        return torch.cuda.get_device_name(backend.device)
    return f"torch CPU ({torch.get_num_threads()} threads)"


def run(quick=False, out_dir=None, *, device="auto", n=None, repeats=None):
    import torch

    backend = get_backend(device)
    if backend.name != "torch":  # "auto" without a GPU: measure torch's CPU kernels
        backend = get_backend("cpu")
    on_gpu = backend.device.type == "cuda"
    n = n or (4000 if quick else 40000 if on_gpu else 20000)
    repeats = repeats or (2 if quick else 3)
    name = _device_name(backend)
    suite = Suite(SUITE if on_gpu else f"{SUITE}-torch-cpu", quick=quick, out_dir=out_dir, paper={
        "source": "torch backend issue: kernel_matvec at >= 80% of torch's GEMM on a GPU",
        "target_gflops_ratio": TARGET_RATIO,
    })
    verdicts = []
    for i, dtype in enumerate((np.float32, np.float64)):
        rng = np.random.default_rng(i)
        X, Z = rng.standard_normal((n, D), dtype=dtype), rng.standard_normal((n, D), dtype=dtype)
        V = rng.standard_normal(n, dtype=dtype)
        A, B = backend.asarray(X), backend.asarray(Z)
        kernel = GaussianKernel(sigma=math.sqrt(D))

        def gemm():
            out = torch.matmul(A, B.T)
            backend.synchronize()
            return out

        def ours():
            with using(backend):
                return kernel_matvec(kernel, X, Z, V)  # numpy out: the copy back synchronises

        logger.info("%s %s n=%d: timing (%d repeats)", name, np.dtype(dtype).name, n, repeats)
        m = measure_many({"gemm": gemm, "ours": ours}, repeats=repeats, warmup=1, memory=not on_gpu)
        dataset = f"normal {n}x{D} {np.dtype(dtype).name} on {name}"
        base = {"n": n, "m": n, "d": D, "dtype": np.dtype(dtype).name, "device": name}
        peer = suite.add(dataset, "torch.matmul(A, B.T)", role="peer", measurement=m["gemm"],
                         params=dict(base, flops=gemm_flops(n, n, D)),
                         metrics={"gflops": gemm_flops(n, n, D) / m["gemm"].median / 1e9})
        flops = gemm_flops(n, n, D, 1)
        rec = suite.add(dataset, "kernel_matvec gaussian k=1", role="ours", measurement=m["ours"],
                        params=dict(base, k=1, flops=flops, target_gflops_ratio=TARGET_RATIO),
                        metrics={"gflops": flops / m["ours"].median / 1e9})
        compare(rec, peer, metrics=["gflops", "time_median_s"])
        r = rec["ratio_to_peer"]["gflops"]
        verdict = ("PASS" if r >= TARGET_RATIO else "FAIL") if on_gpu else "no target on CPU"
        verdicts.append(f"{dataset:<50} {r:6.1%} of torch's GEMM: {verdict}")
    path = suite.write(plot=False)
    print_table(suite.records)
    print("\n".join(verdicts))
    return path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n = 4000, 2 repeats")
    parser.add_argument("--device", default="auto", help='"auto" (default), "cuda", "cuda:N" or "cpu"')
    parser.add_argument("--out-dir", default=None, help="where the JSON goes (default benchmarks/results)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    run(args.quick, args.out_dir, device=args.device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
