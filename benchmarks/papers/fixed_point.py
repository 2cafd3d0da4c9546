"""Fixed-point and coordinate-descent solvers (paper 3) against LIBSVM and LIBLINEAR.

The paper has no experiments; the target comes from issue #5: fit time within 2x of LIBSVM
(scikit-learn SVC) and LIBLINEAR (scikit-learn LinearSVC, liblinear-official) on CPU, at equal or
better test error, measured in the same run on the same split.

Settings:

- Kernel part (``RegularizedKernelClassifier``, hinge loss, Gaussian kernel) on adult (the
  LIBSVM a9a features: 123 binary features, 32561 train / 16281 test) and on an MNIST subset
  (pixels / 255, seeded subset of the training set, the full 10000 test images). Adult: LIBSVM's
  defaults C = 1, gamma = 1 / n_features (svm-train's ``-c 1 -g 1/k``), i.e. sigma =
  sqrt(n_features / 2) for our k(x, z) = exp(-|x - z|^2 / (2 sigma^2)). MNIST: C = 1 and
  scikit-learn SVC's default gamma="scale" = 1 / (n_features Var(X)) (about 0.013; LIBSVM's 1/784
  makes the kernel nearly constant on pixels in [0, 1], and every solver's error much worse).
  Peers: scikit-learn ``SVC(kernel="rbf", C, gamma)`` (LIBSVM inside, tol 1e-3, cache 200 MB,
  float64; one-vs-one on MNIST) and, on MNIST, ``OneVsRestClassifier(SVC)``, the same
  decomposition as ours (a local wrapper). Ours: float32 data, ``max_memory``
  default (half the available memory: the whole kernel matrix is cached when it fits), the
  "random" rule with shrinking, at several tolerances ``tol`` (largest coefficient change over a
  sweep); the fixed-point solver with ``step_size="power"`` and an iteration cap (adult 50, about
  2 s each; MNIST 1000, where it reaches SVC's error).
- Problem (2) has NO bias term. SVC always fits LIBSVM's unregularised intercept (it cannot be
  switched off), so on the kernel part the two solve slightly different problems; we compare
  test errors and times only. On MNIST coordinate descent runs one-vs-one (45 problems on the
  rows of their two classes, ``multi_class="auto"``, as SVC) and, at the default tolerance, also
  one-vs-rest (10 problems sharing the kernel row cache; the scheme of the runs before session
  12, and the fixed-point solver's), hence the second, one-vs-rest SVC peer.
- Linear part (``kernel="linear"``, Algorithm 2 on w = X^T c, hinge loss) on a9a (= the adult
  features, CSR) and on MNIST raw pixels (pixels / 255, dense, one-vs-rest). Peers WITHOUT a
  bias, so all solve problem (5) exactly: scikit-learn ``LinearSVC(loss="hinge", dual=True,
  fit_intercept=False)`` (a local wrapper: peers.py's LinearSVC has no fit_intercept; tol 1e-4,
  max_iter 1000, scikit-learn's defaults) and LIBLINEAR ``-s 3 -B -1`` (L2-regularised L1-loss
  SVC dual, no bias, LIBLINEAR's default -e 0.1). Ours at ``tol`` in LINEAR_TOLS, with shrinking
  (on the linear path LIBLINEAR's one-sided rule, see kernelscale.regularized.coordinate_descent).
- "Equal or better test error": ours counts as equal when its test error is at most the peer's
  plus 0.1 percentage point (EQUAL_BAND); each of our records names its peer and the ratio
  ours / peer of time and error, and the summary uses the fastest of our tolerances that is
  equal or better. Peers' conversion to their formats is outside the timing; our float32
  conversion too (it is the caller's choice of dtype).
- Kernel fits are measured once (``repeats=1, warmup=0``) after an untimed tiny fit that loads
  numba's compiled sweeps; linear fits three times after one warmup. Peak memory is RSS above
  the start of the call (benchmarks/README.md).

``--quick``: adult 5000 / MNIST 2000 training samples for the kernel part, MNIST 10000 for the
linear part; a few minutes. ``--part kernel`` / ``--part linear`` runs one part and keeps the
other's records of an existing result file.

Run: ``python -m benchmarks fixed_point [--quick] [--part kernel|linear]`` or
``kernelscale bench fixed-point [--quick]``.
"""

