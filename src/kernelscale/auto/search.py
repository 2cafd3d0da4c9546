"""The front door's hyperparameter search: exact leave-one-out errors of kernel ridge on nested
subsamples, with successive halving over the subsample size.

For one candidate (input scaling, kernel, bandwidth) and a subsample of m rows, one
eigendecomposition K = U diag(s) U^T gives the leave-one-out (LOO) residuals of kernel ridge
regression (K + alpha I) A = Y for every ridge alpha at O(m^2 k) each
(:mod:`kernelscale.ops.loo`):

    H(alpha) = U diag(s / (s + alpha)) U^T,    r_loo = (Y - H Y) / (1 - diag H)

(Y centred; the intercept's own leave-one-out effect, O(1/m), is ignored). Regression scores the
mean squared LOO residual over the variance of Y; classification fits one-hot codes, as every
least-squares classifier of kernelscale does, and scores the LOO error rate, with the squared
residual as a tie-breaker. The bandwidth enters as a multiple of the median heuristic of the
representation, so one grid serves every data set.

One-vs-one (searches for the exact route, 3 to ``PAIRWISE_MAX_CLASSES`` classes): a ridge per
pair of classes on +-1 codes, voting. Leaving a row out changes only the k - 1 pairs of its
class, so the vote's LOO error is exact from one eigendecomposition per pair
(:func:`pairwise_loo_losses`). The first rung scores every candidate one-vs-rest and the leading
``PAIRWISE_LEADERS`` of them (by that score) one-vs-one too, and each goes on with the better; on
many classes one-vs-one least squares makes far fewer errors (benchmarks/studies/least_squares.md,
"One-vs-one in the front door"). A pairwise score costs k (k - 1) / 2 small eigendecompositions,
and the bandwidths that lead one-vs-rest are the ones that lead one-vs-one (docs/auto.md).

Successive halving (Jamieson & Talwalkar 2016; scikit-learn's ``HalvingGridSearchCV``): every
candidate is scored on the first ``m0`` rows of one random permutation, the best quarter goes on
to twice as many rows, and so on until one candidate is left, the last rung (all the search's
rows, :func:`rung_sizes`, for the winner only: LAST_RUNG_CANDIDATES) is scored, or the next rung
would pass the deadline (its cost is predicted from the medians of the rung just scored, scaled
by m^2 and m^3). Subsamples are nested prefixes of the permutation, so a rung sees the rows of
the one before.
"""

from __future__ import annotations

import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ..base.classifier import class_pairs, vote_scores
from ..base.validation import as_rows
from ..kernels import GaussianKernel, LaplacianKernel, median_heuristic
from ..ops.kernel import kernel_matrix
from ..ops.lapack_threads import blas_threads, one_blas_thread
from ..ops.loo import LOO_SQUARES, loo_and_predictions, loo_bytes, loo_residuals, residual_squares
from ..ops.memory import check_fits

__all__ = ["Candidate", "SearchResult", "halving_search", "loo_losses", "pairwise_loo_losses", "rung_sizes",
           "ALPHA_GRID"]

