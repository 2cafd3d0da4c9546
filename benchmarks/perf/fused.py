"""The fused kernel product (kernelscale.ops.fused) on a CUDA GPU: error and throughput.

On random normal (n, 784) float32 points (n = 40000; ``--quick``: 4000) with Gaussian
sigma = 28 = sqrt(784), Matern nu = 3/2 sigma = 28, Laplacian sigma = 900 (about the median L1
distance), right-hand sides V normal (n, k), k = 1 and 10:

- error: the fused product (each precision) and the blocked float32 path (``kernel_matvec``
  without the fused product) against the same formula in float64 by torch on the GPU, on 2048
  rows: max |ours - float64| / max |float64|, for the product and for the row sums;
- throughput: ``fused_matvec`` on device tensors (each precision), ``kernel_matvec`` on host
  arrays with the torch backend's fused product (``FUSED_PRODUCTS``; the call includes copying
  X and Z to the GPU and the result back) and without it (the blocked path), next to
  ``torch.matmul(A, B.T)`` of two distinct (n, 784) float32 tensors (torch's defaults: no TF32),
  in interleaved rounds of the same run, medians of ``--repeats``; GFLOP/s counts 2 n m d
  (+ 2 n m k) for ours and 2 n m d for the GEMM. The Laplacian (no GEMM form) runs at n / 4.
- ``--sweep``: tile configurations of each precision first (Gaussian, k = 10), the fastest then
  used for the timings.

Run: ``python -m benchmarks fused [--quick] [--sweep] [--out-dir DIR]``; writes
``fused-matvec.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import sys
import time

import numpy as np

from benchmarks.harness import Suite, compare, gemm_flops, measure_many, median, print_table
from kernelscale.kernels import GaussianKernel, LaplacianKernel, MaternKernel
from kernelscale.ops import fused, kernel_matvec
from kernelscale.ops import torch_backend as tb
from kernelscale.ops.backend import get_backend, using

SUITE = "fused-matvec"
TARGET_RATIO = 0.80
D = 784
ERROR_ROWS = 2048
logger = logging.getLogger("kernelscale.benchmarks.fused")

KERNELS = {
    "gaussian": GaussianKernel(sigma=math.sqrt(D)),
    "laplacian": LaplacianKernel(sigma=900.0),
    "matern0.5": MaternKernel(sigma=math.sqrt(D), nu=0.5),
    "matern1.5": MaternKernel(sigma=math.sqrt(D), nu=1.5),
    "matern2.5": MaternKernel(sigma=math.sqrt(D), nu=2.5),
}
#: (BM, BN, BK, num_warps, num_stages) tried by --sweep: ones that compile for sm_90 without
#: register spills for k <= 10 (ptxas -v, ahead of time), the library's default first
SWEEP = {
    "tf32x3": [(128, 128, 32, 8, 3), (128, 128, 16, 8, 4), (128, 128, 32, 8, 2), (64, 128, 32, 4, 3),
               (256, 128, 16, 8, 3), (128, 256, 16, 8, 3)],
    "ieee": [(128, 128, 32, 8, 3), (128, 128, 16, 8, 2), (64, 128, 32, 4, 3), (64, 64, 32, 4, 4)],
    "tf32": [(128, 128, 32, 8, 4), (128, 128, 32, 8, 3), (128, 128, 16, 8, 4), (128, 256, 32, 8, 3),
             (64, 128, 32, 4, 3)],
    "l1": [(128, 64, 8, 4, 1), (128, 64, 4, 4, 1), (64, 64, 8, 2, 1), (128, 64, 8, 4, 2)],
}


@contextlib.contextmanager
def fused_products(on):
    """The torch backend's products fused (kernelscale.ops.torch_backend.FUSED_PRODUCTS) or not."""
    before = tb.FUSED_PRODUCTS
    tb.FUSED_PRODUCTS = on
    try:
        yield
    finally:
        tb.FUSED_PRODUCTS = before


def _sync():
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def reference(spec, X, Z, V):
    """K(X, Z) @ V and the row sums of K in float64 by torch, unfused (X, Z, V float64 tensors)."""
    import torch

    kind, sigma, nu = spec
    if kind == "laplacian":
        K = torch.exp(-torch.cdist(X, Z, p=1.0) / sigma)
    else:
        c = Z.mean(dim=0)
        Xc, Zc = X - c, Z - c
        d2 = ((Xc * Xc).sum(1)[:, None] + (Zc * Zc).sum(1)[None, :] - 2.0 * Xc @ Zc.T).clamp_min_(0.0)
        if kind == "gaussian":
            K = torch.exp(-d2 / (2.0 * sigma**2))
        else:
            s = math.sqrt(2.0 * nu) / sigma * d2.sqrt_()
            poly = {0.5: 1.0, 1.5: 1.0 + s, 2.5: 1.0 + s + s * s / 3.0}[nu]
            K = torch.exp(-s) * poly
    return K @ V, K.sum(1)


