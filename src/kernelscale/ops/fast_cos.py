"""A float64 cosine for random Fourier feature blocks, vectorised and threaded.

Every Fourier block is one GEMM and one cosine pass over its (rows x features) result. numpy's
float64 cosine is scalar code (its float32 cosine is SIMD), so on large random-feature models
the cosine, not the GEMM, sets the time (measurements: benchmarks/studies/compute_layer.md). :func:`cos_inplace` computes the same function with
arithmetic that the compiler vectorises and spreads over the cores (numba, a dependency;
without numba (a platform it does not support), or for small, float32 or non-contiguous arrays, it is
``np.cos``):

- range reduction: k = rint(x 2 / pi), r = x - k pi / 2 with pi / 2 split into three parts
  (Cody and Waite), the first two with 30 significant bits, so that k times each is exact for
  |k| < 2^22; r lies in [-pi / 4, pi / 4];
- cos r and sin r by their Taylor polynomials to r^18 and r^17, whose truncation error there
  (below 1e-19) is far under a unit in the last place;
- the quadrant k mod 4 picks cos r, -sin r, -cos r or sin r by two bit tests of the integer k,
  which the compiler turns into vector selects, not branches.

A Fourier block's phases and scale come with it: ``cos_inplace(a, offset, scale)`` computes
scale * cos(a + offset) row by row in one pass over ``a`` (the three numpy passes took 1.75x as
long on 16281 x 1024 values; the doubly stochastic fit on adult 11% less time in all).

Rows with few nonzeros (one-hot data such as adult's 14 of 123): :func:`sparse_cos_scores` and
:func:`sparse_cos_features` compute a Fourier block's projection from the nonzeros, one AXPY per
nonzero per row, with the phases, this cosine and the scale (or the products with the
coefficients) in the same loop, a tile of up to TILE_WIDTH features at a time, while the tile's
frequencies are in the caches (``kernelscale.ops.features`` chooses them: ``SPARSE_DENSITY``,
``SPARSE_DENSITY_FLOAT32``, ``SPARSE_WEIGHTS_BYTES``).

Threads: numba's OpenMP pool is told to sleep between loops (``OMP_WAIT_POLICY=PASSIVE``, set
on the first compile unless the environment already has it), since its spinning threads slowed
the BLAS products between the cosines; a process forked after the pool started uses ``np.cos``
(:func:`_after_fork_in_child`). The loops run on at most ``OMP_NUM_THREADS`` threads where that
is set (:func:`_cap_threads`): dask's nanny sets it to 1 in every worker, and joblib's process
workers to their share of the cores, so that native thread pools do not oversubscribe the host;
numba's own default is every core, whatever the process was given.

Accuracy: within 2 units in the last place of ``np.cos`` (tested), for |x| < 2^22 pi / 2
(6.6e6). The range is checked per segment of ``SEGMENT`` values inside the compiled loop, while
the segment is in cache (two separate passes for the array's min and max had cost more than the
cosine itself: 18 ms against 16 ms for 16281 x 1024 values on 2 cores); a segment holding a
larger value, an infinity or a NaN is left to ``np.cos``.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import os
import threading
from decimal import Decimal, localcontext

import numpy as np

__all__ = ["cos_inplace", "weight_tiles", "sparse_cos_scores", "sparse_cos_features", "available", "load",
           "loaded", "numpy_only", "RESIDENT_BYTES",
           "MIN_ROW", "MIN_ROWS", "MIN_SIZE", "LIMIT", "SEGMENT"]

#: arrays with fewer values use np.cos (the parallel loop's start-up costs more than it saves)
MIN_SIZE = 1 << 15
#: largest |x| the three-part reduction keeps exact: |k| < 2^22
LIMIT = 2.0**22 * math.pi / 2
#: values whose range is checked together (32 KiB: in cache for the polynomial pass that follows)
SEGMENT = 4096
#: the sparse loops' tiles of features (:func:`weight_tiles`): a tile's frequencies (d x its
#: width, float64) within this many bytes. Wider tiles ran faster, in cache or not (2 cores, 1 MiB
#: of L2 each; d = 784, 11% nonzeros: widths 32 / 80 / 160 / 256 took 411 / 317 / 274 / 243 ms
#: for 8192 rows x 4096 features)
TILE_BYTES = 1 << 22
#: the widest tile (adult, d = 123: widths 128 / 256 / 512 took 76 / 61 / 64 ms)
TILE_WIDTH = 256
#: rows a task of the sparse loops takes (fewer where the threads would not get two tasks each)
TILE_ROWS = 512

with localcontext() as _ctx:
    _ctx.prec = 50
    _HALF_PI = Decimal("1.57079632679489661923132169163975144209858469968755291048747")

    def _leading(value, bits):
        """``value`` rounded to ``bits`` significant bits (a float)."""
        mantissa, exponent = math.frexp(float(value))
        return math.ldexp(round(mantissa * 2**bits) / 2**bits, exponent)

    _C1 = _leading(_HALF_PI, 30)
    _C2 = _leading(_HALF_PI - Decimal(_C1), 30)
    _C3 = float(_HALF_PI - Decimal(_C1) - Decimal(_C2))
    _TWO_OVER_PI = float(1 / _HALF_PI)

# Taylor coefficients (-1)^j / (2j)! for cos and (-1)^j / (2j + 1)! for sin, j >= 1
_COS = tuple((-1) ** j / math.factorial(2 * j) for j in range(1, 10))
_SIN = tuple((-1) ** j / math.factorial(2 * j + 1) for j in range(1, 9))
_kernel = None
_rows_kernel = None  # the row kernel of cos_inplace(a, offset, scale), compiled with _kernel
_sparse_kernel = None  # the tiled kernel of sparse_cos_scores, compiled with _kernel
_sparse_features_kernel = None  # the tiled kernel of sparse_cos_features, compiled with _kernel
prange = range  # numba.prange once numba is imported (_compile)
_started = False  # the parallel kernel has been loaded in this process (its thread pool exists)
_compile_lock = threading.Lock()
_NUMPY_ONLY = contextvars.ContextVar("kernelscale_cos_numpy_only", default=False)
#: resident memory that loading the kernels adds to a process where numba is not yet imported:
#: importing numba 49 MiB, loading the parallel dense kernels 44 MiB (the sparse loops another 39;
#: measured on Linux, numba 0.68, 2 threads)
RESIDENT_BYTES = 96 * 2**20


def _compile():
    """The numba kernel (compiled on first use, once, whichever thread asks first; False
    without numba)."""
    if _kernel is not None:  # compiled (or known absent) already: no lock to take
        return _kernel
    with _compile_lock:
        return _kernel if _kernel is not None else _compile_once()


def _compile_once():
    global _kernel
    try:
        import numba
    except ImportError:
        _kernel = False
        return _kernel
    # GNU OpenMP's threads spin for a while after each parallel loop, on the cores the next GEMM's
    # BLAS threads need (and BLAS's spin on ours), which slowed a DSG fit's GEMM + cosine per block
    # several times (benchmarks/studies/compute_layer.md). Sleeping threads, unless the user chose
    # otherwise. libgomp reads it when it loads (numba loads it at the process's first parallel
    # call); it is also inherited by subprocesses and by OpenMP runtimes loaded later.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    global prange, _count_outside, _cos_segment  # read by _cos_loop when numba compiles it
    prange = numba.prange
    helper = numba.njit(nogil=True, fastmath=False, cache=True)
    # py_func: a second compile (after the kernel was reset) starts from the Python functions
    _count_outside = helper(getattr(_count_outside, "py_func", _count_outside))
    _cos_segment = helper(getattr(_cos_segment, "py_func", _cos_segment))
    global _add_row, _scale_row, _rows_kernel, _dot, _sparse_kernel, _sparse_features_kernel, _sparse_cos_tile
    _add_row = helper(getattr(_add_row, "py_func", _add_row))
    _scale_row = helper(getattr(_scale_row, "py_func", _scale_row))
    _dot = helper(getattr(_dot, "py_func", _dot))
    _sparse_cos_tile = helper(getattr(_sparse_cos_tile, "py_func", _sparse_cos_tile))
    parallel = numba.njit(parallel=True, nogil=True, fastmath=False, cache=True)
    _rows_kernel = parallel(_cos_rows_loop)
    _sparse_kernel = parallel(_sparse_scores_loop)
    _sparse_features_kernel = parallel(_sparse_features_loop)
    kernel = parallel(_cos_loop)
    _kernel = kernel
    return _kernel


def _ready():
    """The kernel for a call now: False inside :func:`numpy_only` until the kernels are loaded."""
    if _NUMPY_ONLY.get() and not _started:
        return False
    kernel = _compile()
    if kernel:
        _cap_threads()
    return kernel


def _omp_threads():
    """The thread count ``OMP_NUM_THREADS`` asks for (its first level), or None when unset or not
    a positive integer."""
    value = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


def _cap_threads():
    """Hold the calling thread's parallel loops at ``OMP_NUM_THREADS`` threads where it is set
    and numba would use more. numba's count is per calling thread (a dask worker runs its tasks
    on threads of its own), so it is checked on each call (about 2 us); it is never raised.
    Measured: a dask worker with one thread ran its cosines on both cores of a 2-core machine,
    so two such workers ran four threads there."""
    cap = _omp_threads()
    if cap is not None:
        import numba

        if numba.get_num_threads() > cap:
            numba.set_num_threads(cap)


@contextlib.contextmanager
def numpy_only():
    """Within the block, cosines not yet loaded are left to ``np.cos``: loading the compiled
    kernels (RESIDENT_BYTES) does not fit a small memory budget beside the call's arrays
    (kernelscale.base.warmup). Once loaded, they cost nothing more and are used."""
    token = _NUMPY_ONLY.set(True)
    try:
        yield
    finally:
        _NUMPY_ONLY.reset(token)


def loaded():
    """Whether the parallel kernels run in this process already (their memory is resident)."""
    return bool(_started and _kernel)


def available():
    """Whether the compiled kernels are there (numba installed; compiles them on first call)."""
    return bool(_ready())


def load(sparse=True):
    """Load (or compile) the parallel kernels now, e.g. before timing or before a memory plan
    (kernelscale.base.warmup); False without numba. ``sparse=False`` leaves out the loops over
    the nonzeros of sparse rows (about 40 MiB of resident memory and seconds of loading). This
    starts numba's thread pool: see :func:`_after_fork_in_child` for processes forked later."""
    global _started
    kernel = _compile()
    if kernel:
        from numba import types

        kernel.compile((types.float64[::1], types.uint8[::1]))
        _rows_kernel.compile((types.float64[:, ::1], types.float64[::1], types.float64, types.uint8[::1]))
        if sparse:
            rows = (types.int64[::1], types.int64[::1], types.float64[::1])
            tiles = (types.float64[:, :, ::1], types.float64[::1])
            _sparse_kernel.compile((*rows, *tiles, types.float64[:, ::1], types.float64[:, ::1], types.int64))
            _sparse_features_kernel.compile((*rows, *tiles, types.float64, types.float64[:, ::1], types.int64))
        kernel(np.zeros(2 * SEGMENT), np.zeros(2, dtype=np.uint8))  # starts the thread pool (its stacks)
        _started = True
    return bool(kernel)


