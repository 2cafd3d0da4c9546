"""Doubly stochastic gradients on a stream of virtual MNIST digits (the paper's MNIST8M headline).

The doubly stochastic paper trains on MNIST8M, 8.1 million deformed copies of the 60000 MNIST
training digits, with a model whose memory is O(t) in the iterations t and which never stores
a feature. This benchmark streams such examples through ``partial_fit``:

- the stream: :class:`kernelscale.VirtualDigits` over the 60000 training digits, in chunks of
  8192: first the real digits (one pass), then random shifts, rotations, scalings and elastic
  deformations of them (chunk c regenerated from (seed, c)), pixels / 255 in float32; nothing
  of the stream is kept;
- the model: ``DoublyStochasticClassifier(loss="softmax", solver="preconditioned",
  step_size=1, precond_ridge=1e-3, random_state=0)`` with its defaults otherwise (the Gaussian
  kernel with the median bandwidth of the first call, blocks of 1024 features, batches of 4096;
  the authors' step and ridge, the classifier's defaults until session 15) and ``t0`` = 240 mini-batches (16 passes over the 60000 base digits, about 1M
  examples), chosen on training data (below); the runs recorded before that choice used
  t0 = 15 (one pass), which their records name;
- checkpoints at 60k (the real digits only), 125k, 250k, 500k, 1M, 2M, 4M and 8.1M examples:
  test error on the real MNIST test set (10000), fit seconds so far, peak resident memory of
  the process, and the model's bytes (its coefficient blocks, which grow like t);
- resumable: after every chunk that crosses a checkpoint, and when the part's time budget is
  spent, the model (:func:`kernelscale.save`) and the position in the stream are written to
  ``--state-dir`` (default ``~/.cache/kernelscale/dsg-stream``, never in the repository); the
  next run loads them and continues. Resuming after save / load is bit-identical
  (``tests/test_doubly_stochastic.py``), so a run cut into parts equals one run.

Choosing settings (``--validation``, with ``--t0``): the stream is made of the first 50000
training digits and the error is measured on the last 10000, which it never sees; the test set
is not used. Results go to ``results/dsg-stream-validation.json``, one setting after another.
At 254k examples (62 iterations, on 2 CPU cores, 100-106 s each) t0 = 15 / 60 / 240 / 1e4 gave
2.54 / 2.23 / 2.15 / 2.16% validation error: the one-pass t0 decays the step too soon. 240 is
as good as the authors' nearly constant step there and still decays 9x over 8.1M examples
(1978 iterations); which of the two is better that late is for a longer study on a GPU.
On an H200 (``gpu_run.sh`` with ``STUDY``, ``results/dsg-stream-cuda-validation.json``) at about
500k examples: t0 = 240 and 1e4 with the classifier's blocks gave 1.98 and 2.02%; the authors'
blocks and batches (``--block-size 8192 --batch-size 32768``, t0 = 1e4) 1.44% at 492k, and with
ridge 1e-6 (theirs is 1e-7) 1.46% at 524k. The 45 s budget stopped the third short of the
500k checkpoint. ``--best-setting`` compares every setting at the largest checkpoint all of them
crossed (here 250k: 2.15 / 2.16 / 1.62 / 1.64%) and picks the third; the run compared the
largest counts recorded instead and took the fourth, level with the third wherever both were
measured. The headline run is that fourth setting:
``--t0 10000 --precond-ridge 1e-6 --block-size 8192 --batch-size 32768`` (test error 0.70% at
8.1M examples after 430 s of fitting on an H200,
``results/dsg-stream-cuda-t0-10000-ridge-1e-06-block-8192-batch-32768.json``; a run that is not a
validation study also copies its records into ``results/dsg.json``, ``record_in_dsg``).
A call of ``partial_fit`` takes whole mini-batches: with a batch larger than a chunk, the bench
joins consecutive chunks into one call.
The classifier's fit defaults of session 15 (``--step-size 0.5 --precond-ridge 0.01``, chosen on
fits of four passes over fixed sets) gave 2.47% at t0 = 240, against 2.15% for the authors' step
and ridge (1, 1e-3): on a stream of fresh examples the full step is better, so the stream keeps it.

Peers, recorded from the other suites (not rerun here): LIBSVM's 1.47% on the 60000 real
digits (the paper's table), and the best kernelscale result without virtual examples
(``results/dsg.json``, MNIST 10-class).

On a GPU (``--device cuda``; results in ``results/dsg-stream-cuda.json``) the model's products
run on the device (float32) and the stream's chunks are generated ahead by ``--workers`` threads
(the resampling is compiled without the GIL); the peak GPU memory (torch's allocator) is recorded
beside the host's peak RSS. A stream of ``partial_fit`` calls keeps its drawn blocks on the GPU
(kernelscale.doubly_stochastic.fitting module docstring, "Streaming on a GPU").

Run: ``python -m benchmarks dsg_stream [--budget-s 1200] [--until 1000000] [--fresh]
[--device cuda] [--workers 8]`` (``--quick``: 12k real digits and a stream to 40k, a few seconds).
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import json
import logging
import pstats
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from benchmarks.harness import PeakMemory, RESULTS_DIR, Suite, current_rss
from kernelscale import DoublyStochasticClassifier, VirtualDigits, load, load_dataset, save
from kernelscale.doubly_stochastic.defaults import dsg_auto_sizes

SUITE = "dsg-stream"
SEED = 0
CHECKPOINTS = (60_000, 125_000, 250_000, 500_000, 1_000_000, 2_000_000, 4_000_000, 8_100_000)
CHUNK = 8192  # two preconditioned mini-batches of 4096 per partial_fit call
DEFAULT_STATE_DIR = Path.home() / ".cache" / "kernelscale" / "dsg-stream"
PAPER = {
    "source": "Dai et al. 2014, MNIST8M (8.1M virtual examples): 0.5% test error; issue #17 goal <= 0.7%",
    "libsvm_60000": {"test_error": 0.0147, "note": "the paper's LIBSVM on the 60000 real digits"},
}
logger = logging.getLogger("kernelscale.benchmarks.dsg_stream")


#: the step's t0 in mini-batches (module docstring, "Choosing settings")
T0 = 240


#: the authors' step (gamma_0 = 1) and, read as relative, their ridge: the classifier's defaults
#: before session 15 (0.5 and 1e-2 since, chosen on fits of a few passes over fixed sets), with
#: which every stream here was recorded, and better on the stream ("Choosing settings")
STEP_SIZE, PRECOND_RIDGE = 1.0, 1e-3


def make_model(device=None, t0=None, step_size=None, precond_ridge=None, block_size=None, batch_size=None):
    t0 = T0 if t0 is None else t0
    step_size = STEP_SIZE if step_size is None else step_size
    precond_ridge = PRECOND_RIDGE if precond_ridge is None else precond_ridge
    return DoublyStochasticClassifier(loss="softmax", solver="preconditioned", t0=t0, step_size=step_size,
                                      precond_ridge=precond_ridge, block_size=block_size or "auto",
                                      batch_size=batch_size or "auto", random_state=SEED, device=device)


def _damping(model):
    """The step, ridge, block and batch of ``model`` as a name ("" for the recorded STEP_SIZE and
    PRECOND_RIDGE and the classifier's block and batch)."""
    name = ""
    if (model.step_size, model.precond_ridge) != (STEP_SIZE, PRECOND_RIDGE):
        name += f", step={model.step_size:g}, ridge={model.precond_ridge:g}"
    if (model.block_size, model.batch_size) != ("auto", "auto"):
        name += f", block={model.block_size}, batch={model.batch_size}"
    return name


def _rows_per_call(model):
    """The rows of one partial_fit call: whole mini-batches of the model, at least one chunk (the
    stream's last call takes what is left)."""
    _, batch, _ = dsg_auto_sizes(CHUNK, "preconditioned", model.batch_size, model.block_size)
    if CHUNK % batch and batch % CHUNK:
        raise ValueError(f"batch_size={batch} must divide the chunk of {CHUNK} rows or be a multiple of it, "
                         "so that every partial_fit call takes whole mini-batches.")
    return max(batch, CHUNK)


def _chunks(stream, first, workers):
    """Chunks first, first + 1, ... of ``stream``: generated here (workers=0) or ahead by a pool
    of ``workers`` threads, at most 2 * workers chunks held."""
    if workers <= 0:
        c = first
        while True:
            yield stream.chunk(c)
            c += 1
    with ThreadPoolExecutor(workers) as pool:
        ahead = collections.deque(pool.submit(stream.chunk, c) for c in range(first, first + 2 * workers))
        c = first + 2 * workers
        while True:
            chunk = ahead.popleft().result()
            ahead.append(pool.submit(stream.chunk, c))
            c += 1
            yield chunk


def _gpu_peak(device):
    """(device name, peak bytes torch's allocator held) on a CUDA device; (None, None) otherwise."""
    if device is None or not str(device).startswith("cuda"):
        return None, None
    import torch

    return torch.cuda.get_device_name(), int(torch.cuda.max_memory_allocated())


def _load_state(state_dir):
    meta = state_dir / "state.json"
    if not meta.exists():
        return None, {"chunks_done": 0, "examples": 0, "fit_s": 0.0, "records": [], "peak_rss": 0}
    state = json.loads(meta.read_text())
    return load(state_dir / "model.ks"), state


def _save_state(state_dir, model, state):
    state_dir.mkdir(parents=True, exist_ok=True)
    save(model, state_dir / "model.ks")
    tmp = state_dir / "state.json.tmp"
    tmp.write_text(json.dumps(state))
    tmp.replace(state_dir / "state.json")


def _evaluate(model, Xt, yt, state, device, start):
    """The record of the model now: test error, times, memory (printed and logged)."""
    err = float(np.mean(model.predict(Xt) != yt))
    device_name, gpu_peak = _gpu_peak(device)
    wall = state.get("wall_s", 0.0) + time.perf_counter() - start  # with the chunks' generation
    logger.info("%d examples: test error %.4f, fit %.0f s", state["examples"], err, state["fit_s"])
    print(f"{state['examples']:>9d} examples  test error {err:.4f}  fit {state['fit_s']:.0f} s  "
          f"peak RSS {state['peak_rss'] / 2**20:.0f} MiB  model {model.coef_.nbytes / 2**20:.1f} MiB"
          + ("" if gpu_peak is None else f"  GPU peak {gpu_peak / 2**20:.0f} MiB  wall {wall:.0f} s"), flush=True)
    return {
        "device": device_name or "host", "gpu_peak_bytes": gpu_peak, "wall_s": wall,
        "examples": state["examples"], "test_error": err, "fit_s": state["fit_s"],
        "peak_rss_bytes": state["peak_rss"], "model_bytes": int(model.coef_.nbytes),
        "n_iter": int(model.n_iter_), "n_features": int(model.coef_.shape[0] * model.coef_.shape[1]),
    }


def run(quick=False, out_dir=None, *, budget_s=1200.0, until=None, state_dir=None, fresh=False, data=None,
        checkpoints=None, device=None, workers=0, t0=None, validation=False, profile=None, step_size=None,
        precond_ridge=None, block_size=None, batch_size=None):
    """One part of the run (module docstring); ``data`` (X_train, y_train, X_test, y_test with
    pixel values in 0..255) and ``checkpoints`` replace MNIST and its checkpoints (tests).
    ``validation``: a study on training data only (module docstring, "Choosing settings")."""
    if data is None:
        d = load_dataset("mnist")
        data = d.X_train, d.y_train, d.X_test, d.y_test
    X, y, Xt, yt = data
    if validation:  # the last sixth of the training digits is the evaluation set, never streamed
        cut = len(y) - len(y) // 6
        X, y, Xt, yt = X[:cut], y[:cut], X[cut:], y[cut:]
    if quick:
        X, y, Xt, yt = X[:12000], y[:12000], Xt[:2000], yt[:2000]
    checkpoints = tuple(checkpoints or ((12_000, 24_000, 40_000) if quick else CHECKPOINTS))
    Xt = np.asarray(Xt, dtype=np.float32) / np.float32(255)
    study = (("-validation" if validation else "") + ("" if t0 is None else f"-t0-{t0:g}")
             + ("" if step_size is None else f"-step-{step_size:g}")
             + ("" if precond_ridge is None else f"-ridge-{precond_ridge:g}")
             + ("" if block_size is None else f"-block-{block_size}")
             + ("" if batch_size is None else f"-batch-{batch_size}"))
    tag = ("quick" if quick else "full") + ("" if device is None else f"-{device}") + study
    state_dir = Path(state_dir) if state_dir is not None else DEFAULT_STATE_DIR / tag
    asked = make_model(device, t0, step_size, precond_ridge, block_size, batch_size)
    _rows_per_call(asked)  # a batch that cannot take whole chunks is refused before anything is deleted
    if fresh:
        for name in ("state.json", "model.ks"):
            (state_dir / name).unlink(missing_ok=True)
    model, state = _load_state(state_dir)
    if model is None:
        model = asked
    else:
        if model.step_size == "auto":  # saved before the step was pinned: "auto" was then STEP_SIZE
            model.set_params(step_size=STEP_SIZE)
        settings = ("t0", "step_size", "precond_ridge", "block_size", "batch_size")
        saved, wanted = ({name: m.get_params()[name] for name in settings} for m in (model, asked))
        if saved != wanted:
            raise ValueError(f"the state in {state_dir} was saved with {saved}, not the settings asked for "
                             f"({wanted}): pass another --state-dir, or --fresh to start over.")
    model.set_params(device=device)
    until = min(until or checkpoints[-1], checkpoints[-1])
    stream = VirtualDigits(X, y, n_examples=checkpoints[-1], chunk_size=CHUNK, seed=SEED, dtype=np.float32)
    classes = np.unique(y)
    start = time.perf_counter()
    chunks = _chunks(stream, state["chunks_done"], workers)
    group = _rows_per_call(model) // CHUNK  # chunks per partial_fit call
    profiler = cProfile.Profile() if profile else None
    if profiler:
        profiler.enable()
    with PeakMemory() as mem:
        while state["examples"] < until and time.perf_counter() - start < budget_s:
            parts = [next(chunks) for _ in range(min(group, stream.n_chunks - state["chunks_done"]))]
            Xc, yc = parts[0] if len(parts) == 1 else (np.concatenate(p) for p in zip(*parts))
            Xc /= np.float32(255)
            t = time.perf_counter()
            model.partial_fit(Xc, yc, classes=classes)
            state["fit_s"] += time.perf_counter() - t
            before = state["examples"]
            state["examples"] += len(yc)
            state["chunks_done"] += len(parts)
            state["peak_rss"] = max(state["peak_rss"], current_rss())
            crossed = [c for c in checkpoints if before < c <= state["examples"]]
            if state["chunks_done"] % (64 * group) == 0:
                print(f"  {state['examples']} examples, fit {state['fit_s']:.1f} s, "
                      f"wall {time.perf_counter() - start:.1f} s this part", flush=True)
            if crossed:
                state["records"].append(_evaluate(model, Xt, yt, state, device, start))
                _save_state(state_dir, model, state)
    chunks.close()
    if profiler:  # where this thread's time went, by own time (the generating threads are not seen)
        profiler.disable()
        with open(profile, "w") as f:
            pstats.Stats(profiler, stream=f).sort_stats("tottime").print_stats(40)
    if state["examples"] and (not state["records"] or state["records"][-1]["examples"] < state["examples"]):
        state["paused_at"] = _evaluate(model, Xt, yt, state, device, start)  # where this part stopped
    state["wall_s"] = state.get("wall_s", 0.0) + time.perf_counter() - start
    _save_state(state_dir, model, state)
    # a study's settings share one file, each named in its records; another t0 is a run of its own
    suite = Suite(SUITE + ("" if device is None else f"-{device}") + ("-validation" if validation else study),
                  quick=quick, out_dir=out_dir, paper=dict(PAPER, peak_rss_this_part=mem.peak_rss))
    setting = f", t0={model.t0:g}{_damping(model)}" if validation else _damping(model)
    if validation and suite.path.exists():  # one file for the study: the other settings' records stay
        suite.records.extend(r for r in json.loads(suite.path.read_text())["records"]
                             if not r["method"].endswith(setting))
    paused = state.get("paused_at")
    last = state["records"][-1]["examples"] if state["records"] else 0
    for rec in state["records"] + ([paused] if paused and paused["examples"] > last else []):
        where = " (a part's end)" if rec is paused else ""
        crossed = [c for c in checkpoints if c <= rec["examples"]]
        suite.add("mnist virtual stream" + (" (validation: the last 10000 training digits)" if validation else ""),
                  f"DSG softmax preconditioned, {rec['examples']} examples{where}{setting}",
                  params={"examples": rec["examples"], "checkpoint": max(crossed) if crossed else None,
                          "part_end": rec is paused, "n_iter": rec["n_iter"], "n_features": rec["n_features"],
                          "chunk": CHUNK, "block_size": model.block_size, "batch_size": model.batch_size,
                          "t0": model.t0, "step_size": model.step_size,
                          "precond_ridge": model.precond_ridge, "seed": SEED, "device": rec.get("device", "host")},
                  metrics={"test_error": rec["test_error"], "fit_s": rec["fit_s"],
                           "peak_rss_bytes": rec["peak_rss_bytes"], "model_bytes": rec["model_bytes"],
                           **({"gpu_peak_bytes": rec["gpu_peak_bytes"], "wall_s": rec["wall_s"]}
                              if rec.get("gpu_peak_bytes") else {})})
    path = suite.write(plot=False)
    if not (quick or validation):
        record_in_dsg(path)
    done = state["examples"] >= until
    print(f"{'done' if done else 'paused'} at {state['examples']} examples (state in {state_dir}); wrote {path}")
    return path


def record_in_dsg(path):
    """Copy the stream run in ``path`` (a result file of this bench) into ``dsg.json`` beside it,
    the doubly stochastic suite's one file (issue #17): its records replace those of an earlier
    run of the same suite there, and name their file in ``params["stream_suite"]``."""
    doc = json.loads(Path(path).read_text())
    if doc.get("quick") or "validation" in doc["suite"]:
        raise ValueError(f"{path} is a quick run or a validation study: only full stream runs go to dsg.json.")
    dsg = Path(path).with_name("dsg.json")
    if not dsg.exists():
        logger.info("no %s to record the stream in", dsg)
        return None
    target = json.loads(dsg.read_text())
    target["records"] = [r for r in target["records"] if r["params"].get("stream_suite") != doc["suite"]]
    for rec in doc["records"]:
        target["records"].append({**rec, "params": {**rec["params"], "stream_suite": doc["suite"]}})
    tmp = dsg.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(target, indent=1, allow_nan=False) + "\n")
    tmp.replace(dsg)
    logger.info("recorded %d stream records in %s", len(doc["records"]), dsg)
    return dsg


