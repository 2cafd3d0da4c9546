"""Long fuzz campaign over every estimator configuration of tests/estimator_list.py (issue 18).

The suite runs a small budget of the same cases (tests/test_estimator_fuzz.py); this script runs
``--cases`` cases per estimator (case k of estimator i is ``make_case(i, seed + k)``, so a run is
reproducible and a finding is replayed by its seed) and counts per estimator:

- ``refused``: a clear ValueError/TypeError (the rule of tests/estimator_fuzzing.py: raised by a
  validation module, or naming the offending argument);
- ``valid``: every entry point returned finite outputs of the right shape (probability rows on the
  simplex);
- ``deep``: any other exception, grouped by type and innermost frame;
- ``silent``: NaN/inf or wrong outputs, or invalid input that was accepted;
- ``timeout``: a case that ran past ``--time-limit`` seconds.

Run: ``python -m benchmarks fuzz_estimators [--cases 500] [--seed 0] [--only 3 7] [--time-limit 20]``;
needs hypothesis (the ``test`` extra) only for the import of the shared module. Prints the counts
and writes them, with one example case per finding, to ``results/fuzz-estimators.txt``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from benchmarks.harness import RESULTS_DIR, load_test_module

load_test_module("estimator_list")  # tests/estimator_fuzzing.py imports it by name
_fuzzing = load_test_module("estimator_fuzzing")
ESTIMATOR_IDS, ESTIMATORS, make_case, run_case = (
    _fuzzing.ESTIMATOR_IDS, _fuzzing.ESTIMATORS, _fuzzing.make_case, _fuzzing.run_case)

OUTCOMES = ("refused", "valid", "deep", "silent", "timeout")
FINDINGS = ("deep", "silent", "timeout")


def _group(detail):
    """The finding without the case-specific numbers (shapes, sizes, values), to count classes."""
    detail = re.sub(r"np\.\w+\(([^)]*)\)", r"\1", detail)
    detail = re.sub(r"'[^']*'", "'…'", detail)
    return re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "N", detail)[:220]


def fuzz(indices, n_cases, seed, time_limit, log=None):
    """Run the cases; return {estimator id: Counter of outcomes}, {(id, group): [count, example]}."""
    counts, findings = {}, defaultdict(lambda: [0, ""])
    for i in indices:
        counts[ESTIMATOR_IDS[i]] = Counter()
        start = time.perf_counter()
        for k in range(n_cases):
            case = make_case(i, seed + k)
            with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
                outcome, detail = run_case(case, time_limit=time_limit)
            counts[ESTIMATOR_IDS[i]][outcome] += 1
            if outcome in FINDINGS:
                entry = findings[(ESTIMATOR_IDS[i], outcome, _group(detail))]
                entry[0] += 1
                if not entry[1]:
                    entry[1] = f"{detail}\n        case: {case.describe()}"
        if log:
            print(f"{ESTIMATOR_IDS[i]:42s} {dict(counts[ESTIMATOR_IDS[i]])} {time.perf_counter() - start:.1f} s",
                  file=log, flush=True)
    return counts, findings


def report(counts, findings, n_cases, seed, elapsed):
    lines = [f"kernelscale estimator fuzz: {n_cases} cases per estimator configuration, seeds {seed}.."
             f"{seed + n_cases - 1}, {elapsed:.0f} s", ""]
    lines.append(f"{'estimator':42s}" + "".join(f"{o:>9s}" for o in OUTCOMES))
    total = Counter()
    for name, c in counts.items():
        total.update(c)
        lines.append(f"{name:42s}" + "".join(f"{c[o]:9d}" for o in OUTCOMES))
    lines.append(f"{'total':42s}" + "".join(f"{total[o]:9d}" for o in OUTCOMES))
    lines += ["", "findings (deep/silent/timeout), grouped by estimator and kind, with one example:"]
    for (name, outcome, _), (count, example) in sorted(findings.items()):
        lines.append(f"  {name} {outcome} x{count}: {example}")
    if not findings:
        lines.append("  none")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=500, help="cases per estimator configuration")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", type=int, nargs="*", help="indices into ESTIMATORS (default: all)")
    parser.add_argument("--time-limit", type=float, default=20.0, help="seconds per case")
    parser.add_argument("--out", default=str(RESULTS_DIR / "fuzz-estimators.txt"))
    args = parser.parse_args(argv)
    indices = args.only if args.only else range(len(ESTIMATORS))
    start = time.perf_counter()
    counts, findings = fuzz(indices, args.cases, args.seed, args.time_limit, log=sys.stdout)
    text = report(counts, findings, args.cases, args.seed, time.perf_counter() - start)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    n_findings = sum(count for count, _ in findings.values())
    return 1 if n_findings else 0


if __name__ == "__main__":
    sys.exit(main())
