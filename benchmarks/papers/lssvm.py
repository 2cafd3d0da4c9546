"""Randomized LS-SVM solvers (paper 4) on MNIST: test error against iterations and time for each
solver, MP with FFT features, seconds per iteration and peak memory; scikit-learn Nystroem +
RidgeClassifier and SVC (LIBSVM) with the same kernel as peers.

Settings (docs/algorithms.md section 4, paper Section 4.1):

- MNIST 60000 train / 10000 test, float32 end to end. Images centred and unit-normalised
  (``CenterNormalize``, eqs. 61-62); for the FFT run ``FFTFeatures`` (eqs. 69-75, 1176 features).
- Kernel <x, x'>^4 (``PolynomialKernel(degree=4, gamma=1, coef0=0)``, eq. 64), C = 1e4 (the paper's
  gamma), ``LSSVMClassifier(dtype=np.float32, random_state=0)``, block size J = 2000.
- Curves: a callback evaluates the live solution after every iteration on the test set through
  the precomputed test kernel Psi = K(X_test, X_train) (eq. 66; 2.4 GB in float32, as the paper
  stores it). The evaluation time is subtracted: ``staged_time_s`` is solver time only.
  Nystrom committees are evaluated after each member (the running average).
- The budget of this machine (2 cores, about 30 minutes for the whole suite) allows T = 80
  iterations of MP and 40 of Kaczmarz (the paper ran 600 Kaczmarz steps, about 5 hours on 4
  cores), Nystrom committees of 10 x J=1000, 5 x J=2000, 2 x J=4000, 3 hybrid iterations
  (each needs one full product with Theta: n^2 d work, see kernelscale.lssvm.solvers) and 40 MP
  iterations with FFT features; these records say where the curves stand, not where they would
  end (the long parts below go further).
- Seconds per iteration: the median of the differences of the callback's timestamps. Peak
  memory: the process's RSS above the start of the fit (harness.measure), test kernel excluded
  (it is allocated before); ``memory_estimate_bytes`` is ``lssvm_fit_memory``'s estimate.
- Peers, each in a forked child killed at a cap: ``Nystroem(kernel="poly", degree=4, gamma=1,
  coef0=0) + RidgeClassifier(alpha=1/C)`` (a local wrapper of peers.SklearnNystroemRidge, whose
  kernel is Gaussian only) with several n_components; "equal time" records give our MP's error at
  the peer's fit time (and the MP time to the peer's error). ``SVC(kernel="poly", degree=4,
  gamma=1, coef0=0, C=10)`` (LIBSVM inside scikit-learn; C of the hinge loss is not the LS-SVM's
  C, 10 is a usual value for this kernel, not tuned) on nested seeded subsets of growing size
  (10000, 30000, 60000) until the next size is not expected (time x (n'/n)^2) to finish within
  what is left of a total cap of 450 s; the largest finished subset is the LIBSVM result of
  this part (the "long-svc" part below runs all 60000 images).
- CIFAR-10 is not in /work/shared/data, so the CIFAR-10 experiments (E1-E3) are not run.

``--quick``: 10000 training images (seeded subset), the full test set, J = 1000, short runs and
caps; about three minutes.

Parts (``--part``): "solvers" (MP, Kaczmarz, Nystrom on normalised pixels), "peers", "hybrid",
"fft" (the default parts, run when none is named), and the long parts below. A run of some parts
keeps the other parts' records of an existing result file, so the suite can be run in pieces;
comparisons are recomputed from all records.

Long parts (run only when named; their records are merged into the result file like the others,
and a run of the default parts keeps them). Each is one fit of ``LSSVMClassifier`` (same settings,
``random_state=0``) whose callback evaluates the test error every few iterations (evaluation time
excluded from ``staged_time_s``) and stops the fit (the callback returns True) at the first of:
the iteration limit, a solver-time cap, or, where a flat window is set, no checkpoint in the last
``flat`` iterations below (best error before them) - 0.02% (two test images), checked from
iteration 60. The mean and standard deviation of the checkpoints in the last third of a run are
recorded too (the paper reads its fluctuating curves as "1.1 +- 0.1%"). Sizes (locked runs of up
to 30 minutes on the 2-core machine):

- "long-mp": matching pursuit, J = 2000, at most 150 iterations, error every 2, flat window 40,
  cap 900 s (6.5 minutes: stopped flat at 136 iterations);
- "long-kaczmarz": Kaczmarz, J = 2000, the paper's T = 600 iterations, error every 20, cap 1650 s
  of solver time (30 minutes: 558 steps in the cap, best 1.12% at step 540, 1.25% at the end,
  1.23 +- 0.05% over the last third; an earlier run with a 960 s cap had 1.10% at step 290);
- "long-hybrid": the hybrid, J = 2000, at most 150 iterations, error every 3, flat window 40,
  cap 4500 s (75 minutes: stopped flat at 117 iterations, 33.7 s each; best 1.15% at iteration
  75, 1.15% at the end, 1.17 +- 0.02% over the last third, against the paper's 1.1 +- 0.05%;
  its curve follows matching pursuit's iteration for iteration at 13x the cost per iteration,
  one full product with Theta each: see the subset parts);
- "long-nystrom": Nystrom committee with the paper's J = 10000 and T = 6 members (the paper's
  number), ``max_memory="8GB"`` (the fit's estimate is 4.3 GiB: a 10000 x 60000 float32 block
  and the float64 10000 x 10000 Gram matrix and factor; the run peaked at 6.8 GiB before a
  regularised factorisation stopped building identity matrices and the previous factor was
  released early, and at 4.2 GiB since: 1.19% after 6 members, 81 s each), cap 600 s;
- "long-fft": matching pursuit on FFT features, at most 300 iterations, error every 4, flat
  window 80, cap 900 s (10 minutes: stopped flat at 176 iterations, best 1.08% at 116, 1.09% at
  176, against the paper's 0.85%);
- "long-subset-mp", "long-subset-kaczmarz", "long-subset-hybrid": the three iterative solvers on a
  seeded 20000-image subset (all 10000 test images), J = 2000, until flat (windows 40 / 60 / 40)
  or 200 / 300 / 200 iterations, caps 600 / 600 / 900 s: there the hybrid's full product with
  Theta is 10 kernel blocks instead of 30, so all three can be run to their plateaus;
- "exact-subset": the exact LS-SVM solution (float64, dense) on the same 20000 images, for pixels
  and FFT features: where the iterative solvers' plateaus should be, and the FFT gain without
  optimisation error;
- "long-svc": SVC (as in "peers") on all 60000 training images in a forked child killed after
  1140 s (fit + the 10000 test predictions; the issue allows 30 minutes, a locked run here 20;
  it finished in 6.5 minutes).

With ``--quick`` the long parts use the 10000-image subset, J = 1000 (2000 for Nystrom), at most
12 iterations, a flat window of 4 from iteration 4, 60 s caps and a 120 s cap for SVC.

Run: ``python -m benchmarks lssvm [--quick] [--part solvers --part peers]`` or
``kernelscale bench lssvm`` (the default parts); long parts one locked run at a time, e.g.
``flock /tmp/kernelscale-heavy.lock timeout 1500 python -m benchmarks lssvm --part long-mp``.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.harness import Suite, cli_main, compare, measure, median, run_capped
from benchmarks.peers import SklearnNystroemRidge, make_peer
from kernelscale.ops import kernel_matrix
from kernelscale.data.datasets import load_dataset
from kernelscale.kernels import PolynomialKernel
from kernelscale.lssvm import LSSVMClassifier, lssvm_fit_memory
from kernelscale.preprocessing import CenterNormalize, FFTFeatures

SUITE = "lssvm"
SEED = 0
C = 1e4
PARTS = ("solvers", "peers", "hybrid", "fft")
logger = logging.getLogger("kernelscale.benchmarks.lssvm")

PAPER = {
    "source": "Randomized kernel methods for least-squares support vector machines (paper 4), "
              "Section 4, Figures 2-3; docs/algorithms.md section 4",
    "settings": "MNIST 60000/10000, centred unit-norm images, kernel <x,x'>^4, gamma (our C) = 1e4, "
                "float32, Julia on a 4-core PC with 8 GB",
    "MNIST test error %": {"kaczmarz (J=2000, T=600)": 1.1, "matching_pursuit (J=2000)": 1.1,
                           "kaczmarz_mp": 1.1, "matching_pursuit + FFT features": 0.85,
                           "nystrom": "worse than the iterative solvers, decreasing with J "
                                      "(J = 10000 needs T = 6 members)"},
    "seconds per iteration (J=2000)": {"kaczmarz": 29, "matching_pursuit": 14},
    "CIFAR-10 test error % (MP, J=2500)": {"E1": 43.93, "E2": 41.21, "E3": 33.71},
}
PAPER_ERRORS = {"kaczmarz": 0.011, "matching_pursuit": 0.011, "kaczmarz_mp": 0.011}


def paper_kernel():
    return PolynomialKernel(degree=4, gamma=1.0, coef0=0.0)


def plan(quick):
    if quick:
        return dict(n_train=10000, J=1000, T={"matching_pursuit": 15, "kaczmarz": 15, "kaczmarz_mp": 4},
                    T_fft=10, nystrom=[(500, 6), (1000, 4)], nystroem_m=[500, 1000], nystroem_cap=60.0,
                    svc_sizes=[1000, 2000, 4000], svc_cap=45.0, svc_full_cap=120.0)
    return dict(n_train=60000, J=2000, T={"matching_pursuit": 80, "kaczmarz": 40, "kaczmarz_mp": 3},
                T_fft=40, nystrom=[(1000, 10), (2000, 5), (4000, 2)], nystroem_m=[2000, 4000],
                nystroem_cap=240.0, svc_sizes=[10000, 30000, 60000], svc_cap=450.0, svc_full_cap=1140.0)


# ----------------------------------------------------------------------------------------------
# data


def load(n_train, fft=False):
    """MNIST as float32, centred unit-norm (or FFT features); a seeded training subset."""
    d = load_dataset("mnist")
    X, Xte = d.X_train.astype(np.float32), d.X_test.astype(np.float32)
    y, yte = np.asarray(d.y_train).astype(np.int64), np.asarray(d.y_test).astype(np.int64)
    if n_train < X.shape[0]:
        idx = np.sort(np.random.RandomState(SEED).permutation(X.shape[0])[:n_train])
        X, y = X[idx], y[idx]
    transform = FFTFeatures() if fft else CenterNormalize()
    X = transform.fit_transform(X)
    Xte = transform.transform(Xte)
    return np.ascontiguousarray(X), y, np.ascontiguousarray(Xte), yte


def test_kernel(X, Xte):
    """Psi = K(X_test, X_train) of eq. 66 (float32), timed."""
    start = time.perf_counter()
    Psi = kernel_matrix(paper_kernel(), Xte, X)
    return Psi, time.perf_counter() - start


def error_of(W, Psi, yte):
    """Test error of W = [b; A] from the test kernel (classes are the digits 0..9)."""
    scores = Psi @ W[1:]
    scores += W[0]
    return float(np.mean(np.argmax(scores, axis=1) != yte))


class Curve:
    """Callback: after every iteration, the test error and the solver time (evaluation excluded)."""

    def __init__(self, Psi, yte):
        self.Psi, self.yte = Psi, yte

    def start(self):
        self.t0, self.eval_s = time.perf_counter(), 0.0
        self.steps, self.times, self.errors = [], [], []

    def __call__(self, info):
        now = time.perf_counter()
        self.times.append(now - self.t0 - self.eval_s)
        self.steps.append(int(info["step"]))
        self.errors.append(error_of(info["coef"], self.Psi, self.yte))
        self.eval_s += time.perf_counter() - now
        return False


# ----------------------------------------------------------------------------------------------
# our solvers


def fit_with_curve(curve, dataset, solver, J, T, X, y, Psi, yte, max_memory=None):
    """Fit the paper's LSSVMClassifier with ``curve`` as its callback (test error at checkpoints,
    evaluation time kept out); returns (estimator, measurement, solver seconds, metrics)."""
    est = LSSVMClassifier(kernel=paper_kernel(), C=C, solver=solver, batch_size=J, n_iter=T,
                          dtype=np.float32, random_state=SEED, max_memory=max_memory, callback=curve)

    def fit():
        curve.start()
        return est.fit(X, y)

    m = measure(fit, repeats=1, warmup=0)
    W = np.vstack([est.intercept_[None, :], est.dual_coef_])
    stamps = [0.0] + getattr(curve, "all_times", curve.times)
    per_iter = [b - a for a, b in zip(stamps[:-1], stamps[1:])]
    metrics = {
        "test_error": error_of(W, Psi, yte),
        "n_iter": int(est.n_iter_),
        "seconds_per_iteration": median(per_iter),
        "seconds_per_iteration_all": per_iter,
        "staged_iteration": curve.steps,
        "staged_test_error": curve.errors,
        "staged_time_s": curve.times,
        "memory_estimate_bytes": lssvm_fit_memory(X.shape[0], X.shape[1], 10, J, np.float32, paper_kernel(),
                                                  solver),
        "fit_dtype": str(est.dual_coef_.dtype),
        "n_regularized": int(est.n_regularized_),
        "paper_test_error": 0.0085 if "fft" in dataset else PAPER_ERRORS.get(solver),
    }
    return est, m, m.median - curve.eval_s, metrics


def run_solver(suite, dataset, solver, X, y, Psi, yte, J, T, base, part, Xte_check=None):
    curve = Curve(Psi, yte)
    est, m, solver_s, metrics = fit_with_curve(curve, dataset, solver, J, T, X, y, Psi, yte)
    err = metrics["test_error"]
    metrics["min_test_error"] = min(curve.errors)
    if hasattr(est, "residual_history_"):
        h = est.residual_history_[0]
        metrics["relative_residual"] = float(h[-1] / h[0])
    if Xte_check is not None:  # the Psi-based evaluation agrees with the estimator's own predict
        k = min(1000, Psi.shape[0])
        pred = est.predict(Xte_check[:k])
        W = np.vstack([est.intercept_[None, :], est.dual_coef_])
        metrics["predict_agrees_with_psi"] = float(np.mean(pred == np.argmax(Psi[:k] @ W[1:] + W[0], axis=1)))
    label = f"LSSVMClassifier({solver}, J={J})"
    rec = suite.add(
        dataset, label, role="ours", measurement=m, time_median_s=solver_s, times_s=[solver_s],
        params=dict(base, solver=solver, batch_size=J, n_iter=T, C=C, part=part, random_state=SEED,
                    kernel="polynomial degree 4, gamma 1, coef0 0", fit_wall_s=m.median,
                    evaluation_s=curve.eval_s),
        metrics=metrics,
        notes="one fit; time = fit wall time minus the per-iteration test evaluations (evaluation_s); "
              "staged_* after every iteration (committee members for nystrom)")
    if metrics["paper_test_error"] is not None:
        suite.add(dataset, f"paper ({solver}{', FFT' if 'fft' in dataset else ''})", role="paper",
                  params={"part": part}, metrics={"test_error": metrics["paper_test_error"]})
    logger.info("%s on %s: %d iterations, error %.4f (min %.4f), %.2f s/iteration, %.0f s, peak %.0f MiB",
                label, dataset, est.n_iter_, err, metrics["min_test_error"], metrics["seconds_per_iteration"],
                solver_s, (m.peak_memory_bytes or 0) / 2**20)
    return rec


# ----------------------------------------------------------------------------------------------
# peers in a forked child with a time cap


class PolyNystroemRidge(SklearnNystroemRidge):
    """peers.SklearnNystroemRidge with the paper's polynomial kernel (peers.py has the Gaussian
    kernel only): Nystroem(kernel="poly", degree=4, gamma=1, coef0=0) + RidgeClassifier."""

    def __init__(self, n_components=1000, alpha=1.0 / C, random_state=SEED):
        super().__init__("classification", n_components=n_components, gamma=1.0, alpha=alpha,
                         random_state=random_state)
        self.params.update(kernel="poly", degree=4, coef0=0.0)
        self.name = f"sklearn Nystroem(poly4, m={n_components}) + RidgeClassifier"

    def _build(self):
        from sklearn.kernel_approximation import Nystroem
        from sklearn.linear_model import RidgeClassifier
        from sklearn.pipeline import make_pipeline

        p = self.params
        feat = Nystroem(kernel="poly", degree=4, gamma=1.0, coef0=0.0, n_components=p["n_components"],
                        random_state=p["random_state"])
        return make_pipeline(feat, RidgeClassifier(alpha=p["alpha"]))


def _peer_fit(peer, X, y, Xte, yte):
    m = measure(lambda: peer.fit(X, y), repeats=1, warmup=0)
    start = time.perf_counter()
    ev = peer.evaluate(Xte, yte)
    return {"ok": True, "metrics": ev, "fields": m.record_fields(), "predict_s": time.perf_counter() - start}


def run_peer(peer, X, y, Xte, yte, cap_s):
    """Fit + evaluate ``peer`` in a forked child killed after ``cap_s``; (message or None, wall)."""
    start = time.perf_counter()
    status, out = run_capped(lambda: _peer_fit(peer, X, y, Xte, yte), cap_s)
    wall = time.perf_counter() - start
    return (None if status == "timeout" else out if status == "ok" else {"ok": False, "error": out}), wall


def add_peer_record(suite, dataset, peer, msg, wall, cap_s, params, part):
    p = dict(peer.get_params(), **params, time_cap_s=cap_s, part=part)
    if msg is None or not msg["ok"]:
        why = (f"did not finish within the cap of {cap_s:.0f} s (fit + predict; killed)" if msg is None
               else f"failed: {msg['error'].strip().splitlines()[-1]}")
        logger.info("%s: %s", peer.name, why)
        return suite.add(dataset, peer.name, role="peer", params=p, metrics={"test_error": None},
                         notes=f"{why}; wall {wall:.0f} s")
    f = msg["fields"]
    rec = suite.add(dataset, peer.name, role="peer", params=p, metrics=dict(msg["metrics"], predict_s=msg["predict_s"]),
                    time_median_s=f["time_median_s"], times_s=f["times_s"], peak_memory_bytes=f["peak_memory_bytes"],
                    notes="fit timed once in a forked child (predict_s: the 10000 test predictions, not timed)")
    logger.info("%s: error %.4f, fit %.1f s, predict %.1f s", peer.name, msg["metrics"]["test_error"],
                f["time_median_s"], msg["predict_s"])
    return rec


def run_peers(suite, dataset, X, y, Xte, yte, cfg, base):
    for m in cfg["nystroem_m"]:
        peer = PolyNystroemRidge(n_components=m)
        msg, wall = run_peer(peer, X, y, Xte, yte, cfg["nystroem_cap"])
        add_peer_record(suite, dataset, peer, msg, wall, cfg["nystroem_cap"], dict(base), "peers")
        suite.write(plot=False)
    # SVC on nested seeded subsets, doubling while the next one is expected to fit the cap
    order = np.random.RandomState(SEED + 1).permutation(X.shape[0])
    remaining, last_wall, last_n = cfg["svc_cap"], None, None
    for n in cfg["svc_sizes"]:
        n = min(n, X.shape[0])
        expected = None if last_wall is None else last_wall * (n / last_n) ** 2  # SMO grows about as n^2
        if expected is not None and expected > remaining:
            logger.info("SVC: n=%d not started (expected ~%.0f s, %.0f s of the cap left)", n, expected, remaining)
            break
        idx = np.sort(order[:n])
        peer = make_peer("sklearn-svm", kernel="poly", degree=4, gamma=1.0, coef0=0.0, C=10.0, cache_size=2000)
        msg, wall = run_peer(peer, X[idx], y[idx], Xte, yte, remaining)
        rec = add_peer_record(suite, f"{dataset} subset {n}", peer, msg, wall, remaining,
                              dict(base, n_train=n, subset="nested seeded subsets, seed 1"), "peers")
        rec["params"]["svc_total_cap_s"] = cfg["svc_cap"]
        suite.write(plot=False)
        remaining -= wall
        last_wall, last_n = wall, n
        if msg is None or not msg["ok"] or n == X.shape[0]:
            break


# ----------------------------------------------------------------------------------------------
# long runs (parts long-*): test error at checkpoints, stopped by a flatness rule or a time cap


class Checkpoints(Curve):
    """Callback for long runs: the solver time of every iteration, the test error every ``every``
    iterations (evaluation time excluded), and a stop (the callback returns True) when the solver
    time passes ``max_time_s`` or the error has been flat: no checkpoint of the last ``flat``
    iterations is below (best error before them) - ``flat_tol``."""

    def __init__(self, Psi, yte, every=1, max_time_s=None, flat=None, flat_tol=2e-4, min_steps=0):
        super().__init__(Psi, yte)
        self.every, self.max_time_s, self.flat, self.flat_tol = every, max_time_s, flat, flat_tol
        self.min_steps = min_steps

    def start(self):
        super().start()
        self.all_steps, self.all_times, self.stop_reason = [], [], None

    def evaluate(self, step, t, W):
        now = time.perf_counter()
        self.steps.append(int(step))
        self.times.append(t)
        self.errors.append(error_of(W, self.Psi, self.yte))
        self.eval_s += time.perf_counter() - now

    def __call__(self, info):
        t = time.perf_counter() - self.t0 - self.eval_s
        step = int(info["step"])
        self.all_steps.append(step)
        self.all_times.append(t)
        if step % self.every == 0 or step == 1:
            self.evaluate(step, t, info["coef"])
        if self.max_time_s is not None and t >= self.max_time_s:
            self.stop_reason = f"solver time {t:.0f} s >= cap {self.max_time_s:.0f} s"
        elif self.flat and step >= max(self.min_steps, self.flat) and self.steps[-1] == step:
            before = [e for s, e in zip(self.steps, self.errors) if s <= step - self.flat]
            recent = [e for s, e in zip(self.steps, self.errors) if s > step - self.flat]
            if before and min(recent) > min(before) - self.flat_tol:
                self.stop_reason = (f"flat: no error below {100 * (min(before) - self.flat_tol):.2f}% in the "
                                    f"last {self.flat} iterations")
        if self.stop_reason and self.steps[-1] != step:
            self.evaluate(step, t, info["coef"])
        return self.stop_reason is not None


LONG = {  # part: (data, solver, J, max iterations, checkpoint every, flat window, time cap s, max_memory)
    "long-mp": ("pixels", "matching_pursuit", 2000, 150, 2, 40, 900.0, None),
    "long-kaczmarz": ("pixels", "kaczmarz", 2000, 600, 20, None, 1650.0, None),
    "long-hybrid": ("pixels", "kaczmarz_mp", 2000, 150, 3, 40, 4500.0, None),
    "long-nystrom": ("pixels", "nystrom", 10000, 6, 1, None, 600.0, "8GB"),
    "long-fft": ("fft", "matching_pursuit", 2000, 300, 4, 80, 900.0, None),
    # the three iterative solvers to their plateaus on a subset, where the hybrid's full product
    # with Theta per iteration is affordable (a 20000-image subset: 10 kernel blocks, not 30)
    "long-subset-mp": ("subset", "matching_pursuit", 2000, 200, 2, 40, 600.0, None),
    "long-subset-kaczmarz": ("subset", "kaczmarz", 2000, 300, 5, 60, 600.0, None),
    "long-subset-hybrid": ("subset", "kaczmarz_mp", 2000, 200, 2, 40, 900.0, None),
}
#: training images of the "subset" long parts (seeded, as ``load``)
SUBSET_N = 20000
LONG_PARTS = tuple(LONG) + ("long-svc", "exact-subset")


def run_long(suite, dataset, part, X, y, Psi, yte, base, quick=False):
    """One long run of ``LONG[part]``; records the checkpoints against iteration and solver time.
    ``quick``: J = 1000 (2000 for Nystrom), at most 12 iterations, flat window 4, cap 60 s."""
    _, solver, J, T, every, flat, cap, max_memory = LONG[part]
    min_steps = 60
    if quick:
        J, T, cap, min_steps = min(J, 2000 if solver == "nystrom" else 1000), min(T, 12), 60.0, 4
        flat = flat and 4
    curve = Checkpoints(Psi, yte, every=every, max_time_s=cap, flat=flat, min_steps=min_steps)
    est, m, solver_s, metrics = fit_with_curve(curve, dataset, solver, J, T, X, y, Psi, yte, max_memory)
    err = metrics["test_error"]
    best = int(np.argmin(curve.errors))
    metrics.update({
        "min_test_error": curve.errors[best],
        "min_test_error_iteration": curve.steps[best],
        "min_test_error_time_s": curve.times[best],
        "stop_reason": curve.stop_reason or f"n_iter={T} reached",
    })
    # the paper reads its fluctuating curves as a level +- a spread ("1.1 +- 0.1%"): the mean and
    # standard deviation of the checkpoints in the last third of the run
    tail = [e for s, e in zip(curve.steps, curve.errors) if s > 2 * est.n_iter_ / 3]
    metrics["last_third_error_mean"] = float(np.mean(tail))
    metrics["last_third_error_std"] = float(np.std(tail))
    if hasattr(est, "residual_history_"):
        h = est.residual_history_[0]
        h = h[np.isfinite(h)]
        metrics["relative_residual"] = float(h[-1] / h[0])
        metrics["residual_history"] = [float(v) for v in h]
    if hasattr(est, "update_history_"):
        u = est.update_history_[0]
        metrics["update_history"] = [float(v) for v in u[np.isfinite(u)]]
    label = f"LSSVMClassifier({solver}, J={J}) long run"
    rec = suite.add(
        dataset, label, role="ours", measurement=m, time_median_s=solver_s, times_s=[solver_s],
        params=dict(base, solver=solver, batch_size=J, n_iter=T, C=C, part=part, random_state=SEED,
                    kernel="polynomial degree 4, gamma 1, coef0 0", fit_wall_s=m.median,
                    evaluation_s=curve.eval_s, checkpoint_every=every, flat_window=flat,
                    flat_tol=curve.flat_tol, time_cap_s=cap, max_memory=max_memory),
        metrics=metrics,
        notes=f"one fit; test error every {every} iteration(s) (and at the stop), evaluation time excluded; "
              f"stopped by the callback at the first of: {T} iterations, solver time >= {cap:.0f} s"
              + (f", no checkpoint in the last {flat} iterations below the best before them - "
                 f"{100 * curve.flat_tol:.2f}% (checked from iteration {min_steps})" if flat else ""))
    logger.info("%s on %s: %d iterations (%s), error %.4f (min %.4f at %d, %.0f s), %.2f s/iteration, %.0f s, "
                "peak %.0f MiB", label, dataset, est.n_iter_, metrics["stop_reason"], err, metrics["min_test_error"],
                metrics["min_test_error_iteration"], metrics["min_test_error_time_s"],
                metrics["seconds_per_iteration"], solver_s, (m.peak_memory_bytes or 0) / 2**20)
    return rec


def run_exact_subset(suite, quick):
    """The exact LS-SVM solution (float64 Cholesky of the n x n system) on the subset of the
    "subset" long parts, for pixels and FFT features: the plateau the iterative solvers should
    reach there, and the FFT gain without any optimisation error."""
    n = 3000 if quick else SUBSET_N
    for fft in (False, True):
        X, y, Xte, yte = load(n, fft=fft)
        est = LSSVMClassifier(kernel=paper_kernel(), C=C, solver="exact", dtype=np.float64, max_memory="10GB")
        m = measure(lambda: est.fit(X, y), repeats=1, warmup=0)
        err = float(np.mean(est.predict(Xte) != yte))
        ds = f"mnist{' fft' if fft else ''} subset {X.shape[0]}"
        suite.add(ds, "LSSVMClassifier(exact, float64)", role="ours", measurement=m,
                  params={"solver": "exact", "dtype": "float64", "C": C, "n_train": int(X.shape[0]),
                          "n_test": int(Xte.shape[0]), "part": "exact-subset",
                          "data": "FFTFeatures (eqs. 69-75)" if fft else "CenterNormalize (eqs. 61-62)"},
                  metrics={"test_error": err},
                  notes="dense n x n solve, timed once; the reference for the iterative solvers' plateaus")
        logger.info("exact LS-SVM on %s: error %.4f in %.0f s", ds, err, m.median)
        suite.write(plot=False)


def run_svc_full(suite, X, y, Xte, yte, base, cap_s):
    """SVC (LIBSVM) on all training images in a forked child killed at ``cap_s``."""
    peer = make_peer("sklearn-svm", kernel="poly", degree=4, gamma=1.0, coef0=0.0, C=10.0, cache_size=2000)
    msg, wall = run_peer(peer, X, y, Xte, yte, cap_s)
    rec = add_peer_record(suite, f"mnist subset {X.shape[0]}", peer, msg, wall, cap_s,
                          dict(base, n_train=int(X.shape[0]), subset="all training images"), "long-svc")
    rec["params"]["wall_s"] = wall
    return rec


# ----------------------------------------------------------------------------------------------
# comparisons at equal time


def equal_time(suite, records):
    """For each finished peer: our MP curve's error at the peer's fit time and the MP time to
    reach the peer's error (the ratio ours/peer of test_error at equal time)."""
    mp_recs = [r for r in records if r["role"] == "ours" and r["params"].get("solver") == "matching_pursuit"
               and r["params"].get("part") == "solvers"]
    if not mp_recs:
        return
    ours = mp_recs[0]
    errors, stamps = ours["metrics"]["staged_test_error"], ours["metrics"]["staged_time_s"]
    for p in [r for r in records if r["role"] == "peer" and r["metrics"].get("test_error") is not None]:
        e_p, t_p = p["metrics"]["test_error"], p["time_median_s"]
        done = [i for i, t in enumerate(stamps) if t <= t_p]
        i = done[-1] if done else None
        reach = next((j for j, e in enumerate(errors) if e <= e_p), None)
        rec = suite.add(
            p["dataset"], f"{ours['method']} at the time of {p['method']}", role="ours",
            params={"part": "compare", "ours": ours["method"], "peer_time_s": t_p, "peer_error": e_p,
                    "n_train_ours": ours["params"]["n_train"], "n_train_peer": p["params"].get("n_train")},
            metrics={"test_error": None if i is None else errors[i],
                     "iteration": None if i is None else i + 1,
                     "time_to_peer_error_s": None if reach is None else stamps[reach],
                     "iterations_to_peer_error": None if reach is None else reach + 1,
                     "last_test_error": errors[-1], "last_time_s": stamps[-1]},
            time_median_s=None if i is None else stamps[i], times_s=[] if i is None else [stamps[i]],
            notes="our MP curve (one fit) read at the peer's fit time; time_to_peer_error_s: first iteration "
                  "whose error <= the peer's" + ("" if reach is not None else " (never reached within the run)"))
        if i is not None:
            compare(rec, p, metrics=["test_error", "time_median_s"])


