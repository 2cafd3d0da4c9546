"""A picture of kernelscale.VirtualDigits on MNIST, and the time to generate one chunk.

Rows: the first training image of each digit 0..9; column 0 the original, the other columns
deformed versions (the stream's later passes over these ten base images, default deformation
settings). Look at it to check that every deformed digit still reads as its digit. Then times
``chunk(c)`` of the full MNIST8M-sized stream (60000 base images, 8.1 million examples,
chunk_size=10000) and prints the median over a few chunks.

    python -m benchmarks virtual_digits_grid [--columns 8] [--seed 0] [--no-timing]

Writes benchmarks/results/virtual-digits.png.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.harness import RESULTS_DIR
from kernelscale import load_dataset
from kernelscale.data.virtual_digits import VirtualDigits

OUT = RESULTS_DIR / "virtual-digits.png"


def time_chunks(mnist, n_chunks=3, dtype=np.float32):
    """Seconds per ``chunk(c)`` (chunk_size=10000, deformed chunks only, first call excluded)."""
    stream = VirtualDigits(mnist.X_train, mnist.y_train, n_examples=8_100_000, dtype=dtype)
    first = -(-stream.n_base // stream.chunk_size)  # the first chunk past the originals
    stream.chunk(first)
    times = []
    for c in range(first + 1, first + 1 + n_chunks):
        t = time.perf_counter()
        stream.chunk(c)
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--columns", type=int, default=8, help="deformed versions per digit")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--no-timing", action="store_true", help="skip the chunk timing")
    args = parser.parse_args(argv)

    mnist = load_dataset("mnist")
    rows = [int(np.flatnonzero(mnist.y_train == d)[0]) for d in range(10)]
    base = mnist.X_train[rows]
    stream = VirtualDigits(base, mnist.y_train[rows], n_examples=10 * (args.columns + 1),
                           chunk_size=10 * (args.columns + 1), seed=args.seed)
    X, y = stream.chunk(0)
    # example i is base image i % 10: pass p holds the p-th version of every digit
    grid = X.reshape(args.columns + 1, 10, 28, 28).transpose(1, 0, 2, 3)
    assert (y.reshape(args.columns + 1, 10) == np.arange(10)).all()

    title = (f"VirtualDigits: max_shift={stream.max_shift:g}, max_rotation="
             f"{stream.max_rotation:g} deg, scale={stream.scale_range}, elastic alpha="
             f"{stream.elastic_alpha:g} sigma={stream.elastic_sigma:g}")
    if not args.no_timing:
        seconds = time_chunks(mnist)
        print(f"chunk(c), chunk_size=10000, float32: {seconds:.3f} s (median of 3)")
        title += f"\nchunk(c) of 10000: {seconds:.2f} s"

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(10, args.columns + 1, figsize=(1.0 * (args.columns + 1), 10.6))
    for r in range(10):
        for c in range(args.columns + 1):
            ax = axes[r, c]
            ax.imshow(grid[r, c], cmap="gray_r", vmin=0, vmax=255, interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            if r == 0:
                ax.set_title("original" if c == 0 else f"#{c}", fontsize=8)
    fig.suptitle(title, fontsize=8)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=80)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
