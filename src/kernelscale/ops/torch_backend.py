"""The torch backend: kernel and feature blocks on a torch device (a GPU, or torch's CPU kernels).

Imported only when a torch device is asked for (``device="cuda"``, ``"cpu"``, a torch tensor as
input), so ``import kernelscale`` never imports torch. What runs where:

- on the device: the prepared point set of a :class:`~kernelscale.ops.kernel.KernelOperator`,
  every kernel block and its products (matvec and predict fused on a CUDA device in float32
  where FUSED_PRODUCTS says so: :meth:`TorchBackend.fused_product`; the LS-SVM row block and
  its Gram, SLKL's column Gram), the projections and trigonometric passes of random-feature
  blocks, and the weighted moments of feature rows;
- on the host, in numpy: random draws (float64, then cast: a seeded block is the same on every
  device), the TensorSketch count sketches and FFTs, the small factorisations of the solvers
  (J x J, M x M, p x p, with scipy: faster there at these sizes, and in float64), and every
  solver's own state. The exception: a ridge solve of order DEVICE_SOLVE_ORDER or more on a CUDA
  device (the preconditioned doubly stochastic step at the authors' blocks of 8192 features)
  runs there, in float64, where the host's Cholesky took half the stream's time. Operators take
  and return numpy arrays; only blocks stay on the device.

The kernel formulas of :mod:`kernelscale.kernels` run on tensors through
:mod:`kernelscale.ops.torch_namespace` (numpy's names, numpy's ``out=`` semantics).
"""

from __future__ import annotations

import numpy as np
import torch
from scipy import linalg

from .ridge import RIDGE_RETRIES, ridge_solve
from .torch_namespace import TORCH_XP, TorchNamespace, numpy_dtype, torch_dtype
from .memory import available_memory

#: a ridge solve of at least this order on a device of these types runs there (module docstring)
DEVICE_SOLVE_ORDER = 2048
DEVICE_SOLVE_TYPES = ("cuda",)
#: kernel products K(A, Z) @ V on a device of FUSED_DEVICE_TYPES in float32 run fused
#: (kernelscale.ops.fused: the kernel block never written to memory) for these kernels, with at
#: most FUSED_MAX_K right-hand sides and at least FUSED_MIN_FLOPS of distance work (2 n m d:
#: below it, the first call's compilation would cost more than the product saves), when
#: FUSED_PRODUCTS is True: faster than the blocked product on an H100 for every kernel measured
#: (benchmarks/studies/compute_layer.md, benchmarks/results/fused-matvec.json)
FUSED_PRODUCTS = True
FUSED_DEVICE_TYPES = ("cuda",)
FUSED_KERNELS = ("gaussian", "laplacian", "matern")
FUSED_MAX_K = 64
FUSED_MIN_FLOPS = 1e10

__all__ = ["TorchBackend", "TorchNamespace", "TORCH_XP", "torch_dtype", "numpy_dtype", "resolve_device"]

def resolve_device(device):
    """A torch.device for "cpu", "cuda", "cuda:N", "auto" (CUDA when visible, else None: numpy)
    or a torch.device; a ValueError naming ``device`` when that device is not available."""
    if device == "auto":
        return torch.device("cuda") if torch.cuda.is_available() else None
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"device={device!r} is not a device; use None, 'auto', 'cpu', 'cuda' or 'cuda:N'.") from err
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device={device!r} but torch sees no CUDA GPU; use device=None or 'cpu'.")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"device={device!r} but torch sees {torch.cuda.device_count()} CUDA GPU(s).")
    elif dev.type != "cpu":
        raise ValueError(f"device={device!r}: only 'cpu' and CUDA devices are supported.")
    return dev


