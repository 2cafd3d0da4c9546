"""How the front door's rules were chosen (kernelscale.auto.plan), on training data only.

Every part splits each set's TRAINING part into a fit part and a validation part (20%, seeded,
stratified for classification) and never looks at the test part.

- ``alpha``: the exact route's ridge on n rows from the search's ridge on m rows,
  alpha_n = alpha_m (n / m)^g, for g in {0, 0.25, 0.5, 1}, on the unseen-data sets of the
  robustness suite (benchmarks/studies/common.py); the search stops at SEARCH_MAX_ROWS rows.
  Reports the validation error (RMSE for regression) of each g over the one of g = 0.5.
- ``block``: the stagewise route's features per stage at equal time, on MNIST (50000 fit /
  10000 validation digits of the training set, pixels / 255, float32): blocks of 128, 256, 512
  and 1024 features fitted for ``--seconds`` each, with the search's bandwidth.
- ``multiclass``: the exact route with one-vs-rest only against one-vs-one allowed (the search
  keeps the better of the two by its leave-one-out error), scored one-vs-one for every candidate
  of the first rung or only for the leading ``PAIRWISE_LEADERS`` by their one-vs-rest score, on
  the unseen-data sets with three classes or more: the search's loss, the validation error and
  the fit's seconds.
- ``adult``: the stagewise route's scaling of indicator columns and its rule for the stages kept.
- ``loss``: the stagewise route's stage update on adult (``--seconds`` of budget): calibrated
  least squares against the logistic loss with 5 or 20 steps of Algorithm 1 a stage.
- ``rungs``: the search's ladder of subsample sizes: the first rung of at most 400 or 200 rows,
  the last of at most 1600 or 800, and the ladder that doubles from 400 rows and stops at the
  rows it has (the rule before) against the one that ends at all the search's rows; the
  validation error and the fit's seconds on the unseen-data sets, each with ``--seeds`` search
  permutations.
- ``threshold``: the two-class decision threshold (:func:`kernelscale.auto.plan.decision_threshold`)
  against the threshold 0, on the two-class unseen-data sets (the exact route: leave-one-out
  decision values) and on adult with ``--seconds`` of budget (the stagewise route: held-out
  rows), each with ``--seeds`` seeds.
- ``criterion``: the search's score of a classification candidate: the leave-one-out error rate
  with the squared residual as a tie-breaker, the two added, or the squared residual alone, on
  the classification unseen-data sets and adult, each with ``--seeds`` seeds.
- ``bandwidth``: the final model's bandwidth carried from the search's m rows to n as
  sigma (m / n)^g, g in {0, 0.1, 0.2}: MNIST (60 s), adult and the unseen-data sets larger than
  the search.

    python -m benchmarks auto_rules alpha
    python -m benchmarks auto_rules block [--seconds 40]
    python -m benchmarks auto_rules multiclass
    python -m benchmarks auto_rules adult [--seconds 10] [--seeds 4]
    python -m benchmarks auto_rules loss [--seconds 10] [--seeds 4]
    python -m benchmarks auto_rules rungs [--seeds 3]
    python -m benchmarks auto_rules threshold [--seeds 3] [--seconds 10]
    python -m benchmarks auto_rules criterion [--seeds 3] [--seconds 10]
    python -m benchmarks auto_rules bandwidth [--seeds 3] [--seconds 10]

Writes benchmarks/results/auto-rules.json (one record per part and variant; a later part adds to
the file's other parts).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from benchmarks.harness import RESULTS_DIR, Suite, task_error
from benchmarks.studies.common import DATASETS, SEED, make_dataset

GROWTHS = (0.0, 0.25, 0.5, 1.0)
BLOCKS = (128, 256, 512, 1024)
LOGISTIC_INNER_ITER = (5, 20)


def _validation_split(X, y, task):
    from sklearn.model_selection import train_test_split

    strat = y if task == "classification" else None
    return train_test_split(X, y, test_size=0.2, random_state=SEED, stratify=strat)



def part_alpha(suite):
    import kernelscale as ks
    from kernelscale.auto import plan

    for name in DATASETS:
        data = make_dataset(name)
        X, Xv, y, yv = _validation_split(data.X_train, data.y_train, data.task)
        cls = ks.AutoKernelRegressor if data.task == "regression" else ks.AutoKernelClassifier
        errors = {}
        for g in GROWTHS:
            plan.ALPHA_GROWTH = g
            model = cls(random_state=0).fit(X, y)
            errors[g] = task_error(data.task, model.predict(Xv), yv)
        plan.ALPHA_GROWTH = 0.5
        base = errors[0.5]
        for g, e in errors.items():
            ratio = e / base if base > 0 else 1.0
            suite.add(name, f"alpha growth {g}", params={"part": "alpha", "growth": g, "n": int(X.shape[0])},
                      metrics={"validation_error": e, "ratio_to_0.5": ratio})
        print(f"{name:32s} " + " ".join(f"g={g}: {e:.4g}" for g, e in errors.items()), flush=True)


def part_block(suite, seconds):
    import kernelscale as ks

    mnist = ks.load_dataset("mnist")
    X = (mnist.X_train / 255.0).astype(np.float32)
    X, Xv, y, yv = _validation_split(X, mnist.y_train, "classification")
    sigma = float(ks.AutoKernelClassifier(time_budget=20, random_state=0).fit(X[:4000], y[:4000]).best_params_["sigma"])
    for block in BLOCKS:
        start = time.perf_counter()
        model = ks.StagewiseClassifier(ks.GaussianKernel(sigma), block_size=block, n_stages=100_000,
                                       update="calibrated", random_state=0,
                                       callback=lambda info: time.perf_counter() - start > seconds).fit(X, y)
        fit_s = time.perf_counter() - start
        error = task_error("classification", model.predict(Xv), yv)
        suite.add("mnist (train split)", f"stagewise block {block}",
                  params={"part": "block", "block": block, "seconds": seconds, "sigma": sigma},
                  metrics={"validation_error": error, "stages": int(model.n_iter_)}, time_median_s=fit_s,
                  times_s=[fit_s])
        print(f"block {block:5d}: {model.n_iter_} stages in {fit_s:.1f} s, validation error {error:.4f}", flush=True)


def part_multiclass(suite):
    import kernelscale as ks
    from kernelscale.auto import search

    allowed, leading = search.PAIRWISE_MAX_CLASSES, search.PAIRWISE_LEADERS
    for name, (task, *_rest) in DATASETS.items():
        data = make_dataset(name)
        if task != "classification" or np.unique(data.y_train).size < 3:
            continue
        X, Xv, y, yv = _validation_split(data.X_train, data.y_train, task)
        line = []
        for label, most, leaders in (("one-vs-rest only", 2, leading),
                                     ("one-vs-one for every candidate", allowed, 1.0),
                                     ("one-vs-one for the leaders", allowed, leading)):
            search.PAIRWISE_MAX_CLASSES, search.PAIRWISE_LEADERS = most, leaders
            try:
                start = time.perf_counter()
                model = ks.AutoKernelClassifier(random_state=0).fit(X, y)
                fit_s = time.perf_counter() - start
            finally:
                search.PAIRWISE_MAX_CLASSES, search.PAIRWISE_LEADERS = allowed, leading
            error = task_error(task, model.predict(Xv), yv)
            chosen = model.best_params_["multiclass"]
            suite.add(name, label, params={"part": "multiclass", "n": int(X.shape[0]), "chosen": chosen},
                      metrics={"validation_error": error, "search_loss": float(model.best_score_)},
                      time_median_s=fit_s, times_s=[fit_s])
            line.append(f"{label}: loss {model.best_score_:.4f}, validation error {error:.4f} ({chosen}, {fit_s:.1f} s)")
        print(f"{name:24s} " + " | ".join(line), flush=True)


def _unpaired_stages_to_keep(losses, best_rows, last_rows):
    """The stage rule before the paired one: the best stage only if it beats the last by two
    standard errors of the last's error rate on its own."""
    if not len(losses):
        return 0
    last, best, n = losses[-1], int(np.argmin(losses)), len(last_rows)
    noise = np.sqrt(max(last * (1 - last), 1.0 / n) / n)
    return best + 1 if losses[best] < last - 2 * noise else len(losses)


