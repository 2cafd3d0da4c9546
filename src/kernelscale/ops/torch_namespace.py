"""numpy's names for torch tensors: dtype conversions and the namespace the kernel formulas of
:mod:`kernelscale.kernels` use on tensors (:data:`TORCH_XP`), with numpy's ``out=`` semantics, so
each formula is written once. A leaf module: it imports torch and numpy only.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["TorchNamespace", "TORCH_XP", "torch_dtype", "numpy_dtype"]

_TO_TORCH = {np.dtype(np.float32): torch.float32, np.dtype(np.float64): torch.float64,
             np.dtype(np.float16): torch.float16, np.dtype(np.int64): torch.int64,
             np.dtype(np.int32): torch.int32, np.dtype(np.bool_): torch.bool}
_TO_NUMPY = {v: k for k, v in _TO_TORCH.items()}


def torch_dtype(dtype):
    """The torch dtype of a numpy dtype (a torch dtype is returned as it is)."""
    return dtype if isinstance(dtype, torch.dtype) else _TO_TORCH[np.dtype(dtype)]


def numpy_dtype(dtype):
    """The numpy dtype of a torch dtype (a numpy dtype is returned as it is)."""
    return _TO_NUMPY[dtype] if isinstance(dtype, torch.dtype) else np.dtype(dtype)


def _unary(fn):
    def apply(a, out=None):
        return fn(a, out=out) if out is not None else fn(a)
    return apply


class TorchNamespace:
    """numpy-named functions on torch tensors (numpy operands are moved to the tensor's device)."""

    finfo = staticmethod(torch.finfo)
    exp = staticmethod(_unary(torch.exp))
    sqrt = staticmethod(_unary(torch.sqrt))
    cos = staticmethod(_unary(torch.cos))
    sin = staticmethod(_unary(torch.sin))
    negative = staticmethod(_unary(torch.neg))
    abs = staticmethod(_unary(torch.abs))

    @staticmethod
    def _like(b, a):
        if isinstance(b, np.ndarray):
            return torch.as_tensor(b, dtype=a.dtype, device=a.device)
        return b

    def _binary(self, fn, a, b, out):
        b = self._like(b, a)
        return fn(a, b, out=out) if out is not None else fn(a, b)

    def multiply(self, a, b, out=None):
        return self._binary(torch.mul, a, b, out)

    def add(self, a, b, out=None):
        return self._binary(torch.add, a, b, out)

    def subtract(self, a, b, out=None):
        return self._binary(torch.sub, a, b, out)

    def power(self, a, p, out=None):
        return self._binary(torch.pow, a, p, out)

    def matmul(self, a, b, out=None):
        return self._binary(torch.matmul, a, b, out)

    def maximum(self, a, b, out=None):
        if isinstance(b, (int, float)):
            return torch.clamp(a, min=b, out=out) if out is not None else torch.clamp(a, min=b)
        return self._binary(torch.maximum, a, b, out)

    def minimum(self, a, b, out=None):
        if isinstance(b, (int, float)):
            return torch.clamp(a, max=b, out=out) if out is not None else torch.clamp(a, max=b)
        return self._binary(torch.minimum, a, b, out)

    @staticmethod
    def einsum(spec, *operands):
        return torch.einsum(spec, *operands)

    @staticmethod
    def empty(shape, dtype=None, like=None):
        return torch.empty(shape, dtype=torch_dtype(dtype if dtype is not None else like.dtype), device=like.device)

    @staticmethod
    def zeros(shape, dtype=None, like=None):
        return torch.zeros(shape, dtype=torch_dtype(dtype if dtype is not None else like.dtype), device=like.device)

    @staticmethod
    def ascontiguousarray(a, dtype=None, like=None):
        dtype = torch_dtype(dtype) if dtype is not None else None
        return torch.as_tensor(a, dtype=dtype, device=like.device).contiguous()

    @staticmethod
    def cdist_l1(X, Z):
        return torch.cdist(X.to(torch.float64), Z, p=1.0)

    @staticmethod
    def expit(a, out=None):
        return torch.sigmoid(a, out=out) if out is not None else torch.sigmoid(a)

    @staticmethod
    def take_columns(a, idx, out=None):
        idx = torch.as_tensor(idx, device=a.device)
        if out is None:
            return a[:, idx]
        out.copy_(a[:, idx])
        return out


TORCH_XP = TorchNamespace()