#: ridges tried by every evaluation, relative to the mean eigenvalue of K (quarter decades)
ALPHA_GRID = np.logspace(-9, 1, 41)
#: the ridges of the one-vs-one scores (half decades: each costs a vote over all the pairs)
PAIRWISE_ALPHA_GRID = ALPHA_GRID[::2]
#: the most classes for which the search scores one-vs-one: its cost per candidate grows with the
#: number of pairs (about 0.1 s for the 435 pairs of 30 classes on 400 rows, 0.7 s on 1600)
PAIRWISE_MAX_CLASSES = 32
#: the fraction of the first rung's candidates, the best by their one-vs-rest score, also scored
#: one-vs-one (1: every candidate)
PAIRWISE_LEADERS = 1 / 4
#: bandwidths tried, as multiples of the median heuristic
BANDWIDTH_FACTORS = (0.3, 0.5, 0.8, 1.3, 2.0)
#: kernels tried (the two whose random features every family draws)
KERNELS = {"gaussian": GaussianKernel, "laplacian": LaplacianKernel}
#: bandwidth factors scored past the grid's edge when the best is there
EDGE_STEPS = 3
EDGE_RATIO = 1.6
#: the most rows of the first rung, and the growth of the rungs
FIRST_RUNG = 400
RUNG_GROWTH = 2
#: the fraction of candidates that goes on to the next rung
KEEP = 1 / 4
#: candidates the last rung (all the search's rows) scores, at most (None: KEEP of the rung
#: before): one, the winner, whose ridge the last rung then chooses on all the rows (a quarter
#: less time for the same validation error: benchmarks/studies/auto_rules.py, part rungs)
LAST_RUNG_CANDIDATES = 1
#: smallest first rung worth a search (fewer rows are all used)
MIN_RUNG = 20
#: relative spread of the columns' standard deviations within which standardising is taken as
#: a uniform scaling (:func:`candidates`): distances then change by at most 5%, a tenth of the
#: bandwidth grid's steps (x1.6), and data standardised before a split into training and test
#: parts (column scales within about 1 / sqrt(2 n) of one another) is seen as standardised
UNIFORM_SCALE_RTOL = 0.05
#: weight of the squared LOO residual in a classification score (a tie-breaker)
TIE_BREAK = 0.01


@dataclass(frozen=True)
class Candidate:
    """One point of the search: how X is scaled, the kernel, its bandwidth factor."""

    scaling: str  # "none" or "standard"
    kernel: str  # a key of KERNELS
    factor: float  # sigma = factor * median heuristic of the scaled (and reduced) rows


@dataclass
class SearchResult:
    """The winner and the record of every evaluation (one row per candidate and rung)."""

    best: Candidate
    sigma: float
    alpha: float  # the LOO-best ridge on ``rows`` rows (K + alpha I convention)
    rows: int
    score: float
    records: list = field(default_factory=list)
    multiclass: str = "ovr"  # "ovo": one-vs-one ridges scored better (pairwise=True searches)
    loo_decision: np.ndarray | None = None  # two classes: the winner's (rows,) LOO decision values

    @property
    def kernel_mean(self):
        """The mean entry of the winner's kernel matrix on the last rung."""
        return next(r["kernel_mean"] for r in reversed(self.records)
                    if r["sigma"] == self.sigma and r["n_samples"] == self.rows)


def loo_losses(K, Y, alphas, codes=None, prior=None, budget=None, decisions=False):
    """Leave-one-out losses of kernel ridge on the Gram matrix K for every ridge in ``alphas``
    (:func:`kernelscale.ops.loo.loo_residuals`).

    Y is (m, k), centred by the caller. ``codes`` (m,) are the class indices for classification
    (Y their centred one-hot codes, ``prior`` the class frequencies the centring removed): the
    loss is the LOO error rate of argmax(prior + LOO prediction) plus ``TIE_BREAK`` times the mean
    squared residual; without codes it is the mean squared LOO residual over the mean squared Y.
    Returns an array of len(alphas); with ``decisions`` (two classes) also the (len(alphas), m)
    LOO decision values, the second class's prediction less the first's."""
    if decisions and (codes is None or Y.shape[1] != 2):
        raise ValueError("loo_losses: decisions=True needs two classes (codes and a Y of two columns)")
    scale = max(float(np.mean(Y * Y)), np.finfo(float).tiny)
    losses, values = [np.empty(0)], [np.empty((0, Y.shape[0]))]
    for R in loo_residuals(K, Y, alphas, budget):  # (j, m, k) for the next j ridges
        squared = residual_squares(R) / (R[0].size * scale)
        if codes is None:
            losses.append(squared)
            continue
        predicted = prior + (Y - R)
        errors = np.mean(np.argmax(predicted, axis=2) != codes, axis=1)
        losses.append(errors + TIE_BREAK * squared)
        if decisions:
            values.append(predicted[:, :, 1] - predicted[:, :, 0])
    if decisions:
        return np.concatenate(losses), np.concatenate(values)
    return np.concatenate(losses)