def _adult_variants(suite, part, seconds, seeds, variants):
    """The front door with ``seconds`` of budget on adult's validation split, ``seeds`` fits per
    variant: ``variants`` maps a label to the (object, attribute, value) settings that make it,
    put back after each fit."""
    import kernelscale as ks

    adult = ks.load_dataset("adult")
    X, Xv, y, yv = _validation_split(adult.X_train, adult.y_train, "classification")
    for label, settings in variants.items():
        errors = []
        for seed in range(seeds):
            saved = [(obj, name, getattr(obj, name)) for obj, name, _ in settings]
            for obj, name, value in settings:
                setattr(obj, name, value)
            try:
                start = time.perf_counter()
                model = ks.AutoKernelClassifier(time_budget=seconds, random_state=seed).fit(X, y)
                fit_s = time.perf_counter() - start
            finally:
                for obj, name, value in saved:
                    setattr(obj, name, value)
            errors.append(task_error("classification", model.predict(Xv), yv))
            chosen = model.best_params_
            suite.add("adult (train split)", label,
                      params={"part": part, "seed": seed, "time_budget": seconds,
                              **{k: chosen[k] for k in ("scaling", "kernel", "sigma", "n_stages")}},
                      metrics={"validation_error": errors[-1]}, time_median_s=fit_s, times_s=[fit_s])
            print(f"{label}: seed {seed} {chosen['scaling']} {chosen['kernel']} sigma={chosen['sigma']:.3g} "
                  f"stages {chosen['n_stages']}: validation error {errors[-1]:.4f} ({fit_s:.1f} s)", flush=True)
        print(f"{label}: mean {np.mean(errors):.4f}", flush=True)


