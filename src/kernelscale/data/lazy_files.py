"""Arrays in files as dask arrays in row chunks, read chunk by chunk (``load_file(..., chunks=)``).

Uncompressed arrays are never read whole: a ``.npy`` file, an array stored (not deflated) in an
``.npz`` archive and an uncompressed IDX file are read by one task per row chunk, at the chunk's
byte offset, into memory of its own (``np.fromfile``: freed with the chunk, unlike a memmap's
pages, which count in the resident set while the map lives). A deflated ``.npz`` member cannot
be read from an offset: it is read whole when it fits the memory budget and refused beyond it,
with the way out in the message. Gzipped and text files are read whole, then cut into chunks.
"""

from __future__ import annotations

import zipfile

import numpy as np

__all__ = ["row_chunks", "npy_rows", "npz_rows", "raw_rows", "in_chunks"]


def row_chunks(n, row_bytes, chunks):
    """Rows per chunk: ``chunks`` itself (an int >= 1), or "auto": dask's ``array.chunk-size``
    (128 MiB by default) worth of rows."""
    if chunks == "auto":
        import dask

        from ..ops.memory import parse_memory

        target = parse_memory(dask.config.get("array.chunk-size"))
        return max(1, min(n, target // max(1, row_bytes)))
    if isinstance(chunks, bool) or not isinstance(chunks, (int, np.integer)) or chunks < 1:
        raise ValueError(f"chunks must be None, 'auto' or a number of rows >= 1, got {chunks!r}.")
    return int(chunks)


def _read(path, offset, dtype, shape, start, stop, member=None):
    """Rows ``start:stop`` of the C-order array of ``shape`` at byte ``offset`` of ``path`` (of the
    zip ``member``'s data when given: stored members are contiguous in the archive)."""
    row = int(np.prod(shape[1:], dtype=np.int64))
    with open(path, "rb") as fh:
        out = np.fromfile(fh, dtype=dtype, count=(stop - start) * row, offset=offset + start * row * dtype.itemsize)
    if out.size != (stop - start) * row:
        raise ValueError(f"{path}: the file is shorter than its header says (rows {start} to {stop - 1} missing).")
    return out.reshape((stop - start,) + tuple(shape[1:])).astype(dtype.newbyteorder("="), copy=False)


def raw_rows(path, offset, dtype, shape, chunks, flatten=False):
    """The array of ``shape`` and ``dtype`` at byte ``offset`` of ``path`` as a dask array, one task
    per row chunk (``chunks`` as in :func:`row_chunks`); ``flatten`` gives each row as one vector."""
    import dask
    import dask.array as da

    dtype = np.dtype(dtype)
    n = shape[0]
    row_shape = tuple(shape[1:])
    rows = row_chunks(n, int(np.prod(row_shape, dtype=np.int64)) * dtype.itemsize, chunks)
    read = dask.delayed(_read, pure=True)
    parts = [da.from_delayed(read(str(path), offset, dtype, shape, s, min(s + rows, n)),
                             shape=(min(s + rows, n) - s,) + row_shape, dtype=dtype.newbyteorder("="))
             for s in range(0, n, rows)]
    out = da.concatenate(parts) if parts else da.zeros((0,) + row_shape, dtype=dtype, chunks=1)
    return out.reshape(n, -1) if flatten and out.ndim > 2 else out


def _header(fh):
    """(shape, dtype) of the .npy array at the file position, leaving it at the data."""
    fmt = np.lib.format
    version = fmt.read_magic(fh)
    read = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
    shape, fortran, dtype = read(fh)
    if fortran or dtype.hasobject:
        raise ValueError("only C-order arrays of numbers can be read chunk by chunk; save them with np.save "
                         "from a C-contiguous numeric array.")
    return shape, dtype


def npy_rows(path, chunks):
    """A ``.npy`` file as a dask array read chunk by chunk."""
    with open(path, "rb") as fh:
        shape, dtype = _header(fh)
        offset = fh.tell()
    return raw_rows(path, offset, dtype, shape, chunks)


def npz_rows(path, key, chunks, budget):
    """Array ``key`` of an ``.npz`` archive as a dask array: read chunk by chunk when stored, whole
    (within ``budget`` bytes) when deflated."""
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(f"{key}.npy")
        with archive.open(info) as member:
            shape, dtype = _header(member)
            header = member.tell()
        if info.compress_type == zipfile.ZIP_STORED:
            with open(path, "rb") as fh:  # the member's data start after its local file header
                fh.seek(info.header_offset)
                local = fh.read(30)
                start = info.header_offset + 30 + int.from_bytes(local[26:28], "little") + int.from_bytes(
                    local[28:30], "little")
            return raw_rows(path, start + header, dtype, shape, chunks)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if nbytes > budget:
        raise ValueError(
            f"{path}: {key!r} ({nbytes / 2**20:.0f} MiB) is compressed, so it cannot be read chunk by chunk, "
            f"and it is larger than the memory budget ({budget / 2**20:.0f} MiB); store it uncompressed "
            f"(np.savez, or np.save to a .npy file) or as a zarr array, or raise max_memory.")
    with np.load(path, allow_pickle=False) as f:
        return in_chunks(f[key], chunks)


def in_chunks(a, chunks):
    """An array in memory as a dask array in row chunks (None stays None)."""
    if a is None:
        return None
    import dask.array as da

    a = np.asarray(a)
    rows = row_chunks(a.shape[0], a[:1].nbytes, chunks) if a.shape[0] else 1
    return da.from_array(a, chunks=(rows,) + a.shape[1:])