def _after_fork_in_child():
    """A process forked after the parallel kernel was loaded cannot use it when numba's thread
    pool is GNU OpenMP's: libgomp aborts the child ("fork() called from a process already using
    GNU OpenMP"). Such a child computes its cosines with ``np.cos`` (as without numba)."""
    global _kernel, _compile_lock
    _compile_lock = threading.Lock()  # a fork while another thread compiled would leave it held
    if _started and _kernel:
        import numba

        if numba.threading_layer() == "omp":
            _kernel = False


os.register_at_fork(after_in_child=_after_fork_in_child)


def _cos_loop(flat, outside):
    """The loop :func:`_compile` compiles (module constants are compile-time constants): each
    segment of SEGMENT values whose values all lie in (-LIMIT, LIMIT) is replaced by its cosine;
    the others are left as they are and flagged in ``outside`` (one byte per segment). The
    per-segment loops are functions of their own: inlined into the parallel loop's body they
    were not vectorised (6x slower)."""
    n = flat.size
    for j in prange(outside.size):
        segment = flat[j * SEGMENT : min((j + 1) * SEGMENT, n)]
        if _count_outside(segment):
            outside[j] = 1
        else:
            _cos_segment(segment)


def _count_outside(segment):
    """How many values of ``segment`` are not in (-LIMIT, LIMIT) (NaN fails both comparisons)."""
    count = 0
    for i in range(segment.size):
        count += not (abs(segment[i]) < LIMIT)
    return count