def pairwise_loo_losses(K, codes, n_classes, alphas, budget=None):
    """Leave-one-out losses of one-vs-one kernel ridge on the Gram matrix K for every ridge in
    ``alphas``: for each pair of classes, ridge regression of centred +-1 codes on the pair's
    rows; the loss is the LOO error rate of the vote (``one_vs_one_scores``' rule) plus
    ``TIE_BREAK`` times the mean squared LOO residual over the pairs' rows. Leaving a row out
    changes only the pairs of its class, whose LOO predictions it gets; the other pairs predict it
    from all their rows (:func:`kernelscale.ops.loo.loo_and_predictions`), so the vote's LOO
    error is exact (up to each pair's intercept, as in :func:`loo_losses`)."""
    m = K.shape[0]
    if budget is not None:
        check_fits(2 * 8 * len(alphas) * m * n_classes, budget, "the one-vs-one search's votes", "increase max_memory")
    order = np.argsort(codes, kind="stable")  # rows by class: a pair's rows are two slices
    K, codes = K[np.ix_(order, order)], codes[order]
    starts = np.searchsorted(codes, np.arange(n_classes + 1))
    votes = np.zeros((n_classes, m, len(alphas)))  # one contiguous (m, r) block per class
    confidence = np.zeros((n_classes, m, len(alphas)))
    squared = np.zeros(len(alphas))
    with one_blas_thread():  # held once here: small problems, and holding costs 0.1 ms a call
        for a, b in class_pairs(n_classes):
            rows = np.r_[starts[a]:starts[a + 1], starts[b]:starts[b + 1]]
            if rows.size == 0:  # neither class in this subsample
                continue
            columns = np.concatenate([K[:, starts[a]:starts[a + 1]], K[:, starts[b]:starts[b + 1]]], axis=1)
            t = np.where(codes[rows] == a, 1.0, -1.0)
            mean = float(t.mean())
            # the pair's decision value at every row, from all its rows; then LOO at its own rows
            residual, predicted = loo_and_predictions(columns[rows], t - mean, columns, alphas, budget)
            value = mean + predicted
            value[rows] = t[:, None] - residual
            wins = value > 0
            votes[a] += wins
            votes[b] += ~wins
            confidence[a] += value
            confidence[b] -= value
            squared += np.einsum("ij,ij->j", residual, residual)
    total = (n_classes - 1) * m
    errors = np.mean(np.argmax(vote_scores(votes, confidence), axis=0) != codes[:, None], axis=0)
    return errors + TIE_BREAK * squared / total


class _Representations:
    """The scaled (and optionally PCA-reduced) rows of the search, per scaling, with the median
    heuristic of each (scaling, kernel)."""

    def __init__(self, X, scalings, reduce, random_state):
        self.rows = {}
        self.medians = {}
        for scaling in scalings:
            Z = as_rows(X, np.float64)  # scipy.sparse X stays sparse (CSR)
            if scaling == "standard":
                Z = standardize(Z, *standard_scaling(Z))
            if reduce is not None:
                Z = reduce(Z)
            self.rows[scaling] = Z
            for name, cls in KERNELS.items():
                self.medians[scaling, name] = median_heuristic(
                    Z, cls._median_metric, n_samples=1000, random_state=random_state)

    def kernel_of(self, candidate):
        sigma = candidate.factor * self.medians[candidate.scaling, candidate.kernel]
        return KERNELS[candidate.kernel](sigma=sigma), sigma