def part_adult(suite, seconds, seeds):
    from kernelscale.auto import plan, search

    def rules(indicators, stages):
        return [(search, "indicator_columns", indicators), (plan, "stages_to_keep", stages)]

    _adult_variants(suite, "adult", seconds, seeds, {
        "(a) all columns standardised, unpaired stage rule": rules(lambda Z: np.zeros(Z.shape[1], bool),
                                                                    _unpaired_stages_to_keep),
        "(b) indicator columns kept": rules(search.indicator_columns, _unpaired_stages_to_keep),
        "(c) indicators kept, paired stage rule": rules(search.indicator_columns, plan.stages_to_keep),
    })


def part_loss(suite, seconds, seeds):
    """The stagewise route's stage update on a noisy two-class table: calibrated least squares
    (the rule) against the multinomial logistic loss (``update="softmax"``, ``inner_iter``
    Algorithm 1 steps a stage), on adult's validation split with ``seconds`` of budget."""
    from kernelscale.auto.estimators import AutoKernelClassifier

    rule = AutoKernelClassifier._stagewise_class
    variants = {"calibrated least squares": [(AutoKernelClassifier, "_stagewise_class", rule)]}
    for inner in LOGISTIC_INNER_ITER:
        logistic = staticmethod(lambda kernel, inner=inner, **kw: rule(kernel, **{**kw, "update": "softmax",
                                                                                  "inner_iter": inner}))
        variants[f"logistic, {inner} steps a stage"] = [(AutoKernelClassifier, "_stagewise_class", logistic)]
    _adult_variants(suite, "loss", seconds, seeds, variants)


def _doubling_from_first(n):
    """The ladder before :func:`kernelscale.auto.search.rung_sizes`: FIRST_RUNG rows, doubling,
    the last rung cut to n."""
    from kernelscale.auto import search

    ladder = [min(n, search.FIRST_RUNG)]
    while ladder[-1] < n:
        ladder.append(min(n, ladder[-1] * search.RUNG_GROWTH))
    return ladder


#: label -> (ladder, first rung's most rows, search's most rows, last rung's most candidates)
RUNG_VARIANTS = {
    "(a) 400 doubling, at most 1600": ("doubling", 400, 1600, None),
    "(b) ending at n, first <= 400, at most 1600": ("ending", 400, 1600, None),
    "(c) ending at n, first <= 200, at most 1600": ("ending", 200, 1600, None),
    "(d) ending at n, first <= 400, at most 800": ("ending", 400, 800, None),
    "(e) ending at n, first <= 200, at most 800": ("ending", 200, 800, None),
    "(f) (b), the last rung only for the winner's ridge": ("ending", 400, 1600, 1),
}