def _cos_segment(segment):
    """cos of every value of ``segment``, in place (module docstring)."""
    a1, a2, a3, a4, a5, a6, a7, a8, a9 = _COS
    b1, b2, b3, b4, b5, b6, b7, b8 = _SIN
    for i in range(segment.size):
        x = segment[i]
        k = np.rint(x * _TWO_OVER_PI)
        r = ((x - k * _C1) - k * _C2) - k * _C3
        z = r * r
        s = r + r * z * (b1 + z * (b2 + z * (b3 + z * (b4 + z * (b5 + z * (b6 + z * (b7 + z * b8)))))))
        c = 1.0 + z * (a1 + z * (a2 + z * (a3 + z * (a4 + z * (a5 + z * (a6 + z * (a7 + z * (a8 + z * a9))))))))
        q = np.int64(k) & 3  # the quadrant, 0..3 (two's complement: k mod 4 for negative k too)
        v = s if q & 1 else c  # sin r in quadrants 1 and 3
        segment[i] = -v if (q + 1) & 2 else v  # negative in quadrants 1 and 2


def _cos_rows_loop(a, offset, scale, outside):
    """The row kernel: each row of ``a`` gets ``offset`` added, then, when all its values lie in
    (-LIMIT, LIMIT), their cosine times ``scale`` (1.0: no product); other rows are flagged in
    ``outside`` with the offset added only. The same arithmetic, operation by operation, as
    ``a += offset``, the segment kernel and ``a *= scale``: one pass over memory instead of three."""
    for r in prange(a.shape[0]):
        row = a[r]
        _add_row(row, offset)
        if _count_outside(row):
            outside[r] = 1
        else:
            _cos_segment(row)
            if scale != 1.0:
                _scale_row(row, scale)