def indicator_columns(X):
    """Boolean mask of the columns of X whose every value is 0 or 1 (one-hot and other indicator
    columns), without an n x d temporary: on [0, 1], x (x - 1) <= 0 with equality only at 0 and
    1, so a column qualifies when its range is within [0, 1] and the sum of x^2 - x is zero."""
    if sp.issparse(X):
        X = X.tocsr()
        other = (X.data != 0) & (X.data != 1)
        mask = np.ones(X.shape[1], dtype=bool)
        mask[X.indices[other]] = False
        return mask
    if X.shape[0] == 0:
        return np.ones(X.shape[1], dtype=bool)
    squares_less_values = np.einsum("ij,ij->j", X, X) - X.sum(axis=0)
    return (X.min(axis=0) >= 0) & (X.max(axis=0) <= 1) & (squares_less_values == 0)


def standard_scaling(X):
    """(mean, scale) of the columns of X; constant and indicator columns (0/1 values only) get
    mean 0 and scale 1 (left as they are).

    Indicator columns stay 0/1: dividing a one-hot column of frequency p by its standard deviation
    multiplies it by about 1 / sqrt(p), so a rare category would dominate every distance, and the
    search's subsamples rarely hold the rare categories that would show it
    (benchmarks/studies/least_squares.md, "The front door's stagewise route"). A change of
    category moves a row by sqrt(2), a standardised number by one standard deviation per unit.

    For scipy.sparse X the mean is zero (no centring, as scikit-learn's
    ``StandardScaler(with_mean=False)``: centring would make every entry nonzero) and the scale
    is the columns' standard deviation, computed from the nonzeros. The search's kernels
    (Gaussian, Laplacian) do not change under translation, so skipping the centring changes
    nothing but rounding."""
    if sp.issparse(X):
        n = X.shape[0]
        mean_ = np.asarray(X.sum(axis=0), dtype=np.float64).ravel() / n
        square = np.asarray(X.multiply(X).sum(axis=0), dtype=np.float64).ravel() / n
        scale = np.sqrt(np.maximum(square - mean_ * mean_, 0.0))
        mean = np.zeros(X.shape[1])
    else:
        mean = np.mean(X, axis=0)
        scale = np.std(X, axis=0)
    keep = ~(scale > 0) | indicator_columns(X)
    mean[keep] = 0.0
    scale[keep] = 1.0
    return mean, scale


def standardize(X, mean, scale):
    """(X - mean) / scale; a scipy.sparse X stays sparse when ``mean`` is zero (a sparse fit's,
    :func:`standard_scaling`), and is densified otherwise (a model fitted on dense rows centres)."""
    if sp.issparse(X):
        if not np.any(mean):
            scaled = X.tocsr(copy=True)
            scaled.data = scaled.data / scale[scaled.indices]  # as the dense division rounds
            return scaled
        X = X.toarray()
    return (X - mean) / scale


def candidates(X):
    """The search's grid: both scalings, both kernels, every bandwidth factor. Only "none" when
    the standard scaling would divide every column by one number within UNIFORM_SCALE_RTOL
    (X already standardised, a single feature, constant and indicator columns only): the
    search's kernels do not change under translation, and their bandwidth, a multiple of the
    median heuristic, follows a uniform scaling, so both scalings would give the same kernel
    matrices."""
    scale = standard_scaling(X)[1]
    same = X.shape[1] == 1 or np.ptp(scale) <= UNIFORM_SCALE_RTOL * np.max(scale)
    scalings = ("none",) if same else ("none", "standard")
    return [Candidate(s, k, f) for s in scalings for k in KERNELS for f in BANDWIDTH_FACTORS]


