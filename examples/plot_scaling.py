"""The scaling run: fit time against the number of examples

Reads ``benchmarks/results/scale.json`` (virtual MNIST digits, 60k to 4M, fitted on a Dask
LocalCluster of two single-thread workers) and plots fit seconds against n on log-log axes,
with the slope of each curve: a slope near 1 is time linear in n. Nothing is refitted.
"""

import json
import math
import os
import re
from pathlib import Path

import matplotlib.pyplot as plt

out = Path(os.environ.get("KERNELSCALE_EXAMPLE_OUT", "."))
doc = json.loads(Path("benchmarks/results/scale.json").read_text())
curves = {}
for rec in doc["records"]:
    match = re.match(r"(.*) 2 worker\(s\), n=(\d+)", rec["method"])
    if match:
        curves.setdefault(match.group(1), []).append((int(match.group(2)), rec["metrics"]["fit_s"]))
fig, ax = plt.subplots(figsize=(6, 4))
for name, points in curves.items():
    points.sort()
    ns, secs = zip(*points)
    slope = (math.log(secs[-1]) - math.log(secs[0])) / (math.log(ns[-1]) - math.log(ns[0]))
    print(f"{name}: n {ns[0]} -> {ns[-1]}, fit {secs[0]:.0f} s -> {secs[-1]:.0f} s, log-log slope {slope:.2f}")
    ax.plot(ns, secs, "o-", label=f"{name} (slope {slope:.2f})")
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xlabel("training examples n")
ax.set_ylabel("fit time (s)")
ax.set_title(f"scaling on {doc['machine']['cpu_model']}, {doc['machine']['n_cores']} cores")
ax.legend(fontsize=7)
fig.tight_layout()
fig.savefig(out / "scaling.png", dpi=90)
