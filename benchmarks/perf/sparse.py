"""scipy.sparse input: kernelscale's sparse path beside its dense path, LIBSVM and LIBLINEAR.

Two sets, each method fitted once and predicting the test rows once, in the same process:

- **adult** in its original sparse form (LIBSVM a9a: 123 one-hot features, 11% nonzeros), CSR
  from the shipped arrays (``scipy.sparse.csr_matrix(X)``, as the data README says), the first
  ``--adult-train`` training rows (default 16000 of 32561, to keep LIBSVM's fit within the run's
  budget) and all 16281 test rows;
- **text**: a synthetic tf-idf matrix, ``--text-train`` + ``--text-test`` documents (default
  20000 + 5000) over a 50000-word vocabulary, 50 word draws a document (about 0.1% nonzeros):
  words from a Zipf background (exponent 1.1) and, with probability 0.3 a draw, from one of two
  classes' 400 topic words; labels flipped with probability 0.05; scikit-learn's
  ``TfidfTransformer`` (l2 rows). scikit-learn's 20 newsgroups needs the network, which this
  machine does not have, hence a synthetic set; 100k x 50k (the issue's example) would take
  LIBSVM alone beyond the run's ten minutes on 2 cores.

Methods: ``SLKLClassifier`` (Gaussian kernel columns: sparse products and row norms) and, on
adult, ``DoublyStochasticClassifier`` (random Fourier features: X W as sparse products, the
compiled nonzero loops), each on the CSR matrix ("sparse") and on its dense copy ("dense",
skipped when the dense copy would not fit ``--dense-limit``: the text set's is 7.5 GiB);
scikit-learn's ``SVC`` (LIBSVM, the same Gaussian kernel: gamma = 1 / (2 sigma^2)) and
``LinearSVC`` (LIBLINEAR), both on the CSR matrix. sigma: sqrt(10) on adult (the doubly
stochastic paper's), the median heuristic of the training rows on text (about 1.4 for l2 rows).

Records: ``time_median_s`` is the fit's time (one run); metrics ``fit_s``, ``predict_s``,
``test_error``; ``ratio_to_peer`` against LIBSVM. Run under the CPU lock:
``flock /tmp/ks/cpu.lock python -m benchmarks sparse [--quick]``; results in
``benchmarks/results/sparse.json``.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import scipy.sparse as sp

from benchmarks.harness import Suite, compare, print_table
from kernelscale import DoublyStochasticClassifier, GaussianKernel, SLKLClassifier, load_dataset
from kernelscale.kernels import median_heuristic

SUITE = "sparse"
VOCABULARY, WORDS_PER_DOC, TOPIC_WORDS, TOPIC_SHARE, FLIP = 50000, 50, 400, 0.3, 0.05


def text_set(n, random_state=0):
    """(X CSR tf-idf (n, VOCABULARY), y in {0, 1}): the synthetic documents of the module docstring."""
    from sklearn.feature_extraction.text import TfidfTransformer

    rng = np.random.default_rng(random_state)
    background = 1.0 / np.arange(1, VOCABULARY + 1) ** 1.1
    background /= background.sum()
    topics = rng.choice(VOCABULARY, size=(2, TOPIC_WORDS), replace=False)
    y = rng.integers(0, 2, size=n)
    words = rng.choice(VOCABULARY, size=(n, WORDS_PER_DOC), p=background)
    topical = rng.random((n, WORDS_PER_DOC)) < TOPIC_SHARE
    words[topical] = topics[np.repeat(y, WORDS_PER_DOC).reshape(n, -1)[topical],
                            rng.integers(0, TOPIC_WORDS, size=int(topical.sum()))]
    counts = sp.csr_matrix((np.ones(words.size), (np.repeat(np.arange(n), WORDS_PER_DOC), words.ravel())),
                           shape=(n, VOCABULARY))
    counts.sum_duplicates()
    X = TfidfTransformer().fit_transform(counts).tocsr()
    flip = rng.random(n) < FLIP
    return X, np.where(flip, 1 - y, y)


def _timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def run_method(suite, dataset, name, make, data, role="ours", params=None, notes=None):
    """Fit ``make()`` on the training rows, predict the test rows; one record."""
    X_train, y_train, X_test, y_test = data
    model, fit_s = _timed(lambda: make().fit(X_train, y_train))
    pred, predict_s = _timed(lambda: model.predict(X_test))
    error = float(np.mean(pred != y_test))
    record = suite.add(dataset, name, role=role, params=params or {}, time_median_s=fit_s, times_s=[fit_s],
                       metrics={"fit_s": fit_s, "predict_s": predict_s, "test_error": error}, notes=notes)
    print(f"{dataset:6s} {name:42s} fit {fit_s:7.2f} s  predict {predict_s:6.2f} s  error {error:.4f}", flush=True)
    return record


def compare_set(suite, dataset, data, sigma, ours, dense_limit):
    """Our methods (sparse, then dense where it fits), LIBSVM and LIBLINEAR on one set."""
    from sklearn.svm import SVC, LinearSVC

    X_train, y_train, X_test, y_test = data
    gamma = 1.0 / (2.0 * sigma**2)
    peers = [
        run_method(suite, dataset, "LIBSVM (sklearn SVC, sparse)", lambda: SVC(C=1.0, gamma=gamma), data, "peer",
                   {"C": 1.0, "gamma": gamma}),
        run_method(suite, dataset, "LIBLINEAR (sklearn LinearSVC, sparse)", lambda: LinearSVC(C=1.0), data, "peer",
                   {"C": 1.0}),
    ]
    dense_bytes = (X_train.shape[0] + X_test.shape[0]) * X_train.shape[1] * 8
    dense = None
    if dense_bytes <= dense_limit:
        dense = (X_train.toarray(), y_train, X_test.toarray(), y_test)
    for label, make, params in ours:
        record = run_method(suite, dataset, f"kernelscale {label} (sparse)", make, data, params=params)
        compare(record, peers[0], ["fit_s", "predict_s", "test_error"])
        if dense is not None:
            record = run_method(suite, dataset, f"kernelscale {label} (dense)", make, dense, params=params)
            compare(record, peers[0], ["fit_s", "predict_s", "test_error"])
        else:
            suite.add(dataset, f"kernelscale {label} (dense)", params=params,
                      notes=f"not run: the dense copy of X would take {dense_bytes / 2**30:.1f} GiB "
                            f"(--dense-limit {dense_limit / 2**30:.1f} GiB)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="4000 adult rows, 4000 + 2000 documents")
    parser.add_argument("--adult-train", type=int, default=16000)
    parser.add_argument("--text-train", type=int, default=20000)
    parser.add_argument("--text-test", type=int, default=5000)
    parser.add_argument("--dense-limit", type=float, default=2.0, help="GiB a dense copy may take (default 2)")
    args = parser.parse_args(argv)
    if args.quick:
        args.adult_train, args.text_train, args.text_test = 4000, 4000, 2000
    suite = Suite(SUITE, quick=args.quick)
    limit = int(args.dense_limit * 2**30)

    adult = load_dataset("adult")
    n = min(args.adult_train, adult["X_train"].shape[0])
    data = (sp.csr_matrix(adult["X_train"][:n], dtype=np.float64), adult["y_train"][:n],
            sp.csr_matrix(adult["X_test"], dtype=np.float64), adult["y_test"])
    sigma = math.sqrt(10.0)
    compare_set(suite, "adult", data, sigma, [
        ("SLKLClassifier(M=300)", lambda: SLKLClassifier(GaussianKernel(sigma=sigma), n_components=300,
                                                         random_state=0), {"sigma": sigma, "n_components": 300}),
        ("DoublyStochasticClassifier(hinge, 64 iterations)",
         lambda: DoublyStochasticClassifier(GaussianKernel(sigma=sigma), loss="hinge", n_iter=64, random_state=0),
         {"sigma": sigma, "n_iter": 64}),
    ], limit)

    X, y = text_set(args.text_train + args.text_test)
    data = (X[: args.text_train], y[: args.text_train], X[args.text_train :], y[args.text_train :])
    sigma = median_heuristic(data[0], random_state=0)
    print(f"text: {X.shape[0]} x {X.shape[1]}, {X.nnz / (X.shape[0] * X.shape[1]):.4%} nonzeros, "
          f"median sigma {sigma:.3f}", flush=True)
    compare_set(suite, "text", data, sigma, [
        ("SLKLClassifier(M=300)", lambda: SLKLClassifier(GaussianKernel(sigma=sigma), n_components=300,
                                                         random_state=0), {"sigma": sigma, "n_components": 300}),
    ], limit)
    suite.paper = {"text_set": {"n_train": args.text_train, "n_test": args.text_test, "vocabulary": VOCABULARY,
                                "density": X.nnz / (X.shape[0] * X.shape[1])},
                   "adult_train_rows": n}
    print_table(suite.records)
    print(f"wrote {suite.write(plot=False)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