def halving_search(X, Y, codes, deadline, *, reduce=None, budget=None, random_state=None, log=None,
                   pairwise=False, grid=None):
    """Successive halving of :func:`candidates` on the rows of X (already a random permutation of
    the training rows: its prefixes are the rungs).

    Y (n, k) targets (one-hot codes for classification, with ``codes`` the class indices), not
    centred. ``deadline``: a ``time.perf_counter()`` value no rung may pass (the first rung always
    runs). ``reduce``: a map applied to the scaled rows (the PCA of a method that reduces X).
    ``log(text)`` receives one line per rung. ``pairwise``: with 3 to PAIRWISE_MAX_CLASSES classes, the first
    rung also scores its ``PAIRWISE_LEADERS`` one-vs-one (:func:`pairwise_loo_losses`) and each of
    them goes on with the better of the two schemes. ``grid``: the candidates (None:
    :func:`candidates` of X; the front door passes those of all its training rows, whose
    statistics its final model's scaling uses). Returns a :class:`SearchResult`."""
    both = ("ovr", "ovo") if pairwise and codes is not None and 2 < Y.shape[1] <= PAIRWISE_MAX_CLASSES else ("ovr",)
    modes = {}  # candidate -> the multiclass scheme it won with on the first rung
    n, d = X.shape
    pool = candidates(X) if grid is None else list(grid)
    n = min(n, max_search_rows(budget, d))
    if budget is not None:
        check_fits(LOO_SQUARES * 8 * min(n, MIN_RUNG) ** 2 + 16 * min(n, MIN_RUNG) * d, budget,
                   "the hyperparameter search's kernel matrices", "increase max_memory")
    X, Y = X[:n], Y[:n]
    codes = None if codes is None else codes[:n]
    reps = _Representations(X, sorted({c.scaling for c in pool}), reduce, random_state)
    ladder = rung_sizes(n)
    m = ladder.pop(0)
    records = []
    first = True
    while True:
        prior = Y[:m].mean(axis=0)
        rung = _Rung(reps, m, Y[:m] - prior, None if codes is None else codes[:m], prior, budget, records)
        start = time.perf_counter()
        # past the deadline, the rung ends with what it has scored
        scored = rung.score([(cand, (modes[cand],) if cand in modes else ("ovr",)) for cand in pool], deadline)
        if first:  # go past a bandwidth at the grid's edge; one-vs-one for the leaders
            scored += _beyond_edges(scored, rung)
            if "ovo" in both:
                scored = _with_pairwise_leaders(scored, rung, deadline)
            first = False
        modes.update((t[1], t[4]) for t in scored)
        scored.sort(key=lambda t: t[0])
        loss, cand, sigma, alpha, multiclass, _, decision = scored[0]
        best = SearchResult(cand, sigma, alpha, m, loss, records, multiclass, decision)
        if log is not None:
            log(f"search: {len(scored)} candidate(s) on {m} rows in {time.perf_counter() - start:.2f} s; "
                f"best {cand.kernel} sigma={sigma:.4g} alpha={alpha:.3g} ({cand.scaling} scaling"
                f"{', one-vs-one' if multiclass == 'ovo' else ''}), loss {loss:.4f}")
        keep = max(1, math.ceil(len(scored) * KEEP))
        if len(ladder) == 1 and LAST_RUNG_CANDIDATES is not None:
            keep = max(1, min(keep, LAST_RUNG_CANDIDATES))
        pool = [t[1] for t in scored[:keep]]
        if not ladder or len(scored) == 1:
            break
        workers = parallel_evaluations(ladder[0], Y.shape[1], budget, len(pool))
        if time.perf_counter() + rung.costs.predict(pool, ladder[0]) / workers > deadline:
            break
        m = ladder.pop(0)
    return best


def rung_sizes(n):
    """The rows of each rung for a search of n rows: the last rung has all n, each one before has
    RUNG_GROWTH times fewer, and the first has at most FIRST_RUNG (all n when n is no more). A
    ladder that ends at n spends nothing on a last rung barely larger than the one before it
    (426 rows after 400)."""
    steps = 0
    while n > FIRST_RUNG * RUNG_GROWTH**steps:
        steps += 1
    return [math.ceil(n / RUNG_GROWTH**(steps - i)) for i in range(steps + 1)]