class TorchBackend:
    """Arrays on a torch device; operators hand numpy arrays in and get numpy arrays back."""

    name = "torch"
    xp = TORCH_XP

    def __init__(self, device):
        self.device = torch.device(device)

    def empty(self, shape, dtype):
        return torch.empty(shape, dtype=torch_dtype(dtype), device=self.device)

    def zeros(self, shape, dtype):
        return torch.zeros(shape, dtype=torch_dtype(dtype), device=self.device)

    def asarray(self, a, dtype=None):
        """``a`` (numpy or torch) as a contiguous tensor on the device, of ``dtype`` if given."""
        dtype = None if dtype is None else torch_dtype(dtype)
        return torch.as_tensor(a, dtype=dtype, device=self.device).contiguous()

    def matmul(self, a, b, out=None):
        a, b = self.asarray(a), self.asarray(b)
        if b.dtype != a.dtype:  # numpy's rule: both in the wider dtype
            dtype = torch.promote_types(a.dtype, b.dtype)
            a, b = a.to(dtype), b.to(dtype)
        return torch.matmul(a, b, out=out) if out is not None else torch.matmul(a, b)

    def cos(self, a, out=None):
        return torch.cos(a, out=out) if out is not None else torch.cos(a)

    def sin(self, a, out=None):
        return torch.sin(a, out=out) if out is not None else torch.sin(a)

    def phase_cos(self, a, offset, scale=None):
        """a <- scale * cos(a + offset) in place (as the numpy backend's)."""
        a += self.asarray(offset)
        torch.cos(a, out=a)
        if scale is not None:
            a *= scale
        return a

    def ridge_solve(self, C, G, ridge, overwrite=False):
        """(C + ridge I)^{-1} G, a float64 host array (as the numpy backend's): on the device in
        float64 on a device of DEVICE_SOLVE_TYPES at an order of at least DEVICE_SOLVE_ORDER,
        else on the host. ``overwrite``: C (a float64 tensor there) may be used as the work
        space (one D x D array less)."""
        D = C.shape[0]
        if self.device.type not in DEVICE_SOLVE_TYPES or D < DEVICE_SOLVE_ORDER:
            return ridge_solve(np.asarray(self.to_numpy(C), dtype=np.float64), G, ridge)
        A = self.asarray(C, np.float64)
        shared = A is C or (isinstance(C, np.ndarray) and A.data_ptr() == C.__array_interface__["data"][0])
        if shared and not overwrite:  # the caller's C stays as it was (torch's CPU shares numpy's memory)
            A = A.clone()
        if not bool(torch.isfinite(A).all()):
            return np.full(G.shape, np.nan)
        Gd = self.asarray(G, np.float64)
        added = 0.0  # the ridge on A's diagonal so far: A + I ridge is formed in place, once per try
        for _ in range(RIDGE_RETRIES + 1):
            A.diagonal().add_(ridge - added)
            added = ridge
            L, info = torch.linalg.cholesky_ex(A)
            if int(info) == 0:
                return self.to_numpy(torch.cholesky_solve(Gd, L))
            del L
            ridge *= 10.0
        return linalg.lstsq(self.to_numpy(A), G, check_finite=False)[0]  # on the host, as numpy's

    def fused_product(self, kernel, A, prepared, V, budget):
        """K(A, Z) @ V for the prepared Z by the fused kernels (:mod:`kernelscale.ops.fused`), as
        a host array, in row chunks of A within ``budget`` bytes; None where they do not pay or
        do not apply (see FUSED_PRODUCTS; also norms that overflow float32, a budget too small
        for one row): the caller's blocked product runs then. TF32 products where torch allows
        them for float32 matmuls (``torch.backends.cuda.matmul.allow_tf32``), as the blocked
        product's."""
        V = np.asarray(V)
        (n, d), m, k = A.shape, prepared.n_points, 1 if V.ndim == 1 else V.shape[1]
        if (not FUSED_PRODUCTS or self.device.type not in FUSED_DEVICE_TYPES or prepared.dtype != np.float32
                or V.dtype != np.float32 or k > FUSED_MAX_K or 2.0 * n * m * d < FUSED_MIN_FLOPS):
            return None
        from . import fused

        spec = fused.fused_kernel_spec(kernel)
        if spec is None or spec[0] not in FUSED_KERNELS or not fused.fused_available(self.device):
            return None
        if spec[0] == "laplacian":
            Z, center = prepared.data, None
        else:  # the prepared set's centred copy of Z (a view of its augmented operand)
            Z, center = prepared.aux[:, :d], prepared.center
        fixed, per_row = self.fused_product_bytes(d, m, k)  # V's device copy included
        step = (budget - fixed) // per_row
        if step < 1:
            return None
        precision = "tf32" if torch.backends.cuda.matmul.allow_tf32 else None
        Vd, out = self.asarray(V), np.empty((n,) + V.shape[1:], dtype=np.float32)
        for start in range(0, n, step):
            stop = min(start + step, n)
            part = fused.fused_matvec(kernel, self.asarray(A[start:stop], np.float32), Z, Vd, precision=precision,
                                      center=center, check_overflow=False)
            if part is None:
                return None
            out[start:stop] = self.to_numpy(part)
        return out

    def fused_product_bytes(self, n_features, n_points, k):
        """(fixed, per row of A): upper bounds of the bytes :meth:`fused_product` holds for Z's
        laid-out copies (three at the peak: the copy, its TF32 head and tail), V's copies and the
        column splits' partial sums (at most PROGRAMS_PER_SM tiles of 256 rows per SM beyond one
        per row), and per row of A (its device copy, its laid-out copies, the result, the
        partial sums and their sum)."""
        from . import fused

        width = -(-(n_features + 4) // 64) * 64  # the operands' columns (tiles of BK <= 64 features)
        kp = max(16, fused._kp(min(k, fused.MAX_K_PER_PASS))[0])
        sms = torch.cuda.get_device_properties(self.device).multi_processor_count if self.device.type == "cuda" else 1
        partials = kp * (fused.PROGRAMS_PER_SM * sms * 256 + 256)
        fixed = 4 * (n_points * (3 * width + 6 + k) + (n_points + 256) * kp + partials)
        return fixed, 4 * (n_features + 3 * width + k + 2 * kp + 6)

    def to_numpy(self, a):
        if isinstance(a, torch.Tensor):
            return a.detach().cpu().numpy()
        return np.asarray(a)

    def available_memory(self):
        """Free GPU memory on a CUDA device (torch.cuda.mem_get_info), else host memory."""
        if self.device.type == "cuda":
            return int(torch.cuda.mem_get_info(self.device)[0])
        return available_memory()

    def synchronize(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def __eq__(self, other):
        return isinstance(other, TorchBackend) and other.device == self.device

    def __hash__(self):
        return hash(("torch", str(self.device)))

    def __repr__(self):
        return f"TorchBackend({str(self.device)!r})"