# ----------------------------------------------------------------------------------------------


def _merge_previous(suite, parts):
    """Keep the records of the parts not run now from an existing result file (the long parts'
    records survive a run of the default parts)."""
    if not suite.path.exists():
        return
    with open(suite.path) as fh:
        old = json.load(fh)
    keep = [r for r in old["records"] if r["params"].get("part") not in set(parts) | {"compare"}]
    suite.records[:0] = keep
    logger.info("kept %d records of the parts not run now from %s", len(keep), suite.path)


def run(quick: bool = False, out_dir=None, parts=None):
    """Run the suite (all parts unless ``parts`` names some); return the JSON path."""
    parts = tuple(PARTS if not parts else parts)
    unknown = set(parts) - set(PARTS) - set(LONG_PARTS)
    if unknown:
        raise ValueError(f"unknown parts {sorted(unknown)}; choose from {PARTS + LONG_PARTS}.")
    cfg = plan(quick)
    suite = Suite(SUITE, quick=quick, out_dir=out_dir, paper=PAPER)
    _merge_previous(suite, parts)
    started = time.perf_counter()
    J = cfg["J"]
    if {"solvers", "peers", "hybrid"} & set(parts):
        X, y, Xte, yte = load(cfg["n_train"])
        base = {"n_train": int(X.shape[0]), "n_test": int(Xte.shape[0]), "n_features": int(X.shape[1]),
                "dtype": "float32", "data": "CenterNormalize (eqs. 61-62)"}
        ds = "mnist" if not quick else f"mnist {X.shape[0]}"
        logger.info("MNIST %d x %d train, %d test", X.shape[0], X.shape[1], Xte.shape[0])
        if {"solvers", "hybrid"} & set(parts):
            Psi, psi_s = test_kernel(X, Xte)
            logger.info("test kernel %s in %.1f s", Psi.shape, psi_s)
            base["test_kernel_s"] = psi_s
            if "solvers" in parts:
                for i, solver in enumerate(("matching_pursuit", "kaczmarz")):
                    run_solver(suite, ds, solver, X, y, Psi, yte, J, cfg["T"][solver], base, "solvers",
                               Xte_check=Xte if i == 0 else None)
                    suite.write(plot=False)
                for Jn, Tn in cfg["nystrom"]:
                    run_solver(suite, ds, "nystrom", X, y, Psi, yte, Jn, Tn, base, "solvers")
                    suite.write(plot=False)
            if "hybrid" in parts:
                run_solver(suite, ds, "kaczmarz_mp", X, y, Psi, yte, J, cfg["T"]["kaczmarz_mp"], base, "hybrid")
                suite.write(plot=False)
            Psi = None
        if "peers" in parts:
            run_peers(suite, ds, X, y, Xte, yte, cfg, base)
        X = Xte = None
    if "fft" in parts:
        X, y, Xte, yte = load(cfg["n_train"], fft=True)
        Psi, psi_s = test_kernel(X, Xte)
        base = {"n_train": int(X.shape[0]), "n_test": int(Xte.shape[0]), "n_features": int(X.shape[1]),
                "dtype": "float32", "data": "FFTFeatures (eqs. 69-75)", "test_kernel_s": psi_s}
        ds = "mnist fft" if not quick else f"mnist fft {X.shape[0]}"
        run_solver(suite, ds, "matching_pursuit", X, y, Psi, yte, J, cfg["T_fft"], base, "fft")
        Psi = X = Xte = None
    if "exact-subset" in parts:
        run_exact_subset(suite, quick)
    long_parts = [p for p in LONG_PARTS if p in parts and p != "exact-subset"]
    if long_parts:
        run_long_parts(suite, long_parts, cfg, quick)
    equal_time(suite, suite.records)
    path = suite.write(plot=False)
    plot_curves(suite.records, Path(path).with_suffix(".png"), suite.stem)
    long_recs = [r for r in suite.records if str(r["params"].get("part", "")).startswith("long-")
                 or (r["role"] == "peer" and r["metrics"].get("test_error") is not None)]
    if any("staged_test_error" in r["metrics"] for r in long_recs):
        plot_curves(long_recs, Path(path).with_name(f"{suite.stem}-long.png"), f"{suite.stem} (long runs)")
    print_report(suite.records)
    print(f"\ntotal {time.perf_counter() - started:.0f} s")
    return path