from __future__ import annotations

import json
import logging
import sys
import time
import warnings

import numpy as np
import scipy.sparse as sp

from benchmarks.harness import Suite, cli_main, compare, measure
from benchmarks.peers import SklearnLinearSVC, SklearnSVM, make_peer
from kernelscale.data.datasets import load_dataset
from kernelscale.kernels import GaussianKernel
from kernelscale.regularized.estimators import RegularizedKernelClassifier

SUITE = "fixed-point"
SEED = 0
EQUAL_BAND = 0.001  # test errors within 0.1 percentage point count as equal
PARTS = ("kernel", "linear")
logger = logging.getLogger("kernelscale.benchmarks.fixed_point")

PAPER = {
    "source": "Fixed-point and coordinate descent algorithms for regularized kernel methods (paper 3); "
              "docs/algorithms.md section 3. The paper reports no experiments.",
    "target (issue #5)": "fit time within 2x of LIBSVM (SVC) and LIBLINEAR (LinearSVC, liblinear-official) "
                         "on CPU at equal or better test error",
    "hyperparameters": "LIBSVM defaults C = 1, gamma = 1/n_features (sigma = sqrt(n_features / 2))",
    "equal_error_band": EQUAL_BAND,
}


class LinearSVCNoBias(SklearnLinearSVC):
    """scikit-learn LinearSVC with ``fit_intercept=False`` (problem (5) exactly)."""

    def __init__(self, task="classification", C=1.0, loss="hinge", tol=1e-4, max_iter=1000):
        super().__init__(task, C=C, loss=loss, tol=tol, max_iter=max_iter, dual=True)
        self.name = "sklearn LinearSVC(hinge, fit_intercept=False)"

    def _build(self):
        return super()._build().set_params(fit_intercept=False)

    def get_params(self):
        return dict(super().get_params(), fit_intercept=False)

    def prepare(self, X, y=None):
        """As Peer.prepare, but keeps a CSR matrix CSR (scikit-learn's liblinear takes it as is)."""
        if not sp.issparse(X):
            return super().prepare(X, y)
        from benchmarks.peers import Prepared

        if y is None:
            return Prepared(sp.csr_matrix(X), X.shape[0])
        codes, classes = self._encode_y(y)
        return Prepared(sp.csr_matrix(X), X.shape[0], codes, classes)


class SVCOneVsRest(SklearnSVM):
    """scikit-learn ``OneVsRestClassifier(SVC)``: LIBSVM with our multiclass decomposition."""

    def __init__(self, **params):
        super().__init__(**params)
        self.name = "sklearn OneVsRest(SVC(rbf))"

    def _build(self):
        from sklearn.multiclass import OneVsRestClassifier

        return OneVsRestClassifier(super()._build())


def _err(pred, y):
    return float(np.mean(np.asarray(pred) != np.asarray(y)))


def _subset(X, y, n, seed=SEED):
    if n is None or n >= X.shape[0]:
        return X, y
    idx = np.sort(np.random.RandomState(seed).permutation(X.shape[0])[:n])
    return X[idx], y[idx]


def load(name, n_train):
    d = load_dataset(name)
    if name == "mnist":
        X, Xte = d.X_train.astype(np.float32) / np.float32(255.0), d.X_test.astype(np.float32) / np.float32(255.0)
    else:
        X, Xte = d.X_train.astype(np.float32), d.X_test.astype(np.float32)
    X, y = _subset(X, np.asarray(d.y_train), n_train)
    return np.ascontiguousarray(X), y, np.ascontiguousarray(Xte), np.asarray(d.y_test)


# tol bounds the largest |h| of the last full sweep; 5e-2 / 2e-2 are the range of LIBLINEAR's -e 0.1
# (a bound on the spread of projected gradients G = Q_ii h; Q_ii = |x_i|^2 is about 14 on a9a)
LINEAR_TOLS = (5e-2, 2e-2, 1e-2, 1e-3)
DEFAULT_TOL = RegularizedKernelClassifier().tol  # what a user who sets nothing gets


