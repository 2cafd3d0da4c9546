"""The mini-batches of a doubly stochastic fit, and which row chunks of a dask X they read.

Mini-batches (:func:`_draw_batches`): ``fit`` cuts one epoch order into consecutive chunks of
batch_size rows and repeats; with ``shuffle=True`` each epoch is a permutation drawn from the
generator of (seed_, start, epoch), so the order of a run is a function of the model's seed and
its iteration counter (a warm start continues it). ``partial_fit`` takes its data's chunks in
order.

A dask X chunked by rows is read where its chunks are (:mod:`.distributed`). When X does not fit
what the workers may hold, a pass is drawn window by window (:func:`_epoch_windows`): the row
chunks in a random order, cut into windows of at most a given number of rows, each window's
rows permuted; each window's chunks are held (persisted) from the first batch that reads them to
the last (:func:`_residency`), so each chunk is computed once per pass, and every row still comes
once per pass; the order is then not numpy's permutation. The measurements behind this design
are in benchmarks/studies/doubly_stochastic.md ("Dask").
"""

from __future__ import annotations

import numpy as np

from ..ops.rows import DaskRows, is_dask


def _draw_batches(n, batch_size, n_iter, seed, start, shuffle, row_chunks=None, window_rows=None):
    """(the ``n_iter`` mini-batches of a ``fit`` on n rows, windows or None): consecutive chunks
    of ``batch_size`` of one epoch order, repeated; each epoch permuted (``shuffle``) by a
    generator of (seed, start, epoch). With the ``row_chunks`` of a dask X of more than
    ``window_rows`` rows (what the workers hold at once, half of it a window), the epoch order is
    :func:`_epoch_windows`'s windows of at most window_rows rows one after the other, returned
    for :func:`_residency`."""
    bs = min(batch_size, n)
    chunks = [slice(s, min(s + bs, n)) for s in range(0, n, bs)]
    windowed = shuffle and row_chunks is not None and window_rows is not None and n > window_rows
    window = max(int(window_rows or 1), 1)
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
    """One epoch of the rows of a dask X of ``row_chunks`` that the workers cannot hold whole, as
    windows: the chunks in a random order, cut into windows of consecutive chunks holding at most
    ``window`` rows (one chunk at least), each window's rows permuted. The epoch's order is the
    windows one after the other: every row comes once, as in a full permutation, but a window
    needs only its own chunks, so holding it computes (regenerates, reads) those chunks once
    (:func:`_residency`). A chunk larger than a window makes a window of its own."""
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


def _batch_rows(X, Y, sample_weight, batches):
    """Yield (X[b], Y[b], sample_weight[b]) for each batch b (index array or slice; None for
    None); of dask arrays, each batch's rows fetched with one compute of the chunks holding them
    (:meth:`kernelscale.ops.rows.DaskRows.taker`: the first mini-batch, whose targets set the
    regressor's intercept and whose features the "auto" step)."""
    if not is_dask(X):
        for b in batches:
            yield X[b], None if Y is None else Y[b], None if sample_weight is None else sample_weight[b]
        return
    n = X.shape[0]
    take = DaskRows(X.chunks[0], 0).taker(X, Y, sample_weight)
    for b in batches:
        yield from take([np.arange(*b.indices(n)) if isinstance(b, slice) else b])


def _chunk_windows(row_chunks, n_rows):
    """The row chunks of a dask X in order, as windows of one chunk each (index arrays), repeated
    until they cover ``n_rows`` rows: what an unshuffled run of batches reads, chunk after chunk."""
    offsets = np.cumsum((0,) + tuple(int(c) for c in row_chunks))
    windows, covered = [], 0
    while covered < n_rows:
        for a, b in zip(offsets[:-1], offsets[1:]):
            if b > a:
                windows.append(np.arange(a, b))
                covered += b - a
    return windows


def _residency(batches, windows, row_chunks, n):
    """[(chunks to hold before batch i, chunks to release after it)] for ``batches`` that read
    the rows of ``windows`` (index arrays of whole row chunks) in order: the batches' rows one
    after the other are the windows' rows one after the other. A window's chunks are held from
    the first batch that reads its rows to the last, so at most the windows of one batch are
    held at once (two, where a batch runs past a window's end), and each chunk is computed once
    per window that holds it."""
    offsets = np.cumsum((0,) + tuple(int(c) for c in row_chunks))
    stops = np.cumsum([len(w) for w in windows])
    starts = stops - np.array([len(w) for w in windows], dtype=stops.dtype)
    owners = [np.unique(np.searchsorted(offsets, w, side="right") - 1) for w in windows]
    held = {}  # chunk -> windows holding it
    out, first, pos = [], 0, 0
    open_windows = []
    for b in batches:
        end = pos + _batch_len(b, n)
        hold = []
        while first < len(windows) and starts[first] < end:
            for c in owners[first]:
                held[int(c)] = held.get(int(c), 0) + 1
            hold.extend(int(c) for c in owners[first])
            open_windows.append(first)
            first += 1
        release = []
        for w in [w for w in open_windows if stops[w] <= end]:
            open_windows.remove(w)
            for c in owners[w]:
                held[int(c)] -= 1
                if not held[int(c)]:
                    del held[int(c)]
                    release.append(int(c))
        out.append((hold, release))
        pos = end
    return out
