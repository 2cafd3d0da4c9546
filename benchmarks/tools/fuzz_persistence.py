"""Long fuzz run of ``kernelscale.load`` over mutated model files (issue 19).

The suite runs these cases with a small budget (tests/test_persistence_fuzz.py); this script runs
many more and counts the outcomes: "equal" (a byte-level mutation the zip's CRCs and sizes make
harmless: the original model came back), "loaded" (a rebuilt archive gave another kernelscale
object), "refused" (a ValueError naming the file), and the findings, which must be 0:
"not-equal", "bad-error" (another exception type, or a message without the file name) and
"over-memory" (traced peak above load_memory_bound(file size)).

Run: ``python -m benchmarks fuzz_persistence [--cases 5000] [--seed 0]``; needs hypothesis (the
``test`` extra). Prints the counts and writes them to ``results/fuzz-persistence.txt``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from benchmarks.harness import RESULTS_DIR, load_test_module

_fuzzing = load_test_module("model_fuzzing")  # tests/model_fuzzing.py, shared with the suite
model_bytes, mutations, original_models, run_case, same_model = (
    _fuzzing.model_bytes, _fuzzing.mutations, _fuzzing.original_models, _fuzzing.run_case, _fuzzing.same_model)

FINDINGS = ("not-equal", "bad-error", "over-memory")


def fuzz(n_cases, random_seed, work_dir):
    """Run ``n_cases`` mutations; return (outcome counts, (kind, outcome) counts, findings)."""
    originals = [(m, model_bytes(m, work_dir)) for m in original_models()]
    outcomes, by_kind, findings = Counter(), Counter(), []

    @seed(random_seed)
    @settings(max_examples=n_cases, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def case(data):
        model, raw = data.draw(st.sampled_from(originals))
        mutation = data.draw(mutations(raw))
        outcome, detail = run_case(model, raw, mutation, work_dir, same_model)
        outcomes[outcome] += 1
        by_kind[mutation.name, outcome] += 1
        if outcome in FINDINGS:
            findings.append(detail)

    case()
    return outcomes, by_kind, findings


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "fuzz-persistence.txt")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        outcomes, by_kind, findings = fuzz(args.cases, args.seed, Path(tmp))
    lines = [f"kernelscale.load fuzz: {sum(outcomes.values())} cases, seed {args.seed}, "
             f"{time.perf_counter() - start:.0f} s",
             "outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())),
             f"findings: {sum(outcomes[k] for k in FINDINGS)}", "", "by mutation kind:"]
    for kind in sorted({k for k, _ in by_kind}):
        counts = {o: n for (k, o), n in by_kind.items() if k == kind}
        lines.append(f"  {kind:12s} " + ", ".join(f"{o} {n}" for o, n in sorted(counts.items())))
    lines += ["", *(f"finding: {f}" for f in findings[:20])]
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