def plan(quick):
    if quick:
        return dict(kernel=[("adult", 5000, (1e-2, 1e-3), 100), ("mnist", 2000, (1e-2, 1e-3), 100)],
                    linear=[("a9a", None, LINEAR_TOLS), ("mnist raw", 10000, LINEAR_TOLS)])
    return dict(kernel=[("adult", None, (1e-2, 1e-3), 50), ("mnist", 10000, (1e-2, 1e-3), 1000)],
                linear=[("a9a", None, LINEAR_TOLS), ("mnist raw", 20000, LINEAR_TOLS)])


def _warm_numba():
    """Load the compiled sweeps (numba's on-disk cache) outside the timings."""
    rng = np.random.RandomState(0)
    X = rng.rand(60, 3).astype(np.float32)
    y = np.where(X[:, 0] > 0.5, 1, -1)
    for kernel, data in (("gaussian", X), ("linear", X), ("linear", sp.csr_matrix(X))):
        RegularizedKernelClassifier(kernel=kernel, tol=1e-2, random_state=0).fit(data, y)


def _fit_ours(est, X, y, Xte, yte, repeats, warmup):
    m = measure(lambda: est.fit(X, y), repeats=repeats, warmup=warmup)
    t0 = time.perf_counter()
    err = _err(est.predict(Xte), yte)
    return m, err, time.perf_counter() - t0


def _ratio_note(err, peer_err):
    verdict = "equal or better" if err <= peer_err + EQUAL_BAND else "WORSE"
    return f"test error {100 * err:.2f}% vs peer {100 * peer_err:.2f}%: {verdict}"


def kernel_part(suite, dataset, n_train, tols, fp_iter):
    X, y, Xte, yte = load("adult" if dataset == "adult" else "mnist", n_train)
    d = X.shape[1]
    # adult: LIBSVM's defaults; MNIST: scikit-learn SVC's default gamma="scale" (1/d on pixels in
    # [0, 1] gives a nearly constant kernel, where every solver does worse)
    C = 1.0
    gamma = 1.0 / d if dataset == "adult" else float(1.0 / (d * X.astype(np.float64).var()))
    sigma = float(np.sqrt(1.0 / (2.0 * gamma)))
    base = dict(n_train=int(X.shape[0]), n_test=int(Xte.shape[0]), n_features=d, C=C, gamma=gamma, sigma=sigma,
                part="kernel")
    name = f"{dataset} {X.shape[0]}" + (" (subset)" if n_train else "")
    logger.info("%s: n=%d d=%d C=%g gamma=%g", name, X.shape[0], d, C, gamma)
    peers = [make_peer("sklearn-svm", kernel="rbf", C=C, gamma=gamma)]
    if len(np.unique(y)) > 2:
        peers.append(SVCOneVsRest(kernel="rbf", C=C, gamma=gamma))
    peer_recs = []
    X64 = X.astype(np.float64)
    for peer in peers:
        prep = peer.prepare(X64, y)
        mp = measure(lambda: peer.fit(prep), repeats=1, warmup=0)
        peer_err = peer.evaluate(Xte.astype(np.float64), yte)["test_error"]
        est = peer.estimator_
        n_sv = int(sum(e.n_support_.sum() for e in est.estimators_)) if hasattr(est, "estimators_") else \
            int(est.n_support_.sum())
        scheme = "one-vs-rest" if isinstance(peer, SVCOneVsRest) else "one-vs-one"
        peer_recs.append(suite.add(name, peer.name, role="peer",
                                   params=dict(base, **peer.get_params(), multiclass=scheme,
                                               intercept="unregularised (LIBSVM)"),
                                   metrics={"test_error": peer_err, "n_support": n_sv}, measurement=mp))
        logger.info("  %s: %.2f%% in %.2f s (%d SV)", peer.name, 100 * peer_err, mp.median, n_sv)
        suite.write(plot=False)
        prep = None  # free the converted copy
    del X64
    kernel = GaussianKernel(sigma)
    multi = len(np.unique(y)) > 2
    # one-vs-one is the default (multi_class="auto"); one-vs-rest, the scheme of the earlier runs,
    # at the default tolerance
    runs = [(tol, "ovo") for tol in tols] + ([(DEFAULT_TOL, "ovr")] if multi else [])
    for tol, scheme in runs:
        est = RegularizedKernelClassifier(kernel=kernel, loss="hinge", C=C, solver="coordinate_descent", tol=tol,
                                          multi_class=scheme if multi else "auto",
                                          max_iter=1000, random_state=SEED)
        m, err, t_pred = _fit_ours(est, X, y, Xte, yte, 1, 0)
        n_sv_ours = int(est.support_.size)
        label = {"ovo": "one-vs-one", "ovr": "one-vs-rest"}[scheme] if multi else None
        for p in peer_recs:
            rec = suite.add(name, f"RegularizedKernelClassifier (coordinate descent, tol={tol:g}"
                            + (f", {label})" if multi else ")"), role="ours",
                            params=dict(base, solver="coordinate_descent", rule="random", shrinking=True, tol=tol,
                                        dtype="float32", n_iter=int(est.n_iter_), multiclass=label,
                                        intercept="none (problem (2))", rows_cached=int(est.support_.size)),
                            metrics={"test_error": err, "n_support": n_sv_ours, "predict_seconds": t_pred},
                            measurement=m)
            compare(rec, p, metrics=["test_error", "time_median_s", "peak_memory_bytes"])
            rec["notes"] = _ratio_note(err, p["metrics"]["test_error"])
            logger.info("  CD tol=%g %s: %.2f%% in %.2f s (%d sweeps, %d SV), ratio to %s %.2f", tol, label or "",
                        100 * err, m.median, est.n_iter_, n_sv_ours, p["method"],
                        rec["ratio_to_peer"]["time_median_s"])
        suite.write(plot=False)
    est = RegularizedKernelClassifier(kernel=kernel, loss="hinge", C=C, solver="fixed_point", step_size="power",
                                      tol=1e-3, max_iter=fp_iter, random_state=SEED)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the iteration cap is the point here
        m, err, t_pred = _fit_ours(est, X, y, Xte, yte, 1, 0)
    for p in peer_recs:
        rec = suite.add(name, f"RegularizedKernelClassifier (fixed point, step_size=power, {fp_iter} it. cap)",
                        role="ours",
                        params=dict(base, solver="fixed_point", step_size="power", step_size_value=float(est.step_size_),
                                    tol=1e-3, max_iter=fp_iter, n_iter=int(est.n_iter_), dtype="float32",
                                    multiclass="one-vs-rest"),
                        metrics={"test_error": err, "n_support": int(est.support_.size), "predict_seconds": t_pred,
                                 "duality_gap": float(est.duality_gap_)},
                        measurement=m)
        compare(rec, p, metrics=["test_error", "time_median_s", "peak_memory_bytes"])
        rec["notes"] = _ratio_note(err, p["metrics"]["test_error"])
        logger.info("  FP: %.2f%% in %.2f s (%d it.), ratio to %s %.2f", 100 * err, m.median, est.n_iter_,
                    p["method"], rec["ratio_to_peer"]["time_median_s"])
    suite.write(plot=False)


