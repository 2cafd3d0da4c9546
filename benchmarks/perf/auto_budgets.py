"""The front door on MNIST and adult as a user calls it: error against the time budget, beside
scikit-learn's SVC (LIBSVM) in the same run.

MNIST: 60000 / 10000 digits, pixels / 255 (float32), nothing else prepared by the caller;
``AutoKernelClassifier(time_budget=B, random_state=0)`` for each B of ``--budgets`` (fit wall
time, test error, predict time), then ``SVC(C=10, gamma=0.02)`` (a tuned LIBSVM) and ``SVC()``
at its defaults unless ``--no-peers``. adult (``--dataset adult``): 32561 / 16281 rows as stored.
Each record is written as soon as it is measured, and ``--resume`` skips the ones the results
file already holds, so a run cut short continues where it stopped.

    python -m benchmarks auto_budgets [--dataset mnist|adult] [--budgets 15 30 60 120 300]
                                      [--no-peers] [--resume]

Writes benchmarks/results/auto-budgets-<dataset>.json and, for two budgets or more, a figure of
the test error against the budget (auto-budgets-<dataset>.png).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from benchmarks.harness import RESULTS_DIR, Suite


def _data(name):
    import kernelscale as ks

    d = ks.load_dataset(name)
    if name == "mnist":
        return (d.X_train / 255.0).astype(np.float32), d.y_train, (d.X_test / 255.0).astype(np.float32), d.y_test
    return d.X_train, d.y_train, d.X_test, d.y_test


def _measure(model, X, y, Xt, yt):
    start = time.perf_counter()
    model.fit(X, y)
    fit_s = time.perf_counter() - start
    start = time.perf_counter()
    error = float(np.mean(model.predict(Xt) != yt))
    return fit_s, time.perf_counter() - start, error


def _plot(suite, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    ours = sorted((r["params"]["time_budget"], r["metrics"]["test_error"]) for r in suite.records
                  if r["role"] == "ours")
    if len(ours) < 2:
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([b for b, _ in ours], [100 * e for _, e in ours], "o-", label="AutoKernelClassifier")
    for r in suite.records:
        if r["role"] == "peer":
            ax.axhline(100 * r["metrics"]["test_error"], ls="--", lw=1, color="gray")
            ax.annotate(f"{r['method']} ({r['metrics']['fit_seconds']:.0f} s fit)",
                        (ours[0][0], 100 * r["metrics"]["test_error"]), fontsize=7, xytext=(0, 3),
                        textcoords="offset points")
    ax.set_xscale("log")
    ax.set_xlabel("time_budget (s)")
    ax.set_ylabel("test error (%)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run(dataset="mnist", budgets=(15, 30, 60, 120, 300), peers=True, resume=False):
    import kernelscale as ks
    from sklearn.svm import SVC

    suite = Suite(f"auto-budgets-{dataset}", paper={"dataset": dataset, "machine": "the project's 2-core machine"})
    path = RESULTS_DIR / f"auto-budgets-{dataset}.json"
    if resume and path.exists():
        suite.records = json.loads(path.read_text())["records"]
    done = {r["method"] for r in suite.records}
    X, y, Xt, yt = _data(dataset)
    jobs = [(f"AutoKernelClassifier(time_budget={b:g})", "ours", {"time_budget": float(b)},
             lambda b=b: ks.AutoKernelClassifier(time_budget=b, random_state=0, verbose=1)) for b in budgets]
    if peers:
        tuned = {"mnist": dict(C=10.0, gamma=0.02), "adult": dict(C=1.0, gamma=0.05)}[dataset]
        jobs += [(f"SVC({', '.join(f'{k}={v:g}' for k, v in tuned.items())})", "peer", tuned, lambda: SVC(**tuned)),
                 ("SVC() defaults", "peer", {}, lambda: SVC())]
    for method, role, params, make in jobs:
        if method in done:
            continue
        model = make()
        fit_s, predict_s, error = _measure(model, X, y, Xt, yt)
        extra = {"chosen": model.best_params_, "method": model.method_} if role == "ours" else {}
        suite.add(dataset, method, role=role, params=dict(params, **extra),
                  metrics={"test_error": error, "fit_seconds": fit_s, "predict_seconds": predict_s},
                  time_median_s=fit_s, times_s=[fit_s])
        print(f"{method}: fit {fit_s:.1f} s, predict {predict_s:.1f} s, test error {100 * error:.2f}%", flush=True)
        suite.write(plot=False)
    _plot(suite, RESULTS_DIR / f"auto-budgets-{dataset}.png")
    return suite.write(plot=False)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=("mnist", "adult"), default="mnist")
    parser.add_argument("--budgets", type=float, nargs="+", default=[15, 30, 60, 120, 300])
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args(argv)
    run(args.dataset, args.budgets, not args.no_peers, args.resume)


if __name__ == "__main__":
    main()
