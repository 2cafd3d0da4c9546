"""The Triton kernels of :mod:`kernelscale.ops.fused` (imports triton: loaded by that module on
first use only).

One program owns BM rows of X and a contiguous range of column tiles of Z (a split: several
programs share a row tile when the row tiles alone do not fill the GPU; each writes its partial
sums to its own slice of the output, summed afterwards, so results do not depend on timing).
For each tile of BN columns it computes the BM x BN kernel tile in registers and adds
K_tile @ V_tile to its accumulator; the kernel tile is never written to memory.

The host lays the operands out so that the tile loop needs no masks and no per-point loads:
X and Z have dp columns, a multiple of BK (zeros added), rows of X past n and of Z past m are
read as rows modulo n and m (finite kernel values, never stored, or multiplied by V's zero
rows), and V has zero rows up to a multiple of BN (and KP columns, zeros past the KC given).

:func:`distance_kernel` (GEMM-form kernels): the host's augmented operands make the tile's dot
product the kernel's argument u directly (the squared norms ride in two extra columns each, as a
TF32 head and a float32 tail, so that TF32 products keep them to float32 accuracy). SPLIT: the
host also split X and Z into TF32 heads (X, Z) and tails (XT, ZT), and each feature step is three
TF32 products read from memory as they are (Triton's own "tf32x3" splits in registers, which
the tile needs: ptxas spills), else one product of the given precision:

- KIND 0, Gaussian: u = -|x - z|^2 log2(e) / (2 sigma^2), k = 2^min(u, 0);
- KIND 2, 3, 4, Matern nu = 1/2, 3/2, 5/2: u = |x - z|^2,
  t = min(scale sqrt(max(u, 0)), S_MAX) (scale = sqrt(2 nu) / sigma), then
  k = exp(-t), (1 + t) exp(-t) or (1 + t + t^2 / 3) exp(-t).

:func:`l1_kernel` (the Laplacian, KIND 1): the L1 distance has no GEMM form, so the tile
accumulates |x_f - z_f| feature by feature (X and Z transposed: a feature of the tile's points
is a contiguous load; a BM x BN x BK broadcast reduced over BK puts the features across threads:
shuffles, ptxas shows), then k = 2^(-scale |x - z|_1) with scale = log2(e) / sigma (k = 1 at
distance 0 even when scale is infinite, as :class:`~kernelscale.kernels.LaplacianKernel`).
"""

import triton
import triton.language as tl


@triton.jit
def _profile(u, scale, S_MAX: tl.constexpr, KIND: tl.constexpr):
    """The kernel's elementwise function of the tile's dot products (GEMM-form kinds)."""
    if KIND == 0:
        k = tl.exp2(tl.minimum(u, 0.0))
    else:
        t = tl.minimum(tl.sqrt(tl.maximum(u, 0.0)) * scale, S_MAX)
        k = tl.exp2(t * (-1.4426950408889634))
        if KIND == 3:
            k = k * (1.0 + t)
        elif KIND == 4:
            k = k * (1.0 + t * (1.0 + t * (1.0 / 3.0)))
    return k


@triton.jit
def _offsets(pid, size, B: tl.constexpr, LARGE: tl.constexpr):
    """Indices of a tile (int32) and the rows it reads (modulo size; int64 where LARGE)."""
    idx = pid * B + tl.arange(0, B)
    read = idx % size
    if LARGE:
        read = read.to(tl.int64)
    return idx, read


@triton.jit
def _accumulate(kt, cols, V, ldv, acc, KC: tl.constexpr, KP: tl.constexpr, SUM: tl.constexpr,
                VPRECISION: tl.constexpr, LARGE: tl.constexpr):
    """acc += kt @ V[cols] (V's rows past m are zeros: no mask). SUM: V is stored transposed
    (KC, ldv) and each of its KC columns is a sum over the tile's columns (no tl.dot: its
    operands would take registers the tile needs); else V is (ldv, KP) and the product one
    tl.dot."""
    if LARGE:
        cols = cols.to(tl.int64)
    if SUM:
        kc = tl.arange(0, KP)
        for j in tl.static_range(KC):
            r = tl.sum(kt * tl.load(V + j * ldv + cols)[None, :], axis=1)
            if KP == 1:
                acc += r[:, None]
            else:
                acc += tl.where(kc[None, :] == j, r[:, None], 0.0)
    else:
        kc = tl.arange(0, KP)
        acc = tl.dot(kt, tl.load(V + cols[:, None] * KP + kc[None, :]), acc, input_precision=VPRECISION)
    return acc


