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

A third part, **every**: every estimator and transformer of the registry at its defaults
(``random_state=0``; the front door with ``time_budget=5``) on a 3000 + 1000-row CSR set of 100
columns at 5% nonzeros and on its dense copy: fit and predict seconds and the largest difference
of the two inputs' outputs (``max_relative_difference``).

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


def text_set(n, random_state=0, words_per_doc=WORDS_PER_DOC):
    """(X CSR tf-idf (n, VOCABULARY), y in {0, 1}): the synthetic documents of the module docstring,
    ``words_per_doc`` word draws a document."""
    from sklearn.feature_extraction.text import TfidfTransformer

    rng = np.random.default_rng(random_state)
    background = 1.0 / np.arange(1, VOCABULARY + 1) ** 1.1
    background /= background.sum()
    topics = rng.choice(VOCABULARY, size=(2, TOPIC_WORDS), replace=False)
    y = rng.integers(0, 2, size=n)
    words = rng.choice(VOCABULARY, size=(n, words_per_doc), p=background)
    topical = rng.random((n, words_per_doc)) < TOPIC_SHARE
    words[topical] = topics[np.repeat(y, words_per_doc).reshape(n, -1)[topical],
                            rng.integers(0, TOPIC_WORDS, size=int(topical.sum()))]
    counts = sp.csr_matrix((np.ones(words.size), (np.repeat(np.arange(n), words_per_doc), words.ravel())),
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


#: the wide set: 100000 + 10000 documents of 60 word draws (0.1% nonzeros: about 50 distinct words)
WIDE_TRAIN, WIDE_TEST, WIDE_WORDS, WIDE_LIBSVM_ROWS = 100000, 10000, 60, 25000
PARTS = ("adult", "text", "wide", "every")
#: the "every" part: rows, columns and density of its one-hot-like set (and its test rows)
EVERY_N, EVERY_TEST, EVERY_D, EVERY_DENSITY = 3000, 1000, 100, 0.05


def _every_set(random_state=0):
    """A sparse set on which every estimator's defaults run in seconds: EVERY_N + EVERY_TEST rows
    of EVERY_D columns at EVERY_DENSITY, standard normal nonzeros, a noisy linear target (its sign
    for the classifiers)."""
    rng = np.random.default_rng(random_state)
    n = EVERY_N + EVERY_TEST
    X = sp.random(n, EVERY_D, density=EVERY_DENSITY, format="csr", random_state=random_state, dtype=np.float64)
    X.data = rng.standard_normal(X.nnz)
    target = X @ rng.standard_normal(EVERY_D) + 0.3 * rng.standard_normal(n)
    return X, target


def every_estimator(suite):
    """Every registry entry at its defaults (random_state=0; the front door with time_budget=5) on
    the CSR matrix and on its dense copy: fit and predict seconds of each, and the largest
    difference of their outputs (decision function, probabilities or transform, else predictions)
    relative to the largest dense output."""
    from kernelscale.registry import ESTIMATORS

    X, target = _every_set()
    dense = X.toarray()
    for entry in ESTIMATORS:
        params = {"random_state": 0} if "random_state" in entry.cls().get_params() else {}
        if entry.name.startswith("Auto"):
            params["time_budget"] = 5
        y = (target > 0).astype(np.int64) if entry.kind == "classifier" else target
        row = {}
        for form, data in (("sparse", X), ("dense", dense)):
            est = entry.cls(**params)
            Xtr, Xte = data[:EVERY_N], data[EVERY_N:]
            try:
                _, row[f"fit_s_{form}"] = _timed(lambda: est.fit(Xtr) if entry.kind == "transformer" else est.fit(Xtr, y[:EVERY_N]))
            except ValueError as err:  # a refusal (the exact solver's budget) is a result too
                row[f"error_{form}"] = str(err)[:200]
                continue
            method = next(m for m in ("decision_function", "predict_proba", "transform", "predict") if hasattr(est, m))
            row[form], row[f"predict_s_{form}"] = _timed(lambda: np.asarray(getattr(est, method)(Xte), dtype=np.float64))
            if entry.kind == "classifier":
                row[f"test_error_{form}"] = float(np.mean(est.predict(Xte) != y[EVERY_N:]))
        metrics = {k: v for k, v in row.items() if k not in ("sparse", "dense")}
        if "sparse" in row and "dense" in row:
            scale = max(1.0, float(np.max(np.abs(row["dense"]))))
            metrics["max_relative_difference"] = float(np.max(np.abs(row["sparse"] - row["dense"]))) / scale
        suite.add("every", entry.name, params=params, time_median_s=metrics.get("fit_s_sparse"),
                  times_s=[metrics["fit_s_sparse"]] if "fit_s_sparse" in metrics else [], metrics=metrics)
        print(f"every  {entry.name:36s} " + "  ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}"
                                                      for k, v in metrics.items()), flush=True)