def best_setting(path):
    """The command-line settings of the study in ``path`` (a validation suite's json) with the
    lowest error at the largest checkpoint that every setting crossed: each record counts at the
    checkpoint it crossed (a call of several chunks crosses 500k at 507904 or 524288 examples);
    records of a part's end, which stop anywhere, are left out. The bench's defaults are left
    out of the settings printed."""
    by_setting = collections.defaultdict(dict)
    for rec in json.loads(Path(path).read_text())["records"]:
        p = rec["params"]
        checkpoint = p.get("checkpoint", max((c for c in CHECKPOINTS if c <= p["examples"]), default=None))
        if p.get("part_end", "(a part's end)" in rec["method"]) or checkpoint is None:
            continue
        key = (p["t0"], p.get("step_size", STEP_SIZE), p.get("precond_ridge", PRECOND_RIDGE),
               p.get("block_size", "auto"), p.get("batch_size", "auto"))
        by_setting[key][checkpoint] = rec["metrics"]["test_error"]
    common = set.intersection(*(set(errors) for errors in by_setting.values())) if by_setting else set()
    if not common:
        raise ValueError(f"the study in {path} has no checkpoint that all its settings crossed: "
                         "run it longer (--until, --budget-s).")
    at = max(common)
    t0, step, ridge, block, batch = min(by_setting, key=lambda k: by_setting[k][at])
    args = [f"--t0 {t0!r}"]
    args += [] if (step, ridge) == (STEP_SIZE, PRECOND_RIDGE) else [f"--step-size {step!r} --precond-ridge {ridge!r}"]
    args += [] if block == "auto" else [f"--block-size {block}"]
    args += [] if batch == "auto" else [f"--batch-size {batch}"]
    return " ".join(args)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out-dir", default=None, help=f"where results go (default {RESULTS_DIR})")
    p.add_argument("--budget-s", type=float, default=1200.0, help="wall seconds of this part")
    p.add_argument("--until", type=int, default=None, help="stop after this many examples")
    p.add_argument("--state-dir", default=None, help=f"model and position (default {DEFAULT_STATE_DIR})")
    p.add_argument("--fresh", action="store_true", help="discard a saved state and start over")
    p.add_argument("--device", default=None, help="the model's device (e.g. cuda); default numpy")
    p.add_argument("--workers", type=int, default=0, help="threads generating chunks ahead (0: inline)")
    p.add_argument("--t0", type=float, default=None, help=f"the step's t0 (default {T0})")
    p.add_argument("--step-size", type=float, default=None, help=f"the step (default {STEP_SIZE:g})")
    p.add_argument("--precond-ridge", type=float, default=None, help=f"the ridge (default {PRECOND_RIDGE:g})")
    p.add_argument("--block-size", type=int, default=None, help="features per block (default the classifier's)")
    p.add_argument("--batch-size", type=int, default=None,
                   help="rows per mini-batch (default the classifier's, 4 x block)")
    p.add_argument("--profile", default=None, help="write cProfile's top functions of the loop to this file")
    p.add_argument("--validation", action="store_true",
                   help="stream the first 50000 training digits, evaluate on the last 10000 (a study)")
    p.add_argument("--best-setting", default=None, metavar="STUDY_JSON",
                   help="print the settings of the study in STUDY_JSON with the lowest error, and exit")
    p.add_argument("--record-in-dsg", default=None, metavar="STREAM_JSON",
                   help="copy the stream run in STREAM_JSON into dsg.json beside it, and exit")
    a = p.parse_args(argv)
    if a.best_setting:
        print(best_setting(a.best_setting))
        return 0
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if a.record_in_dsg:
        return 0 if record_in_dsg(a.record_in_dsg) else 1
    run(a.quick, a.out_dir, budget_s=a.budget_s, until=a.until, state_dir=a.state_dir, fresh=a.fresh,
        device=a.device, workers=a.workers, t0=a.t0, validation=a.validation, profile=a.profile,
        step_size=a.step_size, precond_ridge=a.precond_ridge, block_size=a.block_size, batch_size=a.batch_size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