def part_rungs(suite, seeds):
    import kernelscale as ks
    from kernelscale.auto import estimators, search

    saved = search.rung_sizes, search.FIRST_RUNG, estimators.SEARCH_MAX_ROWS, search.LAST_RUNG_CANDIDATES
    for name in DATASETS:
        data = make_dataset(name)
        X, Xv, y, yv = _validation_split(data.X_train, data.y_train, data.task)
        cls = ks.AutoKernelRegressor if data.task == "regression" else ks.AutoKernelClassifier
        line = []
        for label, (ladder, first, most, last) in RUNG_VARIANTS.items():
            errors, seconds = [], []
            for seed in range(seeds):
                search.rung_sizes = _doubling_from_first if ladder == "doubling" else saved[0]
                search.FIRST_RUNG, estimators.SEARCH_MAX_ROWS, search.LAST_RUNG_CANDIDATES = first, most, last
                try:
                    start = time.perf_counter()
                    model = cls(random_state=seed).fit(X, y)
                    seconds.append(time.perf_counter() - start)
                finally:
                    (search.rung_sizes, search.FIRST_RUNG, estimators.SEARCH_MAX_ROWS,
                     search.LAST_RUNG_CANDIDATES) = saved
                errors.append(task_error(data.task, model.predict(Xv), yv))
            suite.add(name, label, params={"part": "rungs", "n": int(X.shape[0]), "ladder": ladder, "first": first,
                                           "most": most, "last_rung_candidates": last, "seeds": seeds},
                      metrics={"validation_error": float(np.mean(errors)), "errors": errors},
                      time_median_s=float(np.median(seconds)), times_s=seconds)
            line.append(f"{label[:3]} {np.mean(errors):.4g} {np.median(seconds):.2f}s")
        print(f"{name:30s} " + " | ".join(line), flush=True)


#: label -> the weight of the squared leave-one-out residual in a classification score
CRITERIA = {"error rate, squared residual to break ties (0.01)": 0.01,
            "error rate + squared residual (1)": 1.0,
            "squared residual only": 1e6}


def part_criterion(suite, seeds, seconds):
    """The search's score of a classification candidate: its leave-one-out error rate with the
    squared residual of the one-hot codes as a tie-breaker (the rule), the two added, or the
    squared residual alone (a proper score: less noisy than an error rate of a few hundred
    rows), on the classification unseen-data sets and on adult with ``seconds`` of budget."""
    import kernelscale as ks
    from kernelscale.auto import search

    rule = search.TIE_BREAK
    sets = [(name, make_dataset(name)) for name, (task, *_rest) in DATASETS.items() if task == "classification"]
    sets = [(name, data.X_train, data.y_train, None) for name, data in sets]
    adult = ks.load_dataset("adult")
    sets.append(("adult", adult.X_train, adult.y_train, seconds))
    for name, X_all, y_all, budget in sets:
        X, Xv, y, yv = _validation_split(X_all, y_all, "classification")
        line = []
        for label, weight in CRITERIA.items():
            errors, sigmas, seconds_ = [], [], []
            for seed in range(seeds):
                search.TIE_BREAK = weight
                try:
                    start = time.perf_counter()
                    model = ks.AutoKernelClassifier(random_state=seed, **({} if budget is None else {"time_budget": budget}))
                    model.fit(X, y)
                    seconds_.append(time.perf_counter() - start)
                finally:
                    search.TIE_BREAK = rule
                errors.append(task_error("classification", model.predict(Xv), yv))
                sigmas.append(float(model.best_params_["sigma"]))
            suite.add(name, label, params={"part": "criterion", "n": int(X.shape[0]), "seeds": seeds, "weight": weight,
                                           "time_budget": budget, "method": model.method_, "sigmas": sigmas},
                      metrics={"validation_error": float(np.mean(errors)), "errors": errors},
                      time_median_s=float(np.median(seconds_)), times_s=seconds_)
            line.append(f"{weight:g}: {np.mean(errors):.4f} (sigma {', '.join(f'{v:.3g}' for v in sigmas)})")
        print(f"{name:32s} " + " | ".join(line), flush=True)


BANDWIDTH_GROWTHS = (0.0, 0.1, 0.2)