def wide_set(suite, args):
    """The issue's 100k x 50k at 0.1% nonzeros: our sparse methods on every training row within
    ``--max-memory``, LIBLINEAR on every row, LIBSVM on the first ``--wide-libsvm-rows`` (its fit
    grows with the square of the rows: 118 s for 20000 on 2 cores), all predicting the same test
    rows; with ``--wide-dask``, SLKL on a 2-worker LocalCluster fed the training rows as a dask
    array of CSR row chunks."""
    from sklearn.svm import SVC, LinearSVC

    from kernelscale import RegularizedKernelClassifier, StagewiseClassifier

    X, y = text_set(args.wide_train + WIDE_TEST, random_state=1, words_per_doc=WIDE_WORDS)
    data = (X[: args.wide_train], y[: args.wide_train], X[args.wide_train :], y[args.wide_train :])
    density = X.nnz / (X.shape[0] * X.shape[1])
    sigma = median_heuristic(data[0], random_state=0)
    gamma, m, budget = 1.0 / (2.0 * sigma**2), min(args.wide_libsvm_rows, args.wide_train), args.max_memory
    print(f"wide: {X.shape[0]} x {X.shape[1]}, {density:.4%} nonzeros, median sigma {sigma:.3f}", flush=True)
    sub = (data[0][:m], data[1][:m], data[2], data[3])
    libsvm = run_method(suite, "wide", f"LIBSVM (sklearn SVC, sparse, first {m} rows)", lambda: SVC(C=1.0, gamma=gamma),
                        sub, "peer", {"C": 1.0, "gamma": gamma, "train_rows": m},
                        notes=f"fitted on the first {m} of {args.wide_train} training rows (LIBSVM's fit within ~5 min)")
    peers = [libsvm, run_method(suite, "wide", "LIBLINEAR (sklearn LinearSVC, sparse)", lambda: LinearSVC(C=1.0), data,
                                "peer", {"C": 1.0})]
    kernel = GaussianKernel(sigma=sigma)
    ours = [
        ("SLKLClassifier(M=300)", lambda: SLKLClassifier(kernel, n_components=300, random_state=0, max_memory=budget),
         {"sigma": sigma, "n_components": 300}),
        ("SLKLClassifier(M=1000)", lambda: SLKLClassifier(kernel, n_components=1000, random_state=0,
                                                          max_memory=budget), {"sigma": sigma, "n_components": 1000}),
        ("RegularizedKernelClassifier(linear)", lambda: RegularizedKernelClassifier(kernel="linear", max_memory=budget),
         {"kernel": "linear"}),
        ("StagewiseClassifier(2 stages)", lambda: StagewiseClassifier(kernel, n_stages=2, pca_components=None,
                                                                      random_state=0, max_memory=budget),
         {"sigma": sigma, "n_stages": 2, "pca_components": None}),
        (f"DoublyStochasticClassifier(hinge, {args.wide_dsg_iter} iterations)",
         lambda: DoublyStochasticClassifier(kernel, loss="hinge", n_iter=args.wide_dsg_iter, random_state=0,
                                            max_memory=budget), {"sigma": sigma, "n_iter": args.wide_dsg_iter}),
    ]
    for label, make, params in ours:
        if args.wide_dsg_iter == 0 and label.startswith("Doubly"):
            continue
        record = run_method(suite, "wide", f"kernelscale {label} (sparse)", make, data, params=params)
        compare(record, peers[0], ["fit_s", "predict_s", "test_error"])
    if args.wide_dask:
        try:
            record = _dask_slkl(suite, data, kernel, sigma, budget)
            compare(record, libsvm, ["fit_s", "predict_s", "test_error"])
        except Exception as err:  # recorded, not fatal: the other rows of the run are kept
            suite.add("wide", "kernelscale SLKLClassifier(M=300) (dask, CSR chunks, 2 workers)",
                      notes=f"failed: {type(err).__name__}: {err}")
            print(f"wide   dask SLKL failed: {err}", flush=True)
    return {"n_train": args.wide_train, "n_test": WIDE_TEST, "vocabulary": VOCABULARY, "density": density,
            "libsvm_rows": m, "max_memory": budget, "sigma": sigma}


