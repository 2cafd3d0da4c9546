"""Fused kernel products on CUDA: K(X, Z) @ V and the row sums of K(X, Z), in Triton.

The blocked product of :mod:`kernelscale.ops.kernel` writes each kernel block to memory and
passes over it several times (distances, profile, product). Here the kernel's entries are
computed inside the tile loop of the distance GEMM (the dot products of augmented operands,
which carry the squared norms, then the kernel's elementwise function, then the product with V
and the row sums), and the kernel block is never written to GPU memory: the work is one GEMM's
reads of X and Z, a few per cent more arithmetic for k <= 16 right-hand sides, and
O((n + m) (d + k)) memory. The kernels and their layout: :mod:`kernelscale.ops._fused_triton`.

Kernels: :class:`~kernelscale.kernels.GaussianKernel`, :class:`~kernelscale.kernels.LaplacianKernel`
(the L1 distance, as that class computes it: sums of |x_f - z_f|, no GEMM form) and
:class:`~kernelscale.kernels.MaternKernel` with nu = 1/2, 3/2, 5/2; the same formulas, the same
centring of X and Z at Z's mean for the GEMM form, the same clamps (squared distances at 0,
Matern's s at S_MAX). float32 inputs, float32 accumulation.

``precision`` (of the tile products ``tl.dot``; see :func:`fused_matvec`):

- "ieee": float32 fused multiply-adds, as torch's float32 GEMM (no tensor cores);
- "tf32x3" (the default): each float32 operand split (once, before the products) into a TF32
  head (rounded to 10 mantissa bits) and a tail, three tensor-core products (tail*head +
  head*tail + head*head) accumulated in float32; what is dropped (tail*tail, and the tails'
  own TF32 rounding) is below 2^-21 of each product, so the error is float32's;
- "tf32" (``allow_tf32=True``): one TF32 product (inputs cut to 10 mantissa bits) for the
  distances, as torch's float32 matmuls with ``torch.backends.cuda.matmul.allow_tf32 = True``;
  the squared norms keep float32 accuracy (a head and a tail each) and the product with V is
  float32's either way (float32 sums, or Triton's "tf32x3" tl.dot beyond SUM_PATH_MAX_K).

Error (max |K V - float64 formula| / max |float64 formula|, normal 784-d points, sigma = 28, V
normal). Emulated on the CPU (operands cut to TF32 as the tensor cores read them, products in
float64: the inputs' rounding only; 512 x 20000 points, the computation of
tests/test_fused.py::test_tf32_operands_emulated_keep_their_error_bounds): "tf32x3" 7.6e-7 (Gaussian), 6.5e-7
(Matern 3/2), 5.4e-7 (Matern 1/2), as the float32 GEMM form's 7.5e-7, 6.7e-7, 5.5e-7; "tf32"
5.0e-5, 4.4e-5, 3.6e-5 (tests/test_fused.py keeps these bounds). Measured on an
H100 against torch's float64 formula (2048 rows of 40000 x 784 points,
``benchmarks/perf/fused.py``, ``benchmarks/results/fused-matvec.json``), Gaussian: "ieee"
3.3e-6 (k = 1) and 3.2e-7 (k = 10), "tf32x3" 5.0e-6 and 6.8e-7, "tf32" 6.0e-4 and 6.7e-5, where
the blocked float32 product gives 1.4e-5 and 2.2e-6. The Laplacian's L1 tile is float32 arithmetic whatever the precision. In
Triton's interpreter (every precision computed in float32) the tests find <= 2e-6 against
scikit-learn's float64 formulas; the kernels compile for sm_90 (H100) ahead of time without
register spills in the CONFIGS below (ptxas -v).

Triton is imported on first use only: this module imports (and :func:`fused_available` answers
False) where triton or CUDA is absent. Under Triton's interpreter (TRITON_INTERPRET=1 when triton
is first imported) :func:`fused_matvec` runs the same kernels on CPU tensors (slow: for tests
only), and :func:`fused_available` answers False.
"""

from __future__ import annotations

import importlib.util
import math
import os

import numpy as np

__all__ = ["fused_available", "fused_matvec", "fused_kernel_spec", "triton_available", "interpreting", "PRECISIONS"]