def run_long_parts(suite, parts, cfg, quick):
    """The long parts: one load (and one test kernel) per kind of data."""
    for data in ("pixels", "fft", "subset"):
        todo = [p for p in parts if (LONG[p][0] if p in LONG else "pixels") == data]
        if not todo:
            continue
        n_train = min(SUBSET_N, cfg["n_train"] // 3) if data == "subset" else cfg["n_train"]
        X, y, Xte, yte = load(n_train, fft=data == "fft")
        base = {"n_train": int(X.shape[0]), "n_test": int(Xte.shape[0]), "n_features": int(X.shape[1]),
                "dtype": "float32",
                "data": "FFTFeatures (eqs. 69-75)" if data == "fft" else "CenterNormalize (eqs. 61-62)"}
        ds = {"fft": "mnist fft", "pixels": "mnist", "subset": "mnist subset"}[data]
        ds += f" {X.shape[0]}" if quick or data == "subset" else ""
        if "long-svc" in todo:
            run_svc_full(suite, X, y, Xte, yte, base, cfg["svc_full_cap"])
            suite.write(plot=False)
        solvers = [p for p in todo if p in LONG]
        if solvers:
            Psi, psi_s = test_kernel(X, Xte)
            base["test_kernel_s"] = psi_s
            for p in solvers:
                run_long(suite, ds, p, X, y, Psi, yte, base, quick)
                suite.write(plot=False)
            Psi = None
        X = Xte = None


def print_report(records):
    print("\nOurs (test error % at each iteration; s/iteration; peak memory)")
    for r in records:
        m = r["metrics"]
        if r["role"] != "ours" or "staged_test_error" not in m:
            continue
        errs = m["staged_test_error"]
        marks = sorted({0, 1, 2, 4, 9, 14, 19, 29, 39, 59, len(errs) - 1} & set(range(len(errs))))
        curve = ", ".join(f"T={m['staged_iteration'][i]}: {100 * errs[i]:.2f}" for i in marks)
        print(f"  {r['dataset']:<12} {r['method']:<44} {m['seconds_per_iteration']:.2f} s/it, "
              f"{(r['peak_memory_bytes'] or 0) / 2**20:.0f} MiB (estimate {m['memory_estimate_bytes'] / 2**20:.0f}); "
              f"{curve}")
    print("\nLong runs (best test error %, where, stop)")
    for r in records:
        m = r["metrics"]
        if str(r["params"].get("part", "")).startswith("long-") and "min_test_error" in m:
            print(f"  {r['dataset']:<12} {r['method']:<44} best {100 * m['min_test_error']:.2f} at T="
                  f"{m['min_test_error_iteration']} ({m['min_test_error_time_s']:.0f} s), last "
                  f"{100 * m['test_error']:.2f} at T={m['n_iter']} ({r['time_median_s']:.0f} s); {m['stop_reason']}")
    print("\nPeers (test error %, fit s)")
    for r in records:
        if r["role"] == "peer":
            e = r["metrics"].get("test_error")
            print(f"  {r['dataset']:<20} {r['method']:<48} "
                  + ("-" if e is None else f"{100 * e:.2f} %  {r['time_median_s']:.1f} s") + f"  {r.get('notes', '')[:60]}")
    print("\nEqual time (our MP at the peer's fit time)")
    for r in records:
        if r["params"].get("part") == "compare":
            m, p = r["metrics"], r["params"]
            ours = "-" if m["test_error"] is None else f"{100 * m['test_error']:.2f}"
            print(f"  {r['method']:<90} ours {ours} % "
                  f"vs peer {100 * p['peer_error']:.2f} % at {p['peer_time_s']:.1f} s; ours reaches the peer's error "
                  + ("never" if m["time_to_peer_error_s"] is None else f"at {m['time_to_peer_error_s']:.1f} s"))


def plot_curves(records, path, title):
    """Test error against iterations and against solver time; peers as points."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(15, 5))
    for r in records:
        m = r["metrics"]
        if r["role"] != "ours" or "staged_test_error" not in m:
            continue
        label = f"{r['method']}, {r['dataset']}"  # e.g. "mnist fft", "mnist subset 20000"
        e = [100 * v for v in m["staged_test_error"]]
        a1.plot(m["staged_iteration"], e, "-o", ms=2, label=label)
        a2.plot(m["staged_time_s"], e, "-o", ms=2, label=label)
    markers = iter("sD^vP*XX" * 4)
    for r in records:
        if r["role"] == "peer" and r["metrics"].get("test_error") is not None:
            a2.scatter(r["time_median_s"], 100 * r["metrics"]["test_error"], marker=next(markers), s=40,
                       color="black", label=f"{r['method']} (n={r['params'].get('n_train')})")
    for ax in (a1, a2):
        ax.axhline(1.1, color="grey", lw=0.8, ls="--")
        ax.axhline(0.85, color="grey", lw=0.8, ls=":")
        ax.set_yscale("log")
        ax.set_ylabel("test error (%)")
    a1.set_xlabel("iteration (committee member for nystrom)")
    a2.set_xlabel("solver time (s), test evaluation excluded")
    a2.set_xscale("log")
    a2.legend(fontsize="xx-small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(f"{title}: LS-SVM, poly kernel degree 4, C=1e4 (dashed: paper 1.1%, dotted: 0.85% FFT)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv=None):
    return cli_main(run, argv, __doc__.splitlines()[0], parts=PARTS + LONG_PARTS)


if __name__ == "__main__":
    sys.exit(main())
