"""Peak resident memory of the first fit in a fresh process against ``max_memory`` (issue #39).

Each estimator is fitted in its own fresh Python process on normal data of 20000 x 100 (float64;
two classes for classifiers, a noisy linear target for regressors) with its defaults and
``max_memory="200MB"`` (the front door with ``time_budget=20``). The process imports
kernelscale, builds the data, then measures the peak of its resident set (VmHWM reset through
``/proc/self/clear_refs``, plus a sampler) above its level at that moment during ``fit``; a
second fit of a fresh estimator in the same process is measured the same way. Everything the
fit loads for the first time (compiled loops, LLVM, lazily imported modules) counts. Each
transformer is measured on ``fit(X).transform(X)`` with ``n_components=1024`` (a 156 MiB output
at 20000 rows), against the output's size plus the budget.

Goal: the first fit's peak <= ``max_memory`` for every estimator.

Run: ``python -m benchmarks first_fit_memory [--quick]`` (``--quick``: 5000 rows).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from benchmarks.harness import Suite, cli_main, print_table

SUITE = "first-fit-memory"
BUDGET = "200MB"
BUDGET_BYTES = 200 * 10**6
N_COMPONENTS = 1024

CHILD = textwrap.dedent("""
    import json, sys, time, warnings
    warnings.simplefilter("ignore")
    name, kind, n, d, budget, n_components = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:5]), sys.argv[5], int(sys.argv[6])
    import numpy as np
    import kernelscale as ks
    from benchmarks.harness import PeakMemory, _release_free_memory
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, d))
    target = X @ rng.normal(size=d) / np.sqrt(d) + 0.3 * rng.normal(size=n)
    y = (target > 0).astype(np.int64) if kind == "classifier" else target

    def make():
        params = {"max_memory": budget}
        if name.startswith("Auto"):
            params["time_budget"] = 20
        if kind == "transformer":
            params["n_components"] = n_components
        return getattr(ks, name)(**params)

    out = []
    for attempt in range(2):
        est = make()
        _release_free_memory()
        start = time.perf_counter()
        with PeakMemory() as peak:
            result = est.fit(X).transform(X) if kind == "transformer" else est.fit(X, y)
        out.append({"peak_bytes": peak.peak_bytes, "seconds": time.perf_counter() - start,
                    "output_bytes": int(result.nbytes) if kind == "transformer" else 0})
        del result, est
    print(json.dumps(out))
""")


def _child(name, kind, n, d):
    proc = subprocess.run([sys.executable, "-c", CHILD, name, kind, str(n), str(d), BUDGET, str(N_COMPONENTS)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
    first, second = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"first": first, "second": second}


def run(quick=False, out_dir=None):
    from kernelscale.registry import ESTIMATORS

    n, d = (5000 if quick else 20_000), 100
    suite = Suite(SUITE, quick=quick, out_dir=out_dir, paper={
        "source": "issue #39: peak resident memory of the first fit in a fresh process <= max_memory "
                  "(n = 20000, d = 100, max_memory = '200MB'), and every transformer's transform"})
    dataset = f"normal {n}x{d} float64, fresh process"
    failed, refused = [], []
    for entry in ESTIMATORS:
        res = _child(entry.name, entry.kind, n, d)
        if "error" in res:
            suite.add(dataset, entry.name, params={"max_memory": BUDGET}, metrics={"error_message": res["error"]})
            # a refusal before allocating (the exact solver's n x n matrix) keeps the budget
            (refused if "max_memory=" in res["error"] and "too small" in res["error"] else failed).append(entry.name)
            continue
        first, second = res["first"], res["second"]
        limit = BUDGET_BYTES + first["output_bytes"]
        suite.add(dataset, entry.name, params={"max_memory": BUDGET, "kind": entry.kind}, metrics={
            "first_peak_bytes": first["peak_bytes"], "second_peak_bytes": second["peak_bytes"],
            "first_fit_s": first["seconds"], "second_fit_s": second["seconds"],
            "output_bytes": first["output_bytes"], "first_peak_over_limit": first["peak_bytes"] / limit,
            "second_peak_over_limit": second["peak_bytes"] / limit})
        if first["peak_bytes"] > limit:
            failed.append(entry.name)
        print(f"{entry.name:36s} first {first['peak_bytes'] / 2**20:6.0f} MiB ({first['peak_bytes'] / limit:.2f}x) "
              f"second {second['peak_bytes'] / 2**20:6.0f} MiB  fit {first['seconds']:.1f}/{second['seconds']:.1f} s",
              flush=True)
    path = suite.write(plot=False)
    print_table(suite.records)
    print("over the budget or failed:", ", ".join(failed) if failed else "none")
    print("refused before allocating:", ", ".join(refused) if refused else "none")
    return path


def main(argv=None):
    return cli_main(run, argv, __doc__.splitlines()[0])


if __name__ == "__main__":
    sys.exit(main())