def part_bandwidth(suite, seeds, seconds):
    """The final model's bandwidth on n rows from the search's on m rows, sigma (m / n)^g for g in
    BANDWIDTH_GROWTHS (``plan.BANDWIDTH_GROWTH``): the stagewise route on MNIST (60 s, one seed)
    and adult (``seconds``, ``seeds`` seeds), the exact route on the unseen-data sets with more
    rows than the search scores (``seeds`` seeds)."""
    import kernelscale as ks
    from kernelscale.auto import estimators, plan

    rule = plan.BANDWIDTH_GROWTH
    mnist, adult = ks.load_dataset("mnist"), ks.load_dataset("adult")
    sets = [("mnist", (mnist.X_train / 255.0).astype(np.float32), mnist.y_train, "classification", 60.0, 1),
            ("adult", adult.X_train, adult.y_train, "classification", seconds, seeds)]
    for name, (task, *_rest) in DATASETS.items():
        data = make_dataset(name)
        if 0.8 * data.X_train.shape[0] > estimators.SEARCH_MAX_ROWS:
            sets.append((name, data.X_train, data.y_train, task, None, seeds))
    for name, X_all, y_all, task, budget, n_seeds in sets:
        X, Xv, y, yv = _validation_split(X_all, y_all, task)
        cls = ks.AutoKernelRegressor if task == "regression" else ks.AutoKernelClassifier
        line = []
        for g in BANDWIDTH_GROWTHS:
            errors, sigmas = [], []
            for seed in range(n_seeds):
                plan.BANDWIDTH_GROWTH = g
                try:
                    model = cls(random_state=seed, **({} if budget is None else {"time_budget": budget})).fit(X, y)
                finally:
                    plan.BANDWIDTH_GROWTH = rule
                errors.append(task_error(task, model.predict(Xv), yv))
                sigmas.append(float(model.best_params_["sigma"]))
            suite.add(name, f"g = {g:g}", params={"part": "bandwidth", "n": int(X.shape[0]), "seeds": n_seeds,
                                                   "growth": g, "time_budget": budget, "method": model.method_,
                                                   "sigmas": sigmas},
                      metrics={"validation_error": float(np.mean(errors)), "errors": errors})
            line.append(f"g={g:g}: {np.mean(errors):.4g} (sigma {', '.join(f'{v:.3g}' for v in sigmas)})")
        print(f"{name:32s} " + " | ".join(line), flush=True)


def part_threshold(suite, seeds, seconds):
    import kernelscale as ks
    from kernelscale.auto import plan

    chosen = plan.decision_threshold
    sets = [(name, make_dataset(name)) for name, (task, *_rest) in DATASETS.items() if task == "classification"]
    sets = [(name, data.X_train, data.y_train, None) for name, data in sets if np.unique(data.y_train).size == 2]
    adult = ks.load_dataset("adult")
    sets.append(("adult", adult.X_train, adult.y_train, seconds))
    for name, X_all, y_all, budget in sets:
        X, Xv, y, yv = _validation_split(X_all, y_all, "classification")
        line = []
        for label, rule in (("threshold 0", lambda decision, positive: 0.0), ("decision_threshold", chosen)):
            errors, thresholds = [], []
            for seed in range(seeds):
                plan.decision_threshold = rule
                try:
                    model = ks.AutoKernelClassifier(random_state=seed, **({} if budget is None else {"time_budget": budget}))
                    model.fit(X, y)
                finally:
                    plan.decision_threshold = chosen
                errors.append(task_error("classification", model.predict(Xv), yv))
                thresholds.append(float(model.threshold_))
            suite.add(name, label, params={"part": "threshold", "n": int(X.shape[0]), "seeds": seeds,
                                           "time_budget": budget, "method": model.method_, "thresholds": thresholds},
                      metrics={"validation_error": float(np.mean(errors)), "errors": errors})
            line.append(f"{label}: {np.mean(errors):.4f} (thresholds {', '.join(f'{t:.3g}' for t in thresholds)})")
        print(f"{name:32s} " + " | ".join(line), flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=("alpha", "block", "multiclass", "adult", "loss", "rungs", "threshold", "criterion",
                                           "bandwidth"))
    parser.add_argument("--seconds", type=float, default=None,
                        help="block: seconds per block size (40); adult, loss, threshold, criterion: adult's time budget (10)")
    parser.add_argument("--seeds", type=int, default=None, help="adult, loss: fits per variant (4); rungs, threshold, criterion: per variant and set (3)")
    args = parser.parse_args(argv)
    suite = Suite("auto-rules", paper={"note": "training data only; see the module docstring"})
    path = RESULTS_DIR / "auto-rules.json"
    if path.exists():  # keep the other parts' records
        suite.records = [r for r in json.loads(path.read_text())["records"] if r["params"].get("part") != args.part]
    if args.part == "alpha":
        part_alpha(suite)
    elif args.part == "multiclass":
        part_multiclass(suite)
    elif args.part == "adult":
        part_adult(suite, args.seconds or 10.0, args.seeds or 4)
    elif args.part == "loss":
        part_loss(suite, args.seconds or 10.0, args.seeds or 4)
    elif args.part == "rungs":
        part_rungs(suite, args.seeds or 3)
    elif args.part == "threshold":
        part_threshold(suite, args.seeds or 3, args.seconds or 10.0)
    elif args.part == "criterion":
        part_criterion(suite, args.seeds or 3, args.seconds or 10.0)
    elif args.part == "bandwidth":
        part_bandwidth(suite, args.seeds or 3, args.seconds or 10.0)
    else:
        part_block(suite, args.seconds or 40.0)
    suite.write(plot=False)


if __name__ == "__main__":
    main()