def max_search_rows(budget, d):
    """The most rows the search may score a candidate on within ``budget`` bytes: its m x m
    arrays in half the budget, and its two float64 copies of the rows (one per scaling) in a
    quarter."""
    if budget is None:
        return np.iinfo(np.int64).max
    return int(max(1, min(math.isqrt(int(budget // (2 * 8 * LOO_SQUARES))), budget // (4 * 16 * max(d, 1)))))


def parallel_evaluations(m, k, budget, tasks):
    """How many candidates a rung of m rows (k target columns) scores at once: one per thread
    the BLAS libraries may run (:func:`kernelscale.ops.lapack_threads.blas_threads`: each
    evaluation then runs on one), at most ``tasks``, and no more than the arrays of their
    leave-one-out errors (:func:`kernelscale.ops.loo.loo_bytes`, one ridge at a time) fit in half
    of ``budget`` bytes, the share :func:`max_search_rows` gives them."""
    workers = min(blas_threads(), tasks)
    if budget is not None:
        workers = min(workers, int(budget // 2 // loo_bytes(m, k)))
    return max(1, workers)


class _Costs:
    """Seconds of the evaluations of one rung, split into the kernel matrix (O(m^2 d), per
    kernel) and the eigendecomposition with the LOO losses (O(m^3)), to predict the next rung
    from their medians (the first evaluation of a process pays one-time start-up costs); each
    evaluation's own seconds, on one thread when several run at once."""

    def __init__(self):
        self.kernel = {}
        self.cubic = []

    def add(self, kernel, m, kernel_seconds, solve_seconds):
        self.kernel.setdefault(kernel, []).append(kernel_seconds / m**2)
        self.cubic.append(solve_seconds / m**3)

    def predict(self, pool, m):
        cubic = float(np.median(self.cubic))
        return sum(float(np.median(self.kernel[c.kernel])) * m**2 + cubic * m**3 for c in pool)


@dataclass
class _Rung:
    """The first m rows of the search, scored candidate by candidate: the representations, the
    centred targets Ym (with ``prior``, the means removed), the class indices (classification),
    the memory budget, the search's records (one appended per evaluation) and this rung's costs."""

    reps: _Representations
    m: int
    Ym: np.ndarray
    codes: np.ndarray | None
    prior: np.ndarray
    budget: float | None
    records: list
    costs: _Costs = field(default_factory=_Costs)

    def score(self, tasks, deadline=None):
        """Evaluate each (candidate, multiclass schemes) of ``tasks`` (:func:`_evaluate`),
        :func:`parallel_evaluations` at a time, each on one BLAS thread with its share of the
        budget; once ``deadline`` is past, no further evaluation starts (one always completes).
        Returns the results in the order of ``tasks``, those skipped (a suffix) left out."""
        workers = parallel_evaluations(self.m, self.Ym.shape[1], self.budget, len(tasks))
        share = None if self.budget is None else self.budget // workers
        completed = []

        def run(task):
            if deadline is not None and completed and time.perf_counter() > deadline:
                return None
            out = _evaluate(*task, self, share)
            completed.append(True)
            return out

        if workers == 1:
            outs = [run(task) for task in tasks]
        else:
            with one_blas_thread(), ThreadPoolExecutor(workers) as executor:
                outs = list(executor.map(run, tasks))
        results = []
        for out in outs:
            if out is not None:
                result, record, seconds = out
                self.costs.add(result[1].kernel, self.m, *seconds)
                self.records.append(record)
                results.append(result)
        return results


def _evaluate(cand, modes, rung, budget):
    """Score one candidate on the rung's rows: ((loss, candidate, sigma, alpha, multiclass,
    smoothed loss, LOO decision values at alpha for two classes or None), its record, (seconds
    of the kernel matrix, of the losses)), the best of the multiclass schemes ``modes`` ("ovr":
    one-vs-rest, "ovo": one-vs-one); one-vs-rest on a tie."""
    start = time.perf_counter()
    m, Ym, codes = rung.m, rung.Ym, rung.codes
    kernel, sigma = rung.reps.kernel_of(cand)
    K = kernel_matrix(kernel, rung.reps.rows[cand.scaling][:m], max_memory=budget)
    built = time.perf_counter()
    unit = max(float(np.trace(K)) / m, np.finfo(float).tiny)
    scores = {}
    decisions = None
    if "ovr" in modes:
        if codes is not None and Ym.shape[1] == 2:
            losses, decisions = loo_losses(K, Ym, ALPHA_GRID * unit, codes, rung.prior, budget, decisions=True)
        else:
            losses = loo_losses(K, Ym, ALPHA_GRID * unit, codes, rung.prior, budget)
        scores["ovr"] = losses, ALPHA_GRID
    if "ovo" in modes:
        scores["ovo"] = (pairwise_loo_losses(K, codes, Ym.shape[1], PAIRWISE_ALPHA_GRID * unit, budget),
                         PAIRWISE_ALPHA_GRID)
    multiclass = min(scores, key=lambda scheme: (_smoothed(scores[scheme][0]).min(), scheme != "ovr"))
    losses, grid = scores[multiclass]
    done = time.perf_counter()
    i = int(np.argmin(_smoothed(losses)))
    alpha = float(grid[i] * unit)
    record = {"scaling": cand.scaling, "kernel": cand.kernel, "bandwidth_factor": cand.factor,
              "sigma": sigma, "alpha": alpha, "multiclass": multiclass, "n_samples": m,
              "validation_loss": float(losses[i]), "kernel_mean": float(np.mean(K)), "fit_time": done - start}
    decision = decisions[i] if decisions is not None and multiclass == "ovr" else None
    result = (float(losses[i]), cand, sigma, alpha, multiclass, float(_smoothed(losses)[i]), decision)
    return result, record, (built - start, done - built)


def _with_pairwise_leaders(scored, rung, deadline):
    """``scored`` (one-vs-rest) with the leading ``PAIRWISE_LEADERS`` of them scored one-vs-one
    too, each kept with the better scheme (the smaller smoothed loss; one-vs-rest on a tie)."""
    if time.perf_counter() > deadline:
        return scored
    order = sorted(range(len(scored)), key=lambda i: scored[i][0])
    leaders = order[:max(1, math.ceil(len(scored) * PAIRWISE_LEADERS))]
    pairwise = rung.score([(scored[i][1], ("ovo",)) for i in leaders], deadline)
    for i, result in zip(leaders, pairwise):
        if result[5] < scored[i][5]:
            scored[i] = result
    return scored


def _smoothed(losses):
    """Each loss averaged with its neighbours on the ridge grid: an error rate on a few hundred
    rows is noisy, and an isolated dip at one ridge is more often noise than signal."""
    padded = np.concatenate([losses[:1], losses, losses[-1:]])
    return (padded[:-2] + padded[1:-1] + padded[2:]) / 3.0


def _beyond_edges(scored, rung):
    """Where the best bandwidth of a (scaling, kernel) is the grid's smallest or largest, score
    EDGE_STEPS more factors beyond it, each a factor EDGE_RATIO further."""
    extra = []
    groups = {(t[1].scaling, t[1].kernel) for t in scored}
    for scaling, kernel in sorted(groups):
        mine = [t for t in scored if (t[1].scaling, t[1].kernel) == (scaling, kernel)]
        factor = min(mine, key=lambda t: t[0])[1].factor
        if factor not in (BANDWIDTH_FACTORS[0], BANDWIDTH_FACTORS[-1]):
            continue
        ratio = EDGE_RATIO if factor == BANDWIDTH_FACTORS[-1] else 1.0 / EDGE_RATIO
        extra += [(Candidate(scaling, kernel, factor * ratio**step), ("ovr",)) for step in range(1, EDGE_STEPS + 1)]
    return rung.score(extra)
