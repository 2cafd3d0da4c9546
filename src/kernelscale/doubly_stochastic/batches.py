"""The mini-batches of a doubly stochastic fit, and their rows fetched from a dask X.

Mini-batches (:func:`_draw_batches`): ``fit`` cuts one epoch order into consecutive chunks of
batch_size rows and repeats; with ``shuffle=True`` each epoch is a permutation drawn from the
generator of (seed_, start, epoch), so the order of a run is a function of the model's seed and
its iteration counter (a warm start continues it). ``partial_fit`` takes its data's chunks in
order.

A dask X chunked by rows (:func:`_batch_rows`). The batch indices are drawn as on numpy. The rows
of a group of consecutive batches (one pass at most, and what fits a quarter of the budget left
beside the iterations, at most :data:`FETCH_MAX_BYTES`) are fetched with one dask compute, so a
fit computes its row chunks once per group, not once per iteration. When one pass holds more
rows than one fetch, ``fit`` draws each pass window by window (:func:`_epoch_windows`): the row
chunks in a random order, cut into windows of at most one fetch less a batch, each window's rows
permuted. It fetches the rows window by window (:func:`_window_rows`), a batch that runs past a
window taking its rest from the next. Each row still comes once per pass, each chunk is computed
once per pass instead of once per fetch (a lazily generated or out-of-core X would be regenerated
or read in full per fetch), and the client holds a window of rows and the rest of a batch. When
a pass fits one fetch the order is numpy's permutation, so the model is numpy's.
The measurements behind this design are in benchmarks/studies/doubly_stochastic.md ("Dask").
"""

from __future__ import annotations

import numpy as np

from ..ops.rows import DaskRows, is_dask

# "notes": benchmarks/studies/doubly_stochastic.md, the section named

#: most bytes of rows (with their targets and weights) that one fetch from a dask X brings here;
#: a pass over more is drawn window by window of row chunks (notes, "Dask")
FETCH_MAX_BYTES = 256 * 2**20


def _fetch_bytes(spare):
    """Bytes of rows one fetch from a dask X holds: a quarter of the budget left beside the
    iterations (``spare``), at most FETCH_MAX_BYTES."""
    return min(max(spare, 0) // 4, FETCH_MAX_BYTES)


def _draw_batches(n, batch_size, n_iter, seed, start, shuffle, row_chunks=None, fetch_rows=1):
    """(the ``n_iter`` mini-batches of a ``fit`` on n rows, windows to fetch them by or None):
    consecutive chunks of ``batch_size`` of one epoch order, repeated; each epoch permuted
    (``shuffle``) by a generator of (seed, start, epoch). With the ``row_chunks`` of a dask X of
    more than ``fetch_rows`` rows (what one fetch holds), the epoch order is
    :func:`_epoch_windows`'s windows of at most fetch_rows - batch_size rows one after the other
    (a window and the rest of a batch are held at once), returned for :func:`_batch_rows`."""
    bs = min(batch_size, n)
    chunks = [slice(s, min(s + bs, n)) for s in range(0, n, bs)]
    windowed = shuffle and row_chunks is not None and n > fetch_rows
    window = max(fetch_rows - bs, 1)
    batches, windows = [], []
    epoch = 0
    while len(batches) < n_iter:
        if shuffle:
            rng = np.random.default_rng([seed, start, epoch])
            if windowed:
                epoch_windows = _epoch_windows(row_chunks, window, rng)
                windows.extend(epoch_windows)
                order = np.concatenate(epoch_windows)
            else:
                order = rng.permutation(n)
            batches.extend(order[c] for c in chunks)
        else:
            batches.extend(chunks)
        epoch += 1
    return batches[:n_iter], (windows if windowed else None)


def _epoch_windows(row_chunks, window, rng):
    """One epoch of the rows of a dask X of ``row_chunks`` larger than a fetch, as windows: the
    chunks in a random order, cut into windows of consecutive chunks holding at most ``window``
    rows (one chunk at least), each window's rows permuted. The epoch's order is the windows one
    after the other: every row comes once, as in a full permutation, but a window needs only its
    own chunks, so fetching it computes (regenerates, reads) those chunks once
    (:func:`_batch_rows`). A chunk larger than a window makes a window of its own."""
    offsets = np.cumsum((0,) + tuple(row_chunks))
    windows, rows, held = [], [], 0
    for c in rng.permutation(len(row_chunks)):
        size = int(offsets[c + 1] - offsets[c])
        if held and held + size > window:
            windows.append(rng.permutation(np.concatenate(rows)))
            rows, held = [], 0
        rows.append(np.arange(offsets[c], offsets[c + 1]))
        held += size
    windows.append(rng.permutation(np.concatenate(rows)))
    return windows


def _batch_len(batch, n):
    return len(range(n)[batch]) if isinstance(batch, slice) else len(batch)


def _batch_rows(X, Y, sample_weight, batches, fetch_bytes=0, windows=None):
    """Yield (X[b], Y[b], sample_weight[b]) for each batch b (index array or slice; None for
    None). Dask arrays (module docstring): consecutive batches are fetched in groups, each with
    ONE compute of the rows it holds (:meth:`kernelscale.ops.rows.DaskRows.taker`); a group holds
    at most ``fetch_bytes`` of rows (one batch at least) and at most n rows. With ``windows``
    (index arrays whose concatenation is that of the batches) the rows are fetched window by
    window instead, each with one compute of its chunks: a batch that runs past a window takes
    its rest from the next one, so every chunk is computed once per window that holds it, and
    the rows held are a window and about two batches."""
    if not is_dask(X):
        for b in batches:
            yield X[b], None if Y is None else Y[b], None if sample_weight is None else sample_weight[b]
        return
    n = X.shape[0]
    take = DaskRows(X.chunks[0], 0).taker(X, Y, sample_weight)
    if windows is not None:
        yield from _window_rows(take, batches, iter(windows), n)
        return
    width = X.dtype.itemsize * X.shape[1] + (0 if Y is None else Y.dtype.itemsize * Y.shape[1])
    limit = min(n, max(int(fetch_bytes) // (width + (0 if sample_weight is None else 8)), 1))
    start = 0
    while start < len(batches):
        stop, held = start + 1, _batch_len(batches[start], n)
        while stop < len(batches) and held + _batch_len(batches[stop], n) <= limit:
            held += _batch_len(batches[stop], n)
            stop += 1
        groups = [np.arange(*b.indices(n)) if isinstance(b, slice) else b for b in batches[start:stop]]
        yield from take(groups)
        start = stop


def _window_rows(take, batches, windows, n):
    """:func:`_batch_rows` window by window: each batch is copied out of the fetched window (or
    the end of one and the start of the next), so nothing keeps a window alive once its rows are
    used, and the next window is fetched only then."""
    held, used = None, 0
    for b in batches:
        size, parts = _batch_len(b, n), []
        while size:
            if held is None or used == held[0].shape[0]:
                parts = [tuple(None if a is None else a.copy() for a in p) for p in parts]  # off the old window
                held = None
                (held,) = take([next(windows)])
                used = 0
            step = min(size, held[0].shape[0] - used)
            parts.append(tuple(None if a is None else a[used:used + step] for a in held))
            used, size = used + step, size - step
        yield tuple(None if p[0] is None else np.concatenate(p) for p in zip(*parts))
