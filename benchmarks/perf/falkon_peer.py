"""Falkon beside the front door on MNIST and adult, in one process and one run (issue #38).

Falkon (Meanti, Carratino, Rosasco & Rudi: Nystrom kernel ridge regression solved by
preconditioned conjugate gradient; the Python package ``falkon``, built on torch) is called as its
documentation calls it for classification: a Gaussian kernel, M centres drawn uniformly at random,
one-hot targets (MNIST, the argmax of the 10 outputs) or +-1 targets (adult, the sign of the
output), float32 tensors, ``maxiter`` at its default (20), on the CPU
(``FalkonOptions(use_cpu=True)``). The bandwidth is the median heuristic (the median pairwise
distance of 2000 training rows drawn with seed 0; MNIST 10.25, adult 4.0). Penalty 1e-6 on both:
the 1e-8 of Falkon's MNIST example (which stops at ``maxiter=10``) makes the float32 conjugate
gradient diverge within the default 20 iterations on the full MNIST (21.2% test error at
M=10000; training error rising from iteration 8 on at M=3000, while float64 converged), so the
penalty is the largest of the 1e-6..1e-8 range of Falkon's examples. Nothing is tuned on the
test set.

In the same process, before Falkon, the front door as a user calls it:
``AutoKernelClassifier(time_budget=60, random_state=0)`` on MNIST and ``time_budget=10`` on adult,
on the same arrays (MNIST 60000/10000 pixels / 255 in float32, adult 32561/16281 as stored; see
auto_budgets.py). Each method is fitted once (these fits are long): test error, fit seconds,
predict seconds (of the whole test set) and the process's peak memory above its level before
the fit.

    python -m benchmarks falkon_peer [--dataset mnist adult] [--resume] [--quick]

Falkon is not a dependency of kernelscale nor of its ``bench`` extra: it has no release on the
package index, so it is built from its source in a separate virtual environment (a C++
extension against torch's CPU build, about 10 minutes on 2 cores); docs/performance.md
("Falkon beside the front door") gives the commands. Without it this script says so and exits 2.
Writes benchmarks/results/falkon-peer.json (falkon-peer-quick.json with ``--quick``: 6000/2000
rows, small M and budgets, a smoke test of the script only).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from benchmarks.harness import PeakMemory, Suite

SUITE = "falkon-peer"

INSTALL = (
    "Falkon is not installed in this environment. It has no release on the package index: build it "
    "from its source (github.com/FalkonML/falkon) in a separate virtual environment, with torch's CPU "
    "build and FORCE_ONLY_CPU=1 (see docs/performance.md, 'Falkon beside the front door'), then "
    "`pip install -e .` this checkout into the same environment and rerun."
)

#: what runs on each dataset: the front door's budget, then Falkon's (M, sigma or "median") runs
PLAN = {
    "mnist": dict(budget=60.0, penalty=1e-6, falkon=((10000, "median"), (20000, "median"))),
    "adult": dict(budget=10.0, penalty=1e-6, falkon=((2000, "median"), (5000, "median"))),
}
QUICK = {
    "mnist": dict(budget=5.0, penalty=1e-6, falkon=((500, "median"),)),
    "adult": dict(budget=3.0, penalty=1e-6, falkon=((500, "median"),)),
}
MEDIAN_ROWS = 2000


def _import_falkon():
    try:
        import falkon
        import torch
    except ImportError as exc:
        raise SystemExit(f"{INSTALL}\n({exc})") from None
    return falkon, torch


def _data(name, quick):
    import kernelscale as ks

    d = ks.load_dataset(name)
    if name == "mnist":
        data = ((d.X_train / 255.0).astype(np.float32), d.y_train,
                (d.X_test / 255.0).astype(np.float32), d.y_test)
    else:
        data = d.X_train, d.y_train, d.X_test, d.y_test
    if quick:
        rng = np.random.default_rng(0)
        tr = rng.choice(len(data[1]), 6000, replace=False)
        te = rng.choice(len(data[3]), 2000, replace=False)
        data = data[0][tr], data[1][tr], data[2][te], data[3][te]
    return data


def median_bandwidth(X, n_rows=MEDIAN_ROWS, seed=0):
    """The median heuristic: median Euclidean distance between distinct pairs of ``n_rows`` rows
    drawn without replacement with ``seed`` (plain numpy, nothing of kernelscale's)."""
    rng = np.random.default_rng(seed)
    S = np.asarray(X[rng.choice(len(X), min(n_rows, len(X)), replace=False)], dtype=np.float64)
    sq = (S * S).sum(1)
    D2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * S @ S.T, 0.0)
    return float(np.sqrt(np.median(D2[np.triu_indices(len(S), 1)])))


def _timed(fit, predict):
    with PeakMemory() as peak:
        start = time.perf_counter()
        fit()
        fit_s = time.perf_counter() - start
    start = time.perf_counter()
    pred = predict()
    return fit_s, time.perf_counter() - start, pred, peak.peak_bytes


