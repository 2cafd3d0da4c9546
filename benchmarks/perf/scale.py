"""Scaling out: fits on virtual MNIST digits on a dask LocalCluster, n from 60k to millions (issue #15).

For each n in ``--sizes`` (default 60k, 250k, 1M, 4M) and each method, a fresh
``LocalCluster(n_workers=W, threads_per_worker=1, processes=True)`` (W = 2, plus W = 1 at
``--speedup-n`` for the parallel speed-up; each worker with a dask ``memory_limit`` of
``WORKER_MEMORY``) fits the estimator (``random_state=0``) on the first n examples of
:class:`kernelscale.VirtualDigits` over the 60000 MNIST training digits (float32 pixels in
0..255, row chunks of ``CHUNK``, every example deformed: ``include_originals=False``, so that an
example costs the same to generate at every n): ``VirtualDigits.to_dask`` makes every chunk a
task that regenerates it from (seed, chunk) on the worker that needs it, so the n examples never
exist on disk or in one process. Above 60% of its memory limit a worker spills the state it
keeps (the per-row arrays a fit persists) to its local disk: that bounds its memory whatever n.

``stagewise`` keeps the former default of 8 stages (``n_stages=8``); ``stagewise-auto`` (``--part
stagewise-auto``) is ``StagewiseClassifier()`` at today's defaults, whose stages grow with n.
``stagewise-growing`` (not in the default run: ``--part stagewise-growing``) answers whether
more virtual examples keep helping when the model may grow with them: 8 * sqrt(n / 60000)
stages (its fit time grows like n^1.5, so its slope is not the goal's). ``auto`` (also
``--part auto``): ``AutoKernelClassifier`` with a time budget proportional to n
(``AUTO_SECONDS_PER_EXAMPLE``, 60 s at 60k), fitted in this process on the gathered examples.

The doubly stochastic classifier runs sgd with ``batch_size = ceil(2n / 256)`` (two passes over the n
examples in its default 256 iterations; its "auto" batch of 256 rows would see 65536 examples
whatever n is); everything else is at its defaults. Recorded per fit:

- ``fit_s``: wall seconds of ``fit`` (the examples are generated inside it, by the workers);
- ``test_error`` on the real MNIST test set (10000 digits, predicted in this process);
- ``predict_s``: wall seconds to predict the n virtual training examples on the workers (a dask
  array of labels; only the count of mistakes comes back), and ``train_error`` from it (the
  doubly stochastic model, 51200 features, predicts the first 10000 only: a 60000-row
  predict costs as much as its fit);
- ``worker_peak_rss_bytes``: the largest peak resident set (VmHWM) of the workers, read from each
  worker process after the fit and predict (fresh processes per fit, so the peak is this fit's),
  and ``client_peak_rss_bytes`` for this process. Goal: flat in n.

The log-log slope of ``fit_s`` against n (least squares over the W = 2 fits) is recorded per
method (goal: <= 1.05), also without the smallest n; so is the speed-up from 1 to 2 workers.

Runs: session 12's (2026-11-23, the first 60000 examples undeformed, workers at 8 GiB, scipy's
resampling): stagewise 12.5 / 85 / 351 / 1418 s at 60k / 250k / 1M / 4M (slope 1.12: the
undeformed 60000 cost nothing to generate), the doubly stochastic classifier 29 / 116 / 547 /
2590 s (slope 1.07), worker peaks up to 1.45 and 2.09 GB. Session 13's (2026-11-27): the
settings above and ``VirtualDigits``' compiled resampling (a chunk 3x faster); results/scale.json.

Resumable: every finished fit is written to ``--state-dir`` (default
``~/.cache/kernelscale/bench-scale``) with its ``SETTINGS``, and a later run skips the fits
already there with the same settings (``--fresh`` starts over), so the sizes can be run in several parts (``--sizes``).

Fits too long for one sitting (the 10M point of issue #40) run in parts: ``--fit-parts P`` splits
each missing fit into P warm-started fits (stages or iterations added in equal shares, the sizes
resolved as for one fit), saving the model and the seconds so far after each part next to the
state; ``--max-parts K`` stops after K parts, and the next run continues from the saved model.
The recorded ``fit_s`` is the sum of the parts' fits (each warm start also replays the stages or
iterations it continues): a stagewise part on dask keeps no per-row state from the part before, so
part p replays p - 1 stages (10M digits, workers of 11 GiB: parts 1-3 took 780, 338 and 486 s),
and P parts cost about P / 2 stage passes more than one fit. Time a scaling point in one fit.
Run: ``python -m benchmarks scale [--sizes 60000,250000] [--part stagewise] [--fresh]
[--fit-parts P [--max-parts K]]``
(``--quick``: n = 20k and 40k from 6000 base digits, 1000 test digits).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.harness import RESULTS_DIR, PeakMemory, Suite, print_table

SUITE = "scale"
SIZES = (60_000, 250_000, 1_000_000, 4_000_000)
CHUNK = 10_000
SEED = 0
#: each worker's dask memory limit: above 60% of it dask spills the persisted per-row state to
#: local disk, so a worker's memory is bounded by it whatever n (its kernelscale budget is half of it)
WORKER_MEMORY = 3 * 2**29
#: every example is a deformed one, the first n_base too: the cost of an example is the same at
#: every n (with the undeformed originals first, the smallest n costs nothing to generate)
INCLUDE_ORIGINALS = False
DEFAULT_STATE_DIR = Path.home() / ".cache" / "kernelscale" / "bench-scale"
logger = logging.getLogger("kernelscale.benchmarks.scale")


def _stagewise(n):
    """8 stages whatever n: the default before ``n_stages="auto"`` (the rows of sessions 12-13)."""
    from kernelscale import StagewiseClassifier

    return StagewiseClassifier(n_stages=8, random_state=SEED)


def _stagewise_auto(n):
    """The defaults since ``n_stages="auto"`` (issue #37 item 2): round(8 sqrt(n / 12288)) stages
    within [8, 64] (18 at 60000, 36 at 250000, 64 from about 775000 on)."""
    from kernelscale import StagewiseClassifier

    return StagewiseClassifier(random_state=SEED)


def _dsg(n):
    """sgd, two passes over the n examples in its default 256 iterations: the "auto" batch (256
    rows) would see 65536 examples whatever n is. (Session 13's run; the "auto" solver, chosen
    after it, is the preconditioned one from 2048 samples: MNIST 3.2% validation error vs 10.8%.)"""
    from kernelscale import DoublyStochasticClassifier

    return DoublyStochasticClassifier(solver="sgd", batch_size=-(-2 * n // 256), random_state=SEED)


def _stagewise_growing(n):
    """The model grows with the data: 8 stages at 60000 examples, twice as many per 4x n (the
    defaults keep 8 stages of 1024 features whatever n, so their error cannot keep falling)."""
    from kernelscale import StagewiseClassifier

    return StagewiseClassifier(n_stages=max(8, round(8 * (n / 60_000) ** 0.5)), random_state=SEED)


#: the front door's time budget per example (60 s at 60000, 1000 s at 1M)
AUTO_SECONDS_PER_EXAMPLE = 1e-3


def _auto(n):
    """The front door with a budget proportional to n (issue #37, "growth with data"): the dask
    array is gathered into this process for the fit (the workers generate the examples)."""
    from kernelscale import AutoKernelClassifier

    return AutoKernelClassifier(time_budget=AUTO_SECONDS_PER_EXAMPLE * n, random_state=SEED)


#: method: (label, estimator for n examples, most examples predicted on the workers)
METHODS = {"stagewise": ("StagewiseClassifier(n_stages=8)", _stagewise, None),
           "stagewise-auto": ("StagewiseClassifier()", _stagewise_auto, None),
           "stagewise-growing": ("StagewiseClassifier(n_stages=8*sqrt(n/60000))", _stagewise_growing, None),
           "dsg": ("DoublyStochasticClassifier(solver='sgd', batch_size=ceil(2n/256))", _dsg, 10_000),
           "auto": ("AutoKernelClassifier(time_budget=n/1000 s)", _auto, 10_000)}
#: not in the default run (``--part NAME``)
OPTIONAL = ("stagewise-growing", "auto", "stagewise-auto")


def _peak_rss():
    """VmHWM of the calling process (a worker, via ``client.run``)."""
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmHWM:"))


#: the settings a finished fit in the state was run with; fits run with others are run again
SETTINGS = {"include_originals": INCLUDE_ORIGINALS, "worker_memory_limit": WORKER_MEMORY}


def fit_once(method, n, workers, data, chunk=CHUNK, parts=1, checkpoint=None, max_parts=None):
    """One fit on a fresh LocalCluster of ``workers`` processes; the record's metrics.

    ``parts`` > 1: the fit runs as that many warm-started fits, each adding its share of the
    stages or iterations (:func:`_split`), and the model and the seconds so far are saved to
    ``checkpoint`` (a path without suffix: ``.npz`` model, ``.json`` progress) after each, so a
    later call continues where an earlier one stopped. ``max_parts``: run at most that many parts
    in this call; returns None while parts remain."""
    from distributed import Client, LocalCluster

    from kernelscale import VirtualDigits

    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # _peak_rss runs on the workers
    X_base, y_base, X_test, y_test = data
    stream = VirtualDigits(X_base, y_base, n_examples=n, chunk_size=chunk, seed=SEED, dtype=np.float32,
                           include_originals=INCLUDE_ORIGINALS)
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      memory_limit=SETTINGS["worker_memory_limit"],
                      dashboard_address=None, silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
        X, y = stream.to_dask()
        _, make, cap = METHODS[method]
        est = make(n)
        with PeakMemory() as mem:
            if parts > 1:
                est, progress = _fit_in_parts(est, X, y, n, parts, Path(checkpoint), client, max_parts)
                if progress["parts_done"] < parts:
                    return None
                fit_s, earlier_peak = progress["fit_s"], progress["worker_peak_rss_bytes"]
            else:
                start = time.perf_counter()
                est.fit(X, y)
                fit_s, earlier_peak = time.perf_counter() - start, 0
            rows = n if cap is None else min(n, cap)
            start = time.perf_counter()
            wrong = int((est.predict(X[:rows]) != y[:rows]).sum().compute())
            predict_s = time.perf_counter() - start
        worker_peaks = client.run(_peak_rss)
    test_error = float(np.mean(est.predict(X_test) != y_test))
    return {
        "fit_s": fit_s, "predict_s": predict_s, "predict_rows": rows, "test_error": test_error,
        "train_error": wrong / rows,
        "worker_peak_rss_bytes": max(earlier_peak, *worker_peaks.values()), "client_peak_rss_bytes": mem.peak_rss,
        **({"parts": parts} if parts > 1 else {}),
    }


def _split(est, n):
    """(parameter, total, fixed): the parameter that counts a fit's stages or iterations, its
    total on n examples, and the sizes to pass explicitly so that every part resolves them as
    one fit on n examples would (an explicit ``n_iter`` changes the doubly stochastic "auto"
    block)."""
    if hasattr(est, "n_stages"):
        from kernelscale.least_squares.stagewise import _auto_n_stages

        return "n_stages", _auto_n_stages(n) if est.n_stages == "auto" else int(est.n_stages), {}
    if hasattr(est, "n_iter"):
        from kernelscale.doubly_stochastic.defaults import dsg_auto_sizes

        n_iter, batch, block = dsg_auto_sizes(n, est._solver(n), est.batch_size, est.block_size)
        total = n_iter if est.n_iter == "auto" else int(est.n_iter)
        return "n_iter", total, {"batch_size": batch, "block_size": block}
    raise ValueError(f"{type(est).__name__} has no stages or iterations to fit in parts; use --parts 1.")


def _fit_in_parts(est, X, y, n, parts, checkpoint, client, max_parts=None):
    """:func:`fit_once`'s fit in ``parts`` warm-started parts, resumed from ``checkpoint``.
    Returns (estimator, progress: parts_done, fit_s summed over the parts, worker peak)."""
    import kernelscale as ks

    name, total, fixed = _split(est, n)
    model_path, progress_path = checkpoint.with_suffix(".npz"), checkpoint.with_suffix(".json")
    progress = {"parts_done": 0, "fit_s": 0.0, "worker_peak_rss_bytes": 0}
    if progress_path.exists():
        progress = json.loads(progress_path.read_text())
        est = ks.load(model_path)
        logger.info("resuming after part %d of %d (%.0f s so far)", progress["parts_done"], parts, progress["fit_s"])
    stop = parts if max_parts is None else min(parts, progress["parts_done"] + max_parts)
    for part in range(progress["parts_done"] + 1, stop + 1):
        est.set_params(warm_start=True, **fixed, **{name: -(-total * part // parts)})
        start = time.perf_counter()
        est.fit(X, y)
        progress["fit_s"] += time.perf_counter() - start
        progress["worker_peak_rss_bytes"] = max(progress["worker_peak_rss_bytes"], *client.run(_peak_rss).values())
        progress["parts_done"] = part
        checkpoint.parent.mkdir(parents=True, exist_ok=True)
        ks.save(est, model_path)
        progress_path.write_text(json.dumps(progress))
        logger.info("part %d of %d: %d %s, %.0f s so far", part, parts, getattr(est, name), name, progress["fit_s"])
    return est, progress


def _slope(points):
    """Least-squares slope of log(time) against log(n)."""
    if len(points) < 2:
        return None
    n, t = np.log(np.array(points, dtype=float)).T
    return float(np.polyfit(n, t, 1)[0])


def _state_path(state_dir, quick):
    return Path(state_dir or DEFAULT_STATE_DIR) / ("quick.json" if quick else "full.json")


def run(quick=False, out_dir=None, *, parts=None, sizes=None, speedup_n=None, state_dir=None, fresh=False,
        data=None, fit_parts=1, max_parts=None):
    """The fits still missing from the state (module docstring), then the suite from all of them.
    ``data`` (X_base, y_base, X_test, y_test) replaces MNIST (tests). ``fit_parts``, ``max_parts``:
    each missing fit in that many resumable parts, at most ``max_parts`` of them in this call
    (:func:`fit_once`); a fit with parts left is not recorded yet."""
    if data is None:
        from kernelscale import load_dataset

        d = load_dataset("mnist")
        data = d.X_train, d.y_train, d.X_test.astype(np.float32), d.y_test
    if quick:
        data = data[0][:6000], data[1][:6000], data[2][:1000], data[3][:1000]
    sizes = tuple(sizes or ((20_000, 40_000) if quick else SIZES))
    speedup_n = speedup_n or sizes[min(1, len(sizes) - 1)]
    methods = list(parts or (m for m in METHODS if m not in OPTIONAL))
    path = _state_path(state_dir, quick)
    done = {} if fresh else json.loads(path.read_text()) if path.exists() else _committed_fits(quick, out_dir)
    for method in methods:
        for n in sizes:
            for workers in ((1, 2) if n == speedup_n else (2,)):
                key = f"{method}/{n}/{workers}"
                if key in done and done[key].get("settings") == SETTINGS:
                    continue
                logger.info("fitting %s on %d virtual digits with %d worker(s)", method, n, workers)
                extra = {} if fit_parts == 1 else dict(parts=fit_parts, max_parts=max_parts,
                                                      checkpoint=path.parent / f"{method}-{n}-{workers}")
                got = fit_once(method, n, workers, data, chunk=CHUNK if not quick else 5000, **extra)
                if got is None:
                    logger.info("%s: parts remain; run again to continue", key)
                    continue
                done[key] = {**got, "settings": SETTINGS}
                logger.info("%s: %s", key, done[key])
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(done, indent=1))
    return write_suite(done, quick, out_dir)


def _committed_fits(quick, out_dir=None):
    """The state rebuilt from the results file a run wrote (``done`` keyed "method/n/workers"),
    so that a run of other parts or sizes on another machine adds to the committed fits."""
    path = Path(out_dir or RESULTS_DIR) / (f"{SUITE}-quick.json" if quick else f"{SUITE}.json")
    if not path.exists():
        return {}
    methods = {label: method for method, (label, _, _) in METHODS.items()}
    done = {}
    for rec in json.loads(path.read_text())["records"]:
        label = rec["method"].rsplit(" ", 3)[0]
        if label in methods:
            params = rec["params"]
            metrics = {k: v for k, v in rec["metrics"].items()
                       if not k.startswith(("loglog_slope", "speedup"))}
            done[f"{methods[label]}/{params['n']}/{params['workers']}"] = {
                **metrics, "settings": {k: params[k] for k in SETTINGS if k in params}}
    return done


def write_suite(done, quick, out_dir=None):
    """The suite (JSON and log-log plot) from the recorded fits."""
    suite = Suite(SUITE, quick=quick, out_dir=out_dir, paper={
        "source": "issue #15: fit time against n on a 2-worker LocalCluster (goal: log-log slope <= 1.05), "
                  "peak memory per worker flat in n, the speed-up from 1 to 2 workers; "
                  "Dai et al. 2014: more virtual examples keep lowering the test error"})
    summary = {}
    for method, (label, _, _) in METHODS.items():
        rows = sorted((int(k.split("/")[1]), int(k.split("/")[2]), v) for k, v in done.items()
                      if k.split("/")[0] == method)
        if not rows:
            continue
        points = [(n, v["fit_s"]) for n, w, v in rows if w == 2]
        slope, slope_virtual = _slope(points), _slope(points[1:])
        for n, workers, v in rows:
            rec = suite.add("mnist virtual digits (test: the real 10000)", f"{label} {workers} worker(s), n={n}",
                            params={"n": n, "workers": workers, "chunk_rows": CHUNK, "seed": SEED,
                                    **v.get("settings", {})},
                            metrics={k: x for k, x in v.items() if k != "settings"}, time_median_s=v["fit_s"],
                            times_s=[v["fit_s"]],
                            peak_memory_bytes=v["worker_peak_rss_bytes"])
            one = done.get(f"{method}/{n}/1")
            if workers == 2 and one:
                rec["metrics"]["speedup_1_to_2_workers"] = one["fit_s"] / v["fit_s"]
                summary[f"{method} speed-up 1->2 workers at n={n}"] = one["fit_s"] / v["fit_s"]
        if slope is not None:
            suite.records[-1]["metrics"]["loglog_slope_fit_s"] = slope
            summary[f"{method} log-log slope of fit time"] = slope
        if slope_virtual is not None:
            suite.records[-1]["metrics"]["loglog_slope_fit_s_above_smallest_n"] = slope_virtual
            summary[f"{method} log-log slope of fit time above the smallest n"] = slope_virtual
    suite.paper["summary"] = summary
    out = suite.write(plot=False)
    _plot(suite.records, out.with_suffix(".png"))
    print_table(suite.records)
    for k, v in summary.items():
        print(f"{k}: {v:.3f}")
    return out


def _plot(records, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, (ax_t, ax_e, ax_m) = plt.subplots(1, 3, figsize=(13, 4))
    for label in sorted({r["method"].split(" ")[0] for r in records}):
        rows = sorted((r["params"]["n"], r["metrics"]) for r in records
                      if r["method"].startswith(label) and r["params"]["workers"] == 2)
        n = [a for a, _ in rows]
        ax_t.loglog(n, [m["fit_s"] for _, m in rows], "o-", label=f"{label} fit")
        ax_t.loglog(n, [m["predict_s"] for _, m in rows], "s--", label=f"{label} predict")
        ax_e.semilogx(n, [100 * m["test_error"] for _, m in rows], "o-", label=label)
        ax_m.semilogx(n, [m["worker_peak_rss_bytes"] / 2**20 for _, m in rows], "o-", label=label)
    for ax, title in ((ax_t, "seconds (2 workers)"), (ax_e, "MNIST test error (%)"), (ax_m, "peak RSS per worker (MiB)")):
        ax.set_xlabel("virtual examples n")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    ax_m.set_ylim(bottom=0)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out-dir", default=None, help=f"where results go (default {RESULTS_DIR})")
    p.add_argument("--part", action="append", choices=list(METHODS), help="methods to fit (repeatable)")
    p.add_argument("--sizes", default=None, help="comma-separated n (default: 60000,250000,1000000,4000000)")
    p.add_argument("--speedup-n", type=int, default=None, help="n of the 1-worker fit (default: the second size)")
    p.add_argument("--state-dir", default=None, help=f"finished fits (default {DEFAULT_STATE_DIR})")
    p.add_argument("--fresh", action="store_true", help="discard the finished fits and start over")
    p.add_argument("--fit-parts", type=int, default=1,
                   help="fit each missing fit in this many warm-started parts, saved after each (resumable)")
    p.add_argument("--max-parts", type=int, default=None, help="run at most this many parts now, then stop")
    p.add_argument("--worker-memory", default=None,
                   help="each worker's memory_limit (default 1.5 GiB; recorded with the fit, and a fit in "
                        "the state with another limit is run again)")
    a = p.parse_args(argv)
    if a.worker_memory:
        from kernelscale.ops.memory import parse_memory

        SETTINGS["worker_memory_limit"] = parse_memory(a.worker_memory)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("distributed").setLevel(logging.ERROR)
    sizes = tuple(int(s) for s in a.sizes.split(",")) if a.sizes else None
    print(f"results: {run(a.quick, a.out_dir, parts=a.part, sizes=sizes, speedup_n=a.speedup_n, state_dir=a.state_dir, fresh=a.fresh, fit_parts=a.fit_parts, max_parts=a.max_parts)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