def rel_error(got, ref):
    import torch

    got = torch.as_tensor(got, device=ref.device).to(torch.float64).reshape(ref.shape)
    return float((got - ref).abs().max() / ref.abs().max())


class Run:
    def __init__(self, args):
        import torch

        self.args, self.torch = args, torch
        self.n = args.n or (4000 if args.quick else 40000)
        self.device = torch.device(args.device)
        self.name = (torch.cuda.get_device_name(self.device) if self.device.type == "cuda"
                     else f"torch {self.device.type} (Triton's interpreter)")
        self.deadline = time.perf_counter() + args.budget_s
        self.suite = Suite(SUITE, quick=args.quick, out_dir=args.out_dir, paper={
            "source": "issue 41 item 1: a fused kernel product at >= 80% of torch's float32 GEMM",
            "target_gflops_ratio": TARGET_RATIO,
            "device": self.name,
            "torch": torch.__version__,
            "triton": __import__("triton").__version__,
            "torch_allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
        })
        self.best = {}  # precision -> config
        self.verdicts = []
        rng = np.random.default_rng(0)
        self.X = rng.standard_normal((self.n, D), dtype=np.float32)
        self.Z = rng.standard_normal((self.n, D), dtype=np.float32)
        self.V = rng.standard_normal((self.n, 10), dtype=np.float32)
        self.Xd, self.Zd, self.Vd = (torch.as_tensor(a, device=self.device) for a in (self.X, self.Z, self.V))

    def late(self, what):
        if time.perf_counter() > self.deadline:
            logger.warning("time budget spent: skipping %s", what)
            return True
        return False

    def write(self):
        self.suite.write(plot=False)

    def base(self, n, k, **extra):
        return dict(n=n, m=n, d=D, k=k, device=self.name, **extra)

    # -- error --------------------------------------------------------------------------------
    def errors(self):
        torch = self.torch
        rows = np.arange(0, self.n, max(1, self.n // ERROR_ROWS))[:ERROR_ROWS]
        X64, Z64 = self.Xd[rows].double(), self.Zd.double()
        dataset = f"normal {self.n}x{D} float32, {rows.size} rows, on {self.name}"
        for name, kernel in KERNELS.items():
            if self.late(f"errors of {name}"):
                return
            spec = fused.fused_kernel_spec(kernel)
            for k in (1, 10):
                V = self.Vd[:, :k]
                ref, ref_sums = reference(spec, X64, Z64, V.double())
                precisions = fused.PRECISIONS if name == "gaussian" else (fused.DEFAULT_PRECISION,)
                if name == "laplacian":
                    precisions = ("ieee", "tf32x3")  # only the product with V has a precision
                for precision in precisions:
                    try:
                        out, sums = fused.fused_matvec(kernel, self.Xd[rows], self.Zd, V, row_sums=True,
                                                       precision=precision, config=self.best.get(precision))
                        metrics = {"max_rel_error": rel_error(out, ref),
                                   "row_sums_max_rel_error": rel_error(sums, ref_sums)}
                    except Exception as err:  # noqa: BLE001 - recorded, the run goes on
                        logger.exception("fused %s %s", name, precision)
                        metrics = {"failed": repr(err)[:300]}
                    self.suite.add(dataset, f"fused {name} {precision} k={k}", role="ours", metrics=metrics,
                                   params=self.base(self.n, k, rows=int(rows.size), precision=precision, part="error"))
                with using(get_backend(self.device)), fused_products(False):
                    blocked = kernel_matvec(kernel, self.X[rows], self.Z, self.V[:, :k])
                self.suite.add(dataset, f"blocked {name} k={k}", role="peer",
                               metrics={"max_rel_error": rel_error(blocked, ref)},
                               params=self.base(self.n, k, rows=int(rows.size), part="error"))
                del ref, ref_sums
            self.write()
        del X64, Z64
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    # -- tuning -------------------------------------------------------------------------------
    def time_calls(self, fn, repeats):
        fn()
        _sync()
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            fn()
            _sync()
            times.append(time.perf_counter() - start)
        return median(times)

    def sweep(self):
        n = self.n
        if self.device.type == "cuda":
            logger.info("%d SMs", self.torch.cuda.get_device_properties(self.device).multi_processor_count)
        for precision in ("tf32x3", "ieee", "tf32", "l1"):
            kernel = KERNELS["laplacian" if precision == "l1" else "gaussian"]
            m = n // 4 if precision == "l1" else n
            X, Z, V = self.Xd[:m], self.Zd[:m], self.Vd[:m]
            results = []
            for config in SWEEP[precision]:
                if self.late(f"sweep {precision} {config}"):
                    break
                try:
                    t = self.time_calls(lambda: fused.fused_matvec(
                        kernel, X, Z, V, precision="ieee" if precision == "l1" else precision, config=config), 2)
                    gflops = gemm_flops(m, m, D, 10) / t / 1e9
                    results.append((t, config))
                    metrics = {"gflops": gflops}
                    logger.info("sweep %s %s: %.4f s, %.0f GFLOP/s", precision, config, t, gflops)
                except Exception as err:  # noqa: BLE001 - a config that does not compile or fit
                    logger.warning("sweep %s %s failed: %s", precision, config, repr(err)[:200])
                    t, metrics = None, {"failed": repr(err)[:300]}
                self.suite.add(f"normal {m}x{D} float32 on {self.name}", f"sweep {precision} {config}", role="ours",
                               time_median_s=t, metrics=metrics,
                               params=self.base(m, 10, precision=precision, config=list(config), part="sweep"))
            if results:
                self.best[precision] = min(results)[1]
            self.write()
        for precision, config in self.best.items():  # the library's products use the fastest too
            family = ("l1", None) if precision == "l1" else ("gemm", precision)
            fused.CONFIGS[family] = tuple(config)
        logger.info("best configs: %s", self.best)

    # -- throughput ---------------------------------------------------------------------------
    def throughput(self, name, k, n):
        torch = self.torch
        kernel = KERNELS[name]
        X, Z, V = self.X[:n], self.Z[:n], self.V[:n, :k]
        A, B = self.Xd[:n], self.Zd[:n]
        Vd = self.Vd[:n, :k]
        backend = get_backend(self.device)

        def gemm():  # distinct operands: no symmetric shortcut
            out = torch.matmul(A, B.T)
            _sync()
            return out

        def fused_call(precision):
            def call():
                out = fused.fused_matvec(kernel, A, B, Vd, precision=precision,
                                         config=self.best.get("l1" if name == "laplacian" else precision))
                _sync()
                return out
            return call

        def library(on):
            def call():
                with using(backend), fused_products(on):
                    return kernel_matvec(kernel, X, Z, V)  # host arrays in and out
            return call

        fns = {"gemm": gemm}
        precisions = ("ieee", "tf32x3") if name == "laplacian" else fused.PRECISIONS
        for precision in precisions:
            fns[f"fused {precision}"] = fused_call(precision)
        fns["kernel_matvec fused"] = library(True)
        fns["kernel_matvec blocked"] = library(False)
        logger.info("%s k=%d n=%d: timing %s", name, k, n, list(fns))
        m = measure_many(fns, repeats=self.args.repeats, warmup=1, memory=False)
        dataset = f"normal {n}x{D} float32 on {self.name}"
        peer = self.suite.add(dataset, "torch.matmul(A, B.T) float32", role="peer", measurement=m["gemm"],
                              params=self.base(n, 0, flops=gemm_flops(n, n, D), part="throughput"),
                              metrics={"gflops": gemm_flops(n, n, D) / m["gemm"].median / 1e9})
        flops = gemm_flops(n, n, D, k)
        for label in fns:
            if label == "gemm":
                continue
            precision = label.split()[-1] if label.startswith("fused") else (
                "tf32" if torch.backends.cuda.matmul.allow_tf32 else fused.DEFAULT_PRECISION)
            rec = self.suite.add(dataset, f"{label} {name} k={k}", role="ours", measurement=m[label],
                                 params=self.base(n, k, flops=flops, precision=precision, part="throughput",
                                                  target_gflops_ratio=TARGET_RATIO),
                                 metrics={"gflops": flops / m[label].median / 1e9})
            compare(rec, peer, metrics=["gflops", "time_median_s"])
            r = rec["ratio_to_peer"]["gflops"]
            self.verdicts.append(f"{label + ' ' + name + f' k={k}':<40} n={n:<6} {r:7.1%} of torch's float32 GEMM"
                                 + (f": {'PASS' if r >= TARGET_RATIO else 'FAIL'}" if name != "laplacian" else ""))
        self.write()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def run(args):
    run_ = Run(args)
    logger.info("%s: n=%d, torch %s", run_.name, run_.n, run_.torch.__version__)
    if args.sweep:
        run_.sweep()
    n = run_.n
    cases = [("gaussian", 1, n), ("gaussian", 10, n), ("matern1.5", 10, n), ("laplacian", 1, n // 4)]
    for name, k, n in cases:
        if run_.late(f"timing {name} k={k}"):
            break
        try:
            run_.throughput(name, k, n)
        except Exception:  # noqa: BLE001 - the rest still runs
            logger.exception("timing %s k=%d", name, k)
    run_.errors()
    path = run_.suite.write(plot=False)
    print_table([r for r in run_.suite.records if r["params"].get("part") != "sweep"])
    print("best configs:", run_.best)
    print("\n".join(run_.verdicts))
    return path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n = 4000")
    parser.add_argument("--n", type=int, default=None, help="points (default 40000)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sweep", action="store_true", help="try the tile configurations first")
    parser.add_argument("--device", default="cuda",
                        help='"cuda" (default), "cuda:N"; "cpu" with TRITON_INTERPRET=1: a smoke test')
    parser.add_argument("--budget-s", type=float, default=1e9, help="skip what is left after this many seconds")
    parser.add_argument("--out-dir", default=None, help="where the JSON goes (default benchmarks/results)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
