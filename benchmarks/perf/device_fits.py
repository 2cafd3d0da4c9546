"""Estimators as a user calls them, fitted on a GPU and on this project's 2-core CPU machine.

Each estimator at its defaults (``random_state=0``) fits the training digits in float32 (pixels /
255; the GPU computes in the data's dtype, so float32 data is what a GPU user passes) and
predicts the test digits; fit seconds (one fit after an untimed warm-up fit on 2000 rows, which
compiles what the first call compiles) and test error are recorded per device:

- MNIST (60000 / 10000): ``StagewiseClassifier``, ``SLKLClassifier``,
  ``DoublyStochasticClassifier``, ``LSSVMClassifier`` (``--skip lssvm`` leaves it out: about
  150 s on 2 cores);
- USPS (7291 / 2007): ``RegularizedKernelClassifier`` (coordinate descent, one-vs-one hinge);
- MNIST: the front door ``AutoKernelClassifier(time_budget=60)``.

``--device cuda`` runs them with ``device="cuda"`` (results ``device-fits-cuda.json``);
``--device cpu`` with numpy on the host (``device-fits-cpu.json``). The ratio of the two files'
fit times is the GPU's speed-up for what a user gets; the errors agree to rounding.

Run: ``python -m benchmarks device_fits --device cuda|cpu [--quick] [--skip NAME ...]``.
"""

from __future__ import annotations

import argparse
import logging
import time

import numpy as np

from benchmarks.harness import Suite, print_table
from kernelscale import (
    AutoKernelClassifier,
    DoublyStochasticClassifier,
    LSSVMClassifier,
    RegularizedKernelClassifier,
    SLKLClassifier,
    StagewiseClassifier,
    load_dataset,
)

SUITE = "device-fits"
WARM_ROWS = 2000
logger = logging.getLogger("kernelscale.benchmarks.device_fits")

#: name -> (dataset, estimator class)
FITS = {
    "stagewise": ("mnist", StagewiseClassifier),
    "slkl": ("mnist", SLKLClassifier),
    "dsg": ("mnist", DoublyStochasticClassifier),
    "regularized": ("usps", RegularizedKernelClassifier),
    "lssvm": ("mnist", LSSVMClassifier),
    "auto": ("mnist", AutoKernelClassifier),
}
#: parameters beyond the defaults: the front door's budget (seconds; --quick: a tenth)
EXTRA = {"auto": {"time_budget": 60.0}}


def _digits(name, quick):
    d = load_dataset(name)
    scale = np.float32(255.0) if name == "mnist" else np.float32(1.0)
    X, Xte = d.X_train.astype(np.float32) / scale, d.X_test.astype(np.float32) / scale
    n, m = (4000, 1000) if quick else (X.shape[0], Xte.shape[0])
    return X[:n], np.asarray(d.y_train)[:n], Xte[:m], np.asarray(d.y_test)[:m]


def _device_name(device):
    if device != "cuda":
        return "numpy on the host"
    import torch

    return torch.cuda.get_device_name()


def run(quick=False, out_dir=None, *, device="cpu", skip=()):
    suite = Suite(f"{SUITE}-{device}", quick=quick, out_dir=out_dir,
                  paper={"source": "GPU fits against the CPU at the defaults a user gets"})
    where = _device_name(device)
    data = {}
    for name, (dataset, cls) in FITS.items():
        if name in skip:
            continue
        if dataset not in data:
            data[dataset] = _digits(dataset, quick)
        X, y, Xte, yte = data[dataset]
        params = dict(random_state=0, device="cuda" if device == "cuda" else None)
        params.update({k: v / 10 if quick else v for k, v in EXTRA.get(name, {}).items()})
        cls(**params).fit(X[:WARM_ROWS], y[:WARM_ROWS])  # compilation and first touches, untimed
        est = cls(**params)
        start = time.perf_counter()
        est.fit(X, y)
        fit_s = time.perf_counter() - start
        start = time.perf_counter()
        error = float(np.mean(est.predict(Xte) != yte))
        predict_s = time.perf_counter() - start
        logger.info("%s on %s: fit %.2f s, predict %.2f s, test error %.4f", name, where, fit_s, predict_s, error)
        suite.add(f"{dataset} {X.shape[0]} float32 on {where}", f"{cls.__name__}() {device}", role="ours",
                  params={"estimator": cls.__name__, "device": device, "device_name": where, "n": X.shape[0]},
                  metrics={"fit_seconds": fit_s, "predict_seconds": predict_s, "test_error": error})
        suite.write(plot=False)  # after every fit: a run stopped at a time limit keeps what it did
    print_table(suite.records)
    return suite.write(plot=False)


def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--quick", action="store_true", help="4000 training and 1000 test rows")
    parser.add_argument("--skip", nargs="*", default=(), choices=list(FITS))
    parser.add_argument("--out-dir", default=None, help="where the JSON goes (default benchmarks/results)")
    args = parser.parse_args(argv)
    print(f"results: {run(args.quick, args.out_dir, device=args.device, skip=args.skip)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