@triton.jit
def _store(OUT, pid_s, rows, n, acc, KP: tl.constexpr):
    kc = tl.arange(0, KP)
    offsets = pid_s.to(tl.int64) * n * KP + rows.to(tl.int64)[:, None] * KP + kc[None, :]
    tl.store(OUT + offsets, acc, mask=(rows < n)[:, None])


# sizes are not specialised on (one compilation serves every n, m); d and the strides are
@triton.jit(do_not_specialize=["n", "m", "tiles_per_split"])
def distance_kernel(X, XT, Z, ZT, V, OUT, n, m, d, tiles_per_split, sxn, szm, ldv, scale,
                    KIND: tl.constexpr, S_MAX: tl.constexpr,
                    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, KC: tl.constexpr, KP: tl.constexpr,
                    SUM: tl.constexpr, SPLIT: tl.constexpr, PRECISION: tl.constexpr, VPRECISION: tl.constexpr,
                    LARGE: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_s = tl.program_id(1)
    rows, rows_in = _offsets(pid_m, n, BM, LARGE)
    kk = tl.arange(0, BK)
    acc = tl.zeros([BM, KP], dtype=tl.float32)
    first = pid_s * tiles_per_split
    last = tl.minimum(first + tiles_per_split, tl.cdiv(m, BN))
    for t in range(first, last):
        cols, cols_in = _offsets(t, m, BN, LARGE)
        x_off = rows_in[:, None] * sxn + kk[None, :]
        z_off = cols_in[None, :] * szm + kk[:, None]
        u = tl.zeros([BM, BN], dtype=tl.float32)
        for f in range(0, d, BK):
            if SPLIT:  # x z = xt zh + xh zt + xh zh (+ xt zt, below float32's rounding), in TF32
                xh = tl.load(X + x_off)
                zh = tl.load(Z + z_off)
                u = tl.dot(tl.load(XT + x_off), zh, u, input_precision="tf32")
                u = tl.dot(xh, tl.load(ZT + z_off), u, input_precision="tf32")
                u = tl.dot(xh, zh, u, input_precision="tf32")
            else:
                u = tl.dot(tl.load(X + x_off), tl.load(Z + z_off), u, input_precision=PRECISION)
            x_off += BK
            z_off += BK
        acc = _accumulate(_profile(u, scale, S_MAX, KIND), cols, V, ldv, acc, KC, KP, SUM, VPRECISION, LARGE)
    _store(OUT, pid_s, rows, n, acc, KP)


@triton.jit(do_not_specialize=["n", "m", "tiles_per_split"])
def l1_kernel(XT, ZT, V, OUT, n, m, d, tiles_per_split, ldx, ldz, ldv, scale,
              BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, KC: tl.constexpr, KP: tl.constexpr,
              SUM: tl.constexpr, VPRECISION: tl.constexpr, LARGE: tl.constexpr):
    """XT (d, ldx) and ZT (d, ldz): X and Z transposed, so that a feature of the tile's points is
    one contiguous load; each feature adds |x_f - z_f| to the tile (BK features unrolled)."""
    pid_m = tl.program_id(0)
    pid_s = tl.program_id(1)
    rows, rows_in = _offsets(pid_m, n, BM, LARGE)
    acc = tl.zeros([BM, KP], dtype=tl.float32)
    first = pid_s * tiles_per_split
    last = tl.minimum(first + tiles_per_split, tl.cdiv(m, BN))
    for t in range(first, last):
        cols, cols_in = _offsets(t, m, BN, LARGE)
        x_ptr = XT + rows_in
        z_ptr = ZT + cols_in
        s = tl.zeros([BM, BN], dtype=tl.float32)
        for f in range(0, d, BK):
            for j in tl.static_range(BK):
                s += tl.abs(tl.load(x_ptr + j * ldx)[:, None] - tl.load(z_ptr + j * ldz)[None, :])
            x_ptr += BK * ldx
            z_ptr += BK * ldz
        positive = s > 0.0
        kt = tl.where(positive, tl.exp2(-(tl.where(positive, s, 1.0) * scale)), 1.0)  # no 0 * inf
        acc = _accumulate(kt, cols, V, ldv, acc, KC, KP, SUM, VPRECISION, LARGE)
    _store(OUT, pid_s, rows, n, acc, KP)