class FalkonClassifier:
    """Falkon as its documentation calls it for classification (not part of kernelscale)."""

    def __init__(self, M, sigma, penalty, seed=0):
        self.M, self.sigma, self.penalty, self.seed = M, sigma, penalty, seed

    def fit(self, X, y):
        falkon, torch = _import_falkon()
        self.classes_ = np.unique(y)
        Xt = torch.from_numpy(np.ascontiguousarray(X, dtype=np.float32))
        if len(self.classes_) == 2:  # +-1 targets, one output
            Y = np.where(y == self.classes_[1], 1.0, -1.0).astype(np.float32)[:, None]
        else:  # one-hot targets, one output per class
            Y = (y[:, None] == self.classes_[None, :]).astype(np.float32)
        options = falkon.FalkonOptions(use_cpu=True)
        self.model_ = falkon.Falkon(kernel=falkon.kernels.GaussianKernel(sigma=self.sigma, opt=options),
                                    penalty=self.penalty, M=self.M, seed=self.seed, options=options)
        self.model_.fit(Xt, torch.from_numpy(Y))  # maxiter: its default
        return self

    def predict(self, X):
        _, torch = _import_falkon()
        with torch.no_grad():
            out = self.model_.predict(torch.from_numpy(np.ascontiguousarray(X, dtype=np.float32))).numpy()
        if len(self.classes_) == 2:
            return np.where(out[:, 0] >= 0, self.classes_[1], self.classes_[0])
        return self.classes_[np.argmax(out, axis=1)]


def run(quick=False, out_dir=None, datasets=("mnist", "adult"), resume=False):
    falkon, torch = _import_falkon()
    import kernelscale as ks

    plan = QUICK if quick else PLAN
    suite = Suite(SUITE, quick=quick, out_dir=out_dir, paper={
        "machine": "the project's 2-core machine",
        "same_run": "AutoKernelClassifier and Falkon fitted in one process, one after the other",
        "peer_versions": {"falkon": getattr(falkon, "__version__", "?"), "torch": torch.__version__,
                          "torch_threads": torch.get_num_threads()},
        "falkon_call": "falkon.Falkon(kernel=GaussianKernel(sigma), penalty, M, seed=0, "
                       "options=FalkonOptions(use_cpu=True)); maxiter default; float32; one-hot "
                       "(MNIST, argmax) or +-1 (adult, sign) targets",
    })
    if resume and suite.path.exists():
        suite.records = json.loads(suite.path.read_text())["records"]
    for dataset in datasets:
        spec = plan[dataset]
        X, y, Xt, yt = _data(dataset, quick)
        median = median_bandwidth(X)
        jobs = [(f"AutoKernelClassifier(time_budget={spec['budget']:g})", "ours",
                 {"time_budget": spec["budget"], "random_state": 0},
                 lambda b=spec["budget"]: ks.AutoKernelClassifier(time_budget=b, random_state=0))]
        for M, sigma in spec["falkon"]:
            value = median if sigma == "median" else float(sigma)
            source = "median heuristic" if sigma == "median" else "Falkon's MNIST example"
            name = f"Falkon(M={M}, sigma={'median' if sigma == 'median' else f'{value:g}'}, penalty={spec['penalty']:g})"
            jobs.append((name, "peer",
                         {"M": M, "sigma": value, "sigma_source": source, "penalty": spec["penalty"],
                          "maxiter": 20, "dtype": "float32", "device": "cpu"},
                         lambda M=M, v=value: FalkonClassifier(M, v, spec["penalty"])))
        done = {(r["dataset"], r["method"]) for r in suite.records}
        for method, role, params, make in jobs:
            if (dataset, method) in done:
                continue
            model = make()
            fit_s, predict_s, pred, peak = _timed(lambda: model.fit(X, y), lambda: model.predict(Xt))
            error = float(np.mean(pred != yt))
            if role == "ours":
                params = dict(params, chosen=model.best_params_, method=model.method_)
            suite.add(dataset, method, role=role, params=params,
                      metrics={"test_error": error, "fit_seconds": fit_s, "predict_seconds": predict_s},
                      time_median_s=fit_s, times_s=[fit_s], peak_memory_bytes=peak)
            print(f"{dataset}: {method}: fit {fit_s:.1f} s, predict {predict_s:.1f} s, "
                  f"test error {100 * error:.2f}%, peak {peak / 2**20:.0f} MiB", flush=True)
            suite.write(plot=False)
        # the front door's record against the first Falkon run of the same dataset
        ours = [r for r in suite.records if r["dataset"] == dataset and r["role"] == "ours"]
        peer = [r for r in suite.records if r["dataset"] == dataset and r["role"] == "peer"]
        if ours and peer:
            suite.compare(ours[0], peer[0])
    return suite.write(plot=False)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", nargs="+", choices=("mnist", "adult"), default=["mnist", "adult"])
    parser.add_argument("--resume", action="store_true", help="keep the records the results file holds")
    parser.add_argument("--quick", action="store_true", help="6000/2000 rows, small M: a smoke test")
    parser.add_argument("--out-dir", default=None)
    args = parser.parse_args(argv)
    try:
        path = run(args.quick, args.out_dir, tuple(args.dataset), args.resume)
    except SystemExit as exc:
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
            return 2
        raise
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