def linear_part(suite, dataset, n_train, tols, quick):
    if dataset == "a9a":
        X, y, Xte, yte = load("adult", n_train)
        X, Xte = sp.csr_matrix(X), sp.csr_matrix(Xte)
        layout = "CSR"
    else:
        X, y, Xte, yte = load("mnist", n_train)
        layout = "dense"
    base = dict(n_train=int(X.shape[0]), n_test=int(Xte.shape[0]), n_features=int(X.shape[1]), C=1.0, loss="hinge",
                layout=layout, part="linear", intercept="none")
    name = f"{dataset} {X.shape[0]} (linear)"
    repeats, warmup = (3, 1) if dataset == "a9a" else (1, 0)
    logger.info("%s: n=%d d=%d", name, X.shape[0], X.shape[1])
    peers = [LinearSVCNoBias(C=1.0), make_peer("liblinear", solver="l2r_l1loss_svc_dual", C=1.0, bias=-1.0)]
    peer_recs = []
    for peer in peers:
        if not peer.available():
            logger.warning("  %s not installed: skipped", peer.name)
            continue
        # LIBLINEAR's wrapper wants arrays (it builds CSR itself, outside the timing)
        prep = peer.prepare(X.astype(np.float64) if sp.issparse(X) and isinstance(peer, LinearSVCNoBias)
                            else (X.toarray() if sp.issparse(X) else X).astype(np.float64), y)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # LinearSVC's ConvergenceWarning at max_iter
            mp = measure(lambda: peer.fit(prep), repeats=repeats, warmup=warmup)
        Xte_peer = Xte.astype(np.float64) if isinstance(peer, LinearSVCNoBias) else (
            Xte.toarray() if sp.issparse(Xte) else Xte).astype(np.float64)
        perr = peer.evaluate(Xte_peer, yte)["test_error"]
        peer_recs.append(suite.add(name, peer.name, role="peer", params=dict(base, **peer.get_params()),
                                   metrics={"test_error": perr}, measurement=mp))
        logger.info("  %s: %.2f%% in %.3f s", peer.name, 100 * perr, mp.median)
        prep = None  # free the converted copy
    for tol in tols:
        est = RegularizedKernelClassifier(kernel="linear", loss="hinge", C=1.0, tol=tol, max_iter=1000,
                                          random_state=SEED)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m, err, _ = _fit_ours(est, X, y, Xte, yte, repeats, warmup)
        for pr in peer_recs:
            rec = suite.add(name, f"RegularizedKernelClassifier (linear, tol={tol:g})", role="ours",
                            params=dict(base, tol=tol, rule="random", shrinking=True, dtype="float32",
                                        n_iter=int(est.n_iter_)),
                            metrics={"test_error": err}, measurement=m)
            compare(rec, pr, metrics=["test_error", "time_median_s", "peak_memory_bytes"])
            rec["notes"] = _ratio_note(err, pr["metrics"]["test_error"])
            logger.info("  ours tol=%g: %.2f%% in %.3f s (%d sweeps) vs %s: ratio %.2f", tol, 100 * err,
                        m.median, est.n_iter_, pr["method"], rec["ratio_to_peer"]["time_median_s"])
        suite.write(plot=False)


