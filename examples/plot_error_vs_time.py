"""Error against fit time: kernelscale beside scikit-learn's SVC and Nystroem + Ridge

On scikit-learn's bundled digits (1797 images of 8x8 pixels, a quarter held out), each method is
fitted once and scored on the held-out images; the figure plots test error against fit seconds.
``KERNELSCALE_EXAMPLE_SIZE=small`` (the docs build) uses shorter budgets.
"""

import os
import time
from pathlib import Path

import matplotlib.pyplot as plt
from sklearn.datasets import load_digits
from sklearn.kernel_approximation import Nystroem
from sklearn.linear_model import RidgeClassifier
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.svm import SVC

import kernelscale as ks

small = os.environ.get("KERNELSCALE_EXAMPLE_SIZE", "full") == "small"
out = Path(os.environ.get("KERNELSCALE_EXAMPLE_OUT", "."))
X, y = load_digits(return_X_y=True)
X = X / 16.0
X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)

methods = {
    "kernelscale AutoKernelClassifier": ks.AutoKernelClassifier(time_budget=3 if small else 20, random_state=0),
    "kernelscale StagewiseClassifier": ks.StagewiseClassifier(random_state=0),
    "kernelscale SLKLClassifier": ks.SLKLClassifier(random_state=0),
    "scikit-learn SVC": SVC(),
    "scikit-learn Nystroem + Ridge": make_pipeline(Nystroem(n_components=500, random_state=0), RidgeClassifier(alpha=1e-3)),
}
fig, ax = plt.subplots(figsize=(6, 4))
for name, model in methods.items():
    start = time.perf_counter()
    model.fit(X_train, y_train)
    seconds = time.perf_counter() - start
    error = 1 - model.score(X_test, y_test)
    print(f"{name:36s} test error {100 * error:5.2f}%   fit {seconds:6.2f} s")
    ax.scatter(seconds, 100 * error, marker="o" if name.startswith("kernelscale") else "s")
    ax.annotate(name, (seconds, 100 * error), fontsize=7, xytext=(4, 4), textcoords="offset points")
ax.set_xscale("log")
ax.set_xlabel("fit time (s)")
ax.set_ylabel("test error (%)")
ax.set_title("digits: error against fit time")
fig.tight_layout()
fig.savefig(out / "error_vs_time.png", dpi=90)