def _dask_slkl(suite, data, kernel, sigma, budget):
    """SLKL(M=300) on a 2-worker LocalCluster (one thread each), X a dask array of CSR row chunks
    (10 chunks), predictions over the test rows' CSR chunks."""
    import dask.array as da
    from distributed import Client, LocalCluster

    X_train, y_train, X_test, y_test = data
    rows = -(-X_train.shape[0] // 10)
    # memory_limit=0: no plan within the workers' memory, whose estimate counts a sparse row as d
    # dense values (with 6 GB workers it capped the task budget at 0.8 MiB here); max_memory holds
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit=0, dashboard_address=None,
                      silence_logs=50) as cluster, Client(cluster):
        Xd = da.from_array(X_train, chunks=(rows, X_train.shape[1]), asarray=False).persist()
        yd = da.from_array(y_train, chunks=rows).persist()
        Td = da.from_array(X_test, chunks=(rows, X_test.shape[1]), asarray=False).persist()
        model, fit_s = _timed(lambda: SLKLClassifier(kernel, n_components=300, random_state=0,
                                                     max_memory=budget).fit(Xd, yd))
        pred, predict_s = _timed(lambda: model.predict(Td).compute())
    error = float(np.mean(pred != y_test))
    name = "kernelscale SLKLClassifier(M=300) (dask, CSR chunks, 2 workers)"
    record = suite.add("wide", name, params={"sigma": sigma, "n_components": 300, "row_chunks": 10, "workers": 2},
                       time_median_s=fit_s, times_s=[fit_s],
                       metrics={"fit_s": fit_s, "predict_s": predict_s, "test_error": error},
                       notes="2-worker LocalCluster (no memory_limit) on the same 2 cores; X persisted on the "
                             "workers before the clock")
    print(f"wide   {name:42s} fit {fit_s:7.2f} s  predict {predict_s:6.2f} s  error {error:.4f}", flush=True)
    return record


def _kept(parts, quick):
    """The records and ``paper`` entries of the parts not run now, from the suite's last result."""
    import json

    from benchmarks.harness import RESULTS_DIR

    path = RESULTS_DIR / (f"{SUITE}-quick.json" if quick else f"{SUITE}.json")
    if not path.exists():
        return [], {}
    doc = json.loads(path.read_text())
    records = [r for r in doc["records"] if r["dataset"] not in parts]
    keys = {"adult": ["adult_train_rows"], "text": ["text_set"], "wide": ["wide_set"], "every": ["every_set"]}
    old = doc.get("paper") or {}
    return records, {key: old[key] for part in PARTS if part not in parts for key in keys[part] if key in old}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="4000 adult rows, 4000 + 2000 documents, 10000 wide rows")
    parser.add_argument("--part", action="append", choices=PARTS,
                        help="run only these sets (repeatable; default all), keeping the other sets' records")
    parser.add_argument("--adult-train", type=int, default=16000)
    parser.add_argument("--text-train", type=int, default=20000)
    parser.add_argument("--text-test", type=int, default=5000)
    parser.add_argument("--wide-train", type=int, default=WIDE_TRAIN)
    parser.add_argument("--wide-libsvm-rows", type=int, default=WIDE_LIBSVM_ROWS)
    parser.add_argument("--wide-dsg-iter", type=int, default=16, help="doubly stochastic iterations on wide (0: skip)")
    parser.add_argument("--wide-dask", action="store_true", help="also SLKL on a 2-worker LocalCluster (CSR chunks)")
    parser.add_argument("--max-memory", default="4GB", help="max_memory of our estimators on wide (default 4GB)")
    parser.add_argument("--dense-limit", type=float, default=2.0, help="GiB a dense copy may take (default 2)")
    args = parser.parse_args(argv)
    if args.quick:
        args.adult_train, args.text_train, args.text_test = 4000, 4000, 2000
        args.wide_train, args.wide_libsvm_rows = 10000, 4000
    parts = tuple(args.part or PARTS)
    suite = Suite(SUITE, quick=args.quick)
    kept_records, kept_paper = _kept(parts, args.quick)
    limit = int(args.dense_limit * 2**30)
    paper = {}

    if "adult" in parts:
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
        paper["adult_train_rows"] = n

    if "text" in parts:
        X, y = text_set(args.text_train + args.text_test)
        data = (X[: args.text_train], y[: args.text_train], X[args.text_train :], y[args.text_train :])
        sigma = median_heuristic(data[0], random_state=0)
        print(f"text: {X.shape[0]} x {X.shape[1]}, {X.nnz / (X.shape[0] * X.shape[1]):.4%} nonzeros, "
              f"median sigma {sigma:.3f}", flush=True)
        compare_set(suite, "text", data, sigma, [
            ("SLKLClassifier(M=300)", lambda: SLKLClassifier(GaussianKernel(sigma=sigma), n_components=300,
                                                             random_state=0), {"sigma": sigma, "n_components": 300}),
        ], limit)
        paper["text_set"] = {"n_train": args.text_train, "n_test": args.text_test, "vocabulary": VOCABULARY,
                             "density": X.nnz / (X.shape[0] * X.shape[1])}

    if "wide" in parts:
        paper["wide_set"] = wide_set(suite, args)

    if "every" in parts:
        every_estimator(suite)
        paper["every_set"] = {"n_train": EVERY_N, "n_test": EVERY_TEST, "d": EVERY_D, "density": EVERY_DENSITY}

    order = {p: i for i, p in enumerate(PARTS)}
    suite.records = sorted(kept_records + suite.records, key=lambda r: order.get(r["dataset"], len(PARTS)))
    suite.paper = {**kept_paper, **paper}
    print_table(suite.records)
    print(f"wrote {suite.write(plot=False)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