def summary(suite):
    """Per dataset and peer: the fastest of our records at equal or better test error."""
    lines = []
    groups = {}
    for r in suite.records:
        if r["role"] == "ours" and r.get("peer"):
            groups.setdefault((r["dataset"], r["peer"], "fixed point" in r["method"]), []).append(r)
    for (dataset, peer, fp), recs in groups.items():
        ok = [r for r in recs if "equal or better" in r.get("notes", "")]
        best = min(ok or recs, key=lambda r: r["time_median_s"])
        tag = "" if ok else " (no setting reached the peer's error)"
        lines.append(f"{dataset:32s} {('FP' if fp else 'CD'):3s} vs {peer:48s} time ratio "
                     f"{best['ratio_to_peer'].get('time_median_s', float('nan')):6.2f}  "
                     f"error {100 * best['metrics']['test_error']:.2f}%{tag}  [{best['method']}]")
        default = [r for r in recs if (r.get("params") or {}).get("tol") == DEFAULT_TOL]
        if default and not fp:
            d = default[0]
            lines.append(f"{'':32s}     at the default tol={DEFAULT_TOL:g}: time ratio "
                         f"{d['ratio_to_peer'].get('time_median_s', float('nan')):6.2f}  "
                         f"error {100 * d['metrics']['test_error']:.2f}%")
    return "\n".join(lines)


def part_of(rec):
    return (rec.get("params") or {}).get("part", "kernel")


def run(quick: bool = False, out_dir=None, parts=None):
    """Run the suite (or only ``parts``, keeping the other part's records of an existing file)."""
    parts = tuple(PARTS if not parts else parts)
    suite = Suite(SUITE, quick=quick, out_dir=out_dir, paper=PAPER)
    if set(parts) != set(PARTS) and suite.path.exists():
        kept = [r for r in json.loads(suite.path.read_text())["records"] if part_of(r) not in parts]
        suite.records.extend(kept)
    cfg = plan(quick)
    _warm_numba()
    if "linear" in parts:
        for dataset, n, tols in cfg["linear"]:
            linear_part(suite, dataset, n, tols, quick)
    if "kernel" in parts:
        for dataset, n, tols, fp_iter in cfg["kernel"]:
            kernel_part(suite, dataset, n, tols, fp_iter)
    logger.info("summary (ours / peer; below 2 meets the issue's target):\n%s", summary(suite))
    return suite.write()


def main(argv=None):
    return cli_main(run, argv, __doc__.split("\n")[0], parts=PARTS)


if __name__ == "__main__":
    sys.exit(main())