PRECISIONS = ("ieee", "tf32x3", "tf32")
#: the default precision of the tile products: float32-level error (module docstring)
DEFAULT_PRECISION = "tf32x3"
#: right-hand sides per pass (more are done in passes of this many, each recomputing K)
MAX_K_PER_PASS = 32
#: Matern's s = sqrt(2 nu) r is clamped here (as MaternKernel.S_MAX: k is 0 beyond it)
S_MAX = 1e4
#: X and Z are laid out with rows of a multiple of this many columns (zeros added: no change
#: to distances), so that the tiles' loads are aligned
ALIGN = 16
#: products with at most this many columns of V (a column of ones for the row sums included)
#: are sums over each tile's columns, one per column of V; with more, one tl.dot per tile, V
#: padded to 16 columns or more (whose operands take registers the tile needs: on an H100 the
#: tf32x3 tl.dot spills, ptxas says)
SUM_PATH_MAX_K = 16
#: splits of the columns are chosen so that at least this many programs per SM run
PROGRAMS_PER_SM = 8
#: a split spans at least this many column tiles
MIN_TILES_PER_SPLIT = 8

_FLOAT32_MAX = float(np.finfo(np.float32).max)
_LOG2E = 1.4426950408889634

#: tile configurations: (BM, BN, BK, num_warps, num_stages), per (kernel family, precision):
#: the fastest on an H100 of those that compile for sm_90 without register spills for k <= 16
#: (``benchmarks/perf/fused.py --sweep``, Gaussian, k = 10, 40000 x 784)
CONFIGS = {
    ("gemm", "ieee"): (128, 128, 32, 8, 3),
    ("gemm", "tf32x3"): (128, 256, 16, 8, 3),
    ("gemm", "tf32"): (128, 256, 32, 8, 3),
    ("l1", None): (128, 64, 8, 4, 2),
}
_INTERPRETER_CONFIG = (32, 32, 16, 4, 1)  # small tiles: fast under the interpreter
_INTERPRETER_L1_CONFIG = (32, 32, 4, 4, 1)


# ----------------------------------------------------------------------------------------------
# availability


def triton_available():
    """True when triton can be imported (it ships with torch's CUDA builds)."""
    return importlib.util.find_spec("triton") is not None


def fused_kernel_spec(kernel):
    """(kind, sigma, nu) for a kernel the fused product computes, None for any other (including a
    kernel whose sigma is still "median", or a subclass, whose formula may differ)."""
    from ..kernels import GaussianKernel, LaplacianKernel, MaternKernel

    kind = type(kernel)
    if kind not in (GaussianKernel, LaplacianKernel, MaternKernel):
        return None
    sigma = kernel.sigma
    if isinstance(sigma, (str, bool)) or not isinstance(sigma, (int, float, np.floating, np.integer)):
        return None
    sigma = float(sigma)
    if not (math.isfinite(sigma) and sigma > 0):
        return None
    if kind is MaternKernel:
        if kernel.nu not in (0.5, 1.5, 2.5):
            return None
        return ("matern", sigma, float(kernel.nu))
    return ("gaussian" if kind is GaussianKernel else "laplacian", sigma, None)


def fused_available(device, kernel=None):
    """True when :func:`fused_matvec` runs compiled on ``device`` (a CUDA torch device, torch
    and triton importable) for ``kernel`` (when given: a supported, resolved kernel)."""
    if kernel is not None and fused_kernel_spec(kernel) is None:
        return False
    if not triton_available():
        return False
    try:
        import torch
    except ImportError:
        return False
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        return False
    return dev.type == "cuda" and torch.cuda.is_available() and not interpreting()


def interpreting():
    """True when Triton runs its interpreter (TRITON_INTERPRET=1, read by triton when it is
    first imported: one mode per process)."""
    return os.environ.get("TRITON_INTERPRET", "0").lower() not in ("", "0", "false", "off", "no")


def _kernels():
    from . import _fused_triton  # imports triton

    return _fused_triton


# ----------------------------------------------------------------------------------------------
# the product