def _sparse_scores_loop(indptr, indices, values, tiles, offset, coef_t, scores, step):
    """The tiled kernel of scores: for each tile of features and each row r of a task's ``step``
    rows, the tile's cos(offset + the sum of values[p] tiles[t, indices[p]] over the nonzeros p
    of row r) (:func:`_sparse_cos_tile`), its products with the rows of ``coef_t`` added to
    ``scores[r]`` (zeros on entry)."""
    n = indptr.size - 1
    count, _, width = tiles.shape
    for task in prange(-(-n // step)):
        acc = np.empty(width)
        first, stop = task * step, min(n, (task + 1) * step)
        for t in range(count):
            lo = t * width
            hi = min(offset.size, lo + width)
            tile, part, phases = tiles[t], acc[: hi - lo], offset[lo:hi]
            for r in range(first, stop):
                _sparse_cos_tile(part, tile, phases, indptr[r], indptr[r + 1], indices, values)
                for j in range(coef_t.shape[0]):
                    scores[r, j] += _dot(part, coef_t[j, lo:hi])


def _sparse_features_loop(indptr, indices, values, tiles, offset, scale, out, step):
    """The tiled kernel of features: row r of ``out`` gets scale * cos(offset + the sum of
    values[p] W[indices[p]] over the nonzeros p of row r), a tile of features at a time for a
    task's ``step`` rows (:func:`_sparse_cos_tile`)."""
    n = indptr.size - 1
    count, _, width = tiles.shape
    for task in prange(-(-n // step)):
        first, stop = task * step, min(n, (task + 1) * step)
        for t in range(count):
            lo = t * width
            hi = min(offset.size, lo + width)
            tile, phases = tiles[t], offset[lo:hi]
            for r in range(first, stop):
                part = out[r, lo:hi]
                _sparse_cos_tile(part, tile, phases, indptr[r], indptr[r + 1], indices, values)
                if scale != 1.0:
                    _scale_row(part, scale)


def _sparse_cos_tile(acc, tile, phases, start, stop, indices, values):
    """acc <- cos(phases + sum_p values[p] tile[indices[p], :acc.size]) over p = start .. stop - 1,
    two nonzeros a pass (half the loads and stores of acc); this module's cosine when every sum
    lies in (-LIMIT, LIMIT), else the C library's, value by value."""
    for i in range(acc.size):
        acc[i] = phases[i]
    p = start
    while p + 1 < stop:
        alpha, beta = values[p], values[p + 1]
        x, y = tile[indices[p]], tile[indices[p + 1]]
        for i in range(acc.size):
            acc[i] += alpha * x[i] + beta * y[i]
        p += 2
    if p < stop:
        alpha, x = values[p], tile[indices[p]]
        for i in range(acc.size):
            acc[i] += alpha * x[i]
    if _count_outside(acc):
        for i in range(acc.size):
            acc[i] = math.cos(acc[i])
    else:
        _cos_segment(acc)


def _dot(x, y):
    """sum_i x[i] y[i] in eight interleaved partial sums (a single sum's chain of dependent
    additions waits on each addition's latency)."""
    m = x.size
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = 0.0
    i = 0
    while i + 8 <= m:
        s0 += x[i] * y[i]
        s1 += x[i + 1] * y[i + 1]
        s2 += x[i + 2] * y[i + 2]
        s3 += x[i + 3] * y[i + 3]
        s4 += x[i + 4] * y[i + 4]
        s5 += x[i + 5] * y[i + 5]
        s6 += x[i + 6] * y[i + 6]
        s7 += x[i + 7] * y[i + 7]
        i += 8
    while i < m:
        s0 += x[i] * y[i]
        i += 1
    return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))


def _add_row(row, offset):
    for i in range(row.size):
        row[i] += offset[i]


def _scale_row(row, scale):
    for i in range(row.size):
        row[i] *= scale


#: rows shorter than this take the separate passes (the row kernel vectorises along a row)
MIN_ROW = 64
#: fewer rows take the separate passes too (the row kernel's threads share out the rows)
MIN_ROWS = 16


def cos_inplace(a, offset=None, scale=None):
    """cos(a) written into ``a`` (module docstring); returns ``a``. With ``offset`` (one value
    per column of the 2-d ``a``) and ``scale``: scale * cos(a + offset), the phases and the
    normalisation of a Fourier feature block, in one pass over ``a`` (numba, at least MIN_ROWS
    float64 rows of at least MIN_ROW values), bit for bit as the three operations in turn where
    the values lie in the kernel's range (beyond it, np.cos takes the row here and the segment
    there)."""
    global _started
    phases = None if offset is None else np.ascontiguousarray(offset, dtype=np.float64)
    if (phases is not None and phases.shape == a.shape[1:] and a.dtype == np.float64 and a.ndim == 2
            and a.shape[1] >= MIN_ROW and a.shape[0] >= MIN_ROWS and a.size >= MIN_SIZE and a.flags.c_contiguous
            and _ready()):
        _started = True
        outside = np.zeros(a.shape[0], dtype=np.uint8)
        _rows_kernel(a, phases, 1.0 if scale is None else float(scale), outside)
        for r in np.flatnonzero(outside):  # the offset is in; the cosine and scale left to numpy
            row = a[r]
            np.cos(row, out=row)
            if scale is not None:
                row *= scale
        return a
    if offset is not None:
        a += offset
    _cos(a)
    if scale is not None:
        a *= scale
    return a


def weight_tiles(weights):
    """The frequencies W (d, D) as the sparse loops take them: (ceil(D / w), d, w) float64 tiles
    of w consecutive columns, each contiguous, the last one zero-padded. w is the widest multiple
    of 16 up to TILE_WIDTH whose d x w values fit TILE_BYTES (at least 16; D when D is smaller).
    A task's rows pass over one tile at a time, which the caches keep near: over W as d rows of
    D values (adult's runs: 4 MB), a row at a time, the loops had taken 1.4x as long on adult.
    float32 frequencies are converted tile by tile."""
    weights = np.asarray(weights)
    d, D = weights.shape
    width = min(TILE_WIDTH, max(16, TILE_BYTES // (8 * max(d, 1)) // 16 * 16), max(D, 1))
    tiles = np.zeros((-(-D // width), d, width))
    for t, lo in enumerate(range(0, D, width)):
        part = weights[:, lo : lo + width]
        tiles[t, :, : part.shape[1]] = part
    return tiles


def sparse_cos_scores(rows, tiles, offset, coef):
    """cos(X W + offset) coef, (n, k) float64, for the rows of X given by their nonzeros,
    ``rows`` = (indptr (n + 1,), indices, values) as CSR arrays (int64, int64, float64), W (d, D)
    as :func:`weight_tiles` gives it and ``coef`` (D, k): a tile of features at a time, per row
    the phases, one AXPY per nonzero, the cosine and the k products while the tile is in
    cache (numba). Rows with few nonzeros (adult's one-hot 14 of 123) take a
    fraction of a dense GEMM's arithmetic, and no BLAS call alternates with the compiled loop
    (whose threads the BLAS's spinning threads slowed by 1.8x). The sums run in another order
    than a GEMM's: equal to rounding. ``indptr`` may be a slice of a larger matrix's (its first
    value above 0), indices and values then being the whole matrix's. Arrays that disagree in
    shape or layout, or indices beyond d, raise ValueError (the loop checks no bounds). Returns
    None without numba."""
    global _started
    if not _ready():
        return None
    _started = True
    indptr, indices, values = rows
    n = indptr.shape[0] - 1
    _check_sparse("sparse_cos_scores: rows (indptr (n + 1,), indices, values), tiles of W (d, D), offset (D,) "
                  "and coef (D, k)", rows, tiles, offset, n, coef.ndim == 2 and coef.shape[0] == offset.size)
    scores = np.zeros((n, coef.shape[1]))
    _sparse_kernel(indptr, indices, values, tiles, offset, np.ascontiguousarray(coef.T, dtype=np.float64), scores,
                   _rows_per_task(n))
    return scores


def sparse_cos_features(rows, tiles, offset, scale, out):
    """scale * cos(X W + offset) into ``out`` (n, D) float64 C-ordered, for the rows of X given by
    their nonzeros and W as :func:`weight_tiles` gives it, as :func:`sparse_cos_scores` takes
    them: a tile of features at a time, per row the phases, one AXPY per nonzero, the cosine and
    the scale in one numba loop (the features of a Fourier block on one-hot rows). Returns
    ``out``, or None without numba (nothing written)."""
    global _started
    if not _ready():
        return None
    _started = True
    agrees = out.ndim == 2 and out.shape[1] == offset.size and out.flags.c_contiguous and out.dtype == np.float64
    _check_sparse("sparse_cos_features: rows (indptr (n + 1,), indices, values), tiles of W (d, D), offset (D,) "
                  "and out (n, D)", rows, tiles, offset, out.shape[0] if agrees else -1, agrees)
    indptr, indices, values = rows
    _sparse_features_kernel(indptr, indices, values, tiles, offset, float(scale), out, _rows_per_task(out.shape[0]))
    return out


def _rows_per_task(n):
    """Rows a task of the sparse loops takes: TILE_ROWS, fewer where n rows would leave threads
    without two tasks each (a mini-batch of 256 rows: four tasks on two threads), 16 at least."""
    import numba

    return int(max(16, min(TILE_ROWS, -(-n // (2 * numba.get_num_threads())))))


def _check_sparse(arrays, rows, tiles, offset, n, agrees):
    """The compiled sparse loops check no bounds: their arrays' shapes, layouts and indices first
    (``arrays``: the function and the arrays it takes, for the message; ``agrees``: the
    caller's checks of its other arrays). The tiles' width D is ``offset``'s length."""
    indptr, indices, values = rows
    ok = (agrees and n >= 0 and indptr.shape == (n + 1,) and indptr.dtype == np.int64 and offset.ndim == 1
          and tiles.ndim == 3 and tiles.shape[2] > 0)
    if ok:
        used = indices[indptr[0] : indptr[-1]]
        ok = (indices.shape == values.shape and tiles.shape[0] == -(-offset.shape[0] // tiles.shape[2])
              and all(a.flags.c_contiguous for a in (*rows, tiles, offset))
              and all(a.dtype == t for a, t in zip((indices, values, tiles, offset), (np.int64,) + (np.float64,) * 3))
              and 0 <= indptr[0] <= indptr[-1] <= indices.size and not np.any(np.diff(indptr) < 0)
              and not (used.size and not 0 <= used.min() <= used.max() < tiles.shape[1]))
    if not ok:
        raise ValueError(f"{arrays} must agree and be C-contiguous, with indices within 0 .. d - 1.")


def _cos(a):
    """cos(a) in place: the segment kernel on large contiguous float64 arrays, else np.cos."""
    global _started
    if a.dtype != np.float64 or a.size < MIN_SIZE or not a.flags.c_contiguous:
        return np.cos(a, out=a)
    kernel = _ready()
    if not kernel:
        return np.cos(a, out=a)
    _started = True
    flat = a.reshape(-1)
    outside = np.zeros(-(-flat.size // SEGMENT), dtype=np.uint8)
    kernel(flat, outside)
    for j in np.flatnonzero(outside):
        segment = flat[j * SEGMENT : (j + 1) * SEGMENT]
        np.cos(segment, out=segment)
    return a