def _check(X, Z, V):
    import torch

    for name, a in (("X", X), ("Z", Z), ("V", V)):
        if not isinstance(a, torch.Tensor):
            raise TypeError(f"fused_matvec takes torch tensors; {name} is a {type(a).__name__}.")
        if a.dtype != torch.float32:
            raise ValueError(f"fused_matvec computes in float32; {name} is {a.dtype} (cast it, or use kernel_matvec).")
    if X.ndim != 2 or Z.ndim != 2 or X.shape[1] != Z.shape[1]:
        raise ValueError(f"X and Z must be 2-d with the same number of features; got {tuple(X.shape)} and "
                         f"{tuple(Z.shape)}.")
    if V.ndim not in (1, 2) or V.shape[0] != Z.shape[0]:
        raise ValueError(f"V must have shape ({Z.shape[0]},) or ({Z.shape[0]}, k); got {tuple(V.shape)}.")
    if not (X.device == Z.device == V.device):
        raise ValueError(f"X, Z and V must be on one device; got {X.device}, {Z.device}, {V.device}.")


def _ceil(a, b):
    return -(-a // b) * b


def _width(spec, d, BK):
    """Features of the operands: d (+ the 4 norm columns of the GEMM form), rounded up to a
    multiple of BK (and of ALIGN for the GEMM form, whose rows are loaded as vectors)."""
    if spec[0] == "laplacian":
        return _ceil(d, BK)
    return _ceil(d + 4, max(BK, ALIGN))


def _kp(columns):
    """(KP, SUM): the accumulator's columns for a pass over ``columns`` columns of V, and whether
    the product is a sum per column (up to SUM_PATH_MAX_K columns) or one tl.dot (V padded to a
    power of two >= 16 columns, tl.dot's smallest width)."""
    if columns <= SUM_PATH_MAX_K:
        return 1 << (columns - 1).bit_length(), True
    return max(16, 1 << (columns - 1).bit_length()), False


def _float32(value):
    """A scalar argument as float32 takes it: beyond its range, inf (no overflow warning)."""
    return value if abs(value) <= _FLOAT32_MAX else math.copysign(math.inf, value)


def _head_tail(a):
    """(head, tail): a's float32 values split into a TF32 head (rounded to 10 mantissa bits, the
    low 13 cleared) and the float32 rest (|tail| <= 2^-11 |a|), so that a TF32 product of the
    head is exact and one of the tail loses at most 2^-22 |a|."""
    import torch

    bits = a.view(torch.int32)
    head = torch.bitwise_and(bits + 4096, -8192).view(torch.float32)  # to nearest (ties away)
    return head, a - head


def _operands(spec, X, Z, center, dp):
    """(Xa, Za, scale): X and Z laid out for the kernels (dp columns), None where the GEMM form
    would overflow float32.

    GEMM form (x, z centred at ``center``, Z's mean by default; Z taken as centred when a centre
    is given): Gaussian, Xa = [2 c x, a_head, a_tail, 1, 1, 0...] and Za = [z, 1, 1, b_head,
    b_tail, 0...] with c = log2(e) / (2 sigma^2), a = -c |x|^2, b = -c |z|^2, so Xa . Za = -c
    |x - z|^2; Matern, Xa = [x, a_head, a_tail, 1, 1, 0...] and Za = [-2 z, 1, 1, b_head, b_tail,
    0...] with a = |x|^2, b = |z|^2, so Xa . Za = |x - z|^2. Laplacian: X and Z with zero columns.
    """
    import torch

    kind, sigma, nu = spec
    (n, d), m = X.shape, Z.shape[0]
    if kind == "laplacian":  # transposed (_fused_triton.l1_kernel)
        return _transposed(X, dp), _transposed(Z, dp), _float32(_LOG2E / sigma)
    Xa = torch.zeros((n, dp), dtype=torch.float32, device=X.device)
    Za = torch.zeros((m, dp), dtype=torch.float32, device=X.device)
    if center is None:
        center = Z.mean(dim=0)
        torch.sub(Z, center, out=Za[:, :d])
    else:
        Za[:, :d] = Z
    torch.sub(X, center, out=Xa[:, :d])
    a = torch.einsum("ij,ij->i", Xa[:, :d], Xa[:, :d])
    b = torch.einsum("ij,ij->i", Za[:, :d], Za[:, :d])
    limit = _FLOAT32_MAX / 8
    big = max(float(a.max()), float(b.max()))
    if not big <= limit:
        return None
    if kind == "gaussian":
        c = _LOG2E / (2.0 * sigma * sigma)
        if not (math.isfinite(c) and c * big <= limit):
            return None
        a.mul_(-c)
        b.mul_(-c)
        Xa[:, :d] *= 2.0 * c
        scale = 1.0
    else:
        Za[:, :d] *= -2.0
        scale = math.sqrt(2.0 * nu) / sigma
        if not math.isfinite(scale):
            return None
    Xa[:, d], Xa[:, d + 1] = _head_tail(a)
    Xa[:, d + 2 : d + 4] = 1.0
    Za[:, d : d + 2] = 1.0
    Za[:, d + 2], Za[:, d + 3] = _head_tail(b)
    return Xa, Za, _float32(scale)


def _transposed(A, dp):
    """A^T with dp rows (zeros after A's d) of a multiple of ALIGN columns (zeros after A's n)."""
    import torch

    n, d = A.shape
    out = torch.zeros((dp, _ceil(n, ALIGN)), dtype=A.dtype, device=A.device)
    out[:d, :n] = A.T
    return out


def _splits(n_row_tiles, n_col_tiles, device, interpret):
    """Programs per row tile: enough (each over at least MIN_TILES_PER_SPLIT column tiles) for
    PROGRAMS_PER_SM programs per SM."""
    if interpret:
        return 1
    import torch

    sms = torch.cuda.get_device_properties(device).multi_processor_count
    want = -(-PROGRAMS_PER_SM * sms // n_row_tiles)
    return max(1, min(want, n_col_tiles // MIN_TILES_PER_SPLIT))


def fused_matvec(kernel, X, Z, V, *, row_sums=False, precision=None, allow_tf32=False, center=None,
                 config=None, splits=None, check_overflow=True):
    """K(X, Z) @ V by the fused Triton kernels (module docstring), on torch tensors.

    Parameters
    ----------
    kernel : GaussianKernel, LaplacianKernel or MaternKernel (nu in 1/2, 3/2, 5/2), resolved
    X : float32 tensor (n, d)
    Z : float32 tensor (m, d), on X's device
    V : float32 tensor (m,) or (m, k)
    row_sums : bool
        Also return K(X, Z) @ 1 (n,) (computed as one more column of V).
    precision : "ieee", "tf32x3" or "tf32", default DEFAULT_PRECISION
        The tile products' precision; errors in the module docstring (float32's for "ieee" and
        "tf32x3", about 5e-5 relative for "tf32").
    allow_tf32 : bool
        ``precision="tf32"`` when no precision is given.
    center : tensor (d,) or None
        The point the GEMM-form kernels centre X and Z at (default Z's mean, as the blocked path);
        ``Z`` is taken as already centred when given (a prepared set's centred copy).
    config : (BM, BN, BK, num_warps, num_stages) or None
        Tile configuration (default: CONFIGS); for tuning.
    splits : int or None
        Programs per row tile (default: enough to fill the GPU).
    check_overflow : bool
        Raise a ValueError where a squared norm or its scaling overflows float32 (the blocked
        path rescales such inputs; the fused one does not); False: return None then.

    Returns
    -------
    tensor (n,) or (n, k) on X's device (and the row sums (n,) when ``row_sums``). On a CPU tensor
    the kernels run in Triton's interpreter (tests).
    """
    spec = fused_kernel_spec(kernel)
    if spec is None:
        raise ValueError(
            f"fused_matvec computes GaussianKernel, LaplacianKernel and MaternKernel(nu=0.5, 1.5, 2.5) "
            f"with a numeric sigma; got {kernel!r}."
        )
    _check(X, Z, V)
    if precision is None:
        precision = "tf32" if allow_tf32 else DEFAULT_PRECISION
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}; got {precision!r}.")
    result = _fused(spec, X, Z, V, row_sums, precision, center, config, splits)
    if result is None and check_overflow:
        raise ValueError(
            "fused_matvec: a squared norm of X or Z (or its scaling by the kernel's bandwidth) "
            "overflows float32; use kernel_matvec, which rescales such inputs."
        )
    return result


def _fused(spec, X, Z, V, row_sums, precision, center, config, splits):
    """fused_matvec after its checks; None where the GEMM form would overflow."""
    import torch

    device = X.device
    interpret = interpreting()
    if device.type != "cuda" and not interpret:
        raise ValueError(
            f"fused_matvec runs on CUDA tensors, or on {device.type} tensors in Triton's interpreter "
            f"(TRITON_INTERPRET=1 before triton is imported: tests only)."
        )
    vector = V.ndim == 1
    V2 = V[:, None] if vector else V
    (n, d), m, k = X.shape, Z.shape[0], V2.shape[1]
    if n == 0 or m == 0 or (k == 0 and not row_sums):
        out = torch.zeros((n, k), dtype=torch.float32, device=device)
        return _shape(out, torch.zeros(n, dtype=torch.float32, device=device), vector, row_sums)
    if row_sums:  # the row sums are one more column of V
        V2 = torch.cat([V2, torch.ones((m, 1), dtype=torch.float32, device=device)], dim=1)
    family = "l1" if spec[0] == "laplacian" else "gemm"
    if config is None:
        if interpret:
            config = _INTERPRETER_L1_CONFIG if family == "l1" else _INTERPRETER_CONFIG
        else:
            config = CONFIGS[(family, None if family == "l1" else precision)]
    BM, BN, BK, num_warps, num_stages = config
    dp = _width(spec, d, BK)
    operands = _operands(spec, X, Z, center, dp)
    if operands is None:
        return None
    Xa, Za, scale = operands
    split = None
    if precision == "tf32x3" and family == "gemm":  # heads and tails, read as they are (_fused_triton)
        split = (*_head_tail(Xa), *_head_tail(Za))
        del Xa, Za
        Xa, Za = split[0], split[2]
    mod = _kernels()
    n_col_tiles = -(-m // BN)
    S = splits or _splits(-(-n // BM), n_col_tiles, device, interpret)
    S = max(1, min(int(S), n_col_tiles))
    grid = (-(-n // BM), S)
    per_split = -(-n_col_tiles // S)
    options = {} if interpret else dict(num_warps=num_warps, num_stages=num_stages)
    vprecision = "ieee" if precision == "ieee" else "tf32x3"
    out = torch.empty((n, V2.shape[1]), dtype=torch.float32, device=device)
    for start in range(0, V2.shape[1], MAX_K_PER_PASS):
        width = min(MAX_K_PER_PASS, V2.shape[1] - start)
        kp, by_sum = _kp(width)
        rows = n_col_tiles * BN  # V's rows, zeros past m
        if by_sum:  # transposed: (width, rows)
            Vp = torch.zeros((width, rows), dtype=torch.float32, device=device)
            Vp[:, :m] = V2[:, start : start + width].T
        else:
            Vp = torch.zeros((rows, kp), dtype=torch.float32, device=device)
            Vp[:m, :width] = V2[:, start : start + width]
        part = torch.empty((S, n, kp), dtype=torch.float32, device=device)
        large = max(Xa.numel(), Za.numel(), part.numel(), Vp.numel()) >= 2**31 - 1
        common = dict(BM=BM, BN=BN, BK=BK, KC=width, KP=kp, SUM=by_sum, VPRECISION=vprecision, LARGE=large,
                      **options)
        args = (Xa, Za, Vp, part, n, m, dp, per_split, Xa.stride(0), Za.stride(0), rows, scale)
        if family == "l1":  # X^T, Z^T: the strides are their rows'
            mod.l1_kernel[grid](*args, **common)
        else:
            kind = 0 if spec[0] == "gaussian" else {0.5: 2, 1.5: 3, 2.5: 4}[spec[2]]
            Xh, Xt, Zh, Zt = split if split is not None else (Xa, Xa, Za, Za)
            mod.distance_kernel[grid](Xh, Xt, Zh, Zt, *args[2:], KIND=kind, S_MAX=S_MAX, SPLIT=split is not None,
                                      PRECISION=precision, **common)
        out[:, start : start + width] = (part.sum(dim=0) if S > 1 else part[0])[:, :width]
    if row_sums:
        out, sums = out[:, :k], out[:, k]
    else:
        sums = None
    return _shape(out, sums, vector, row_sums)


def _shape(out, sums, vector, row_sums):
    out = out[:, 0] if vector else out
    return (out, sums) if row_sums else out
