"""The ``device`` parameter: every estimator runs its fit and predictions on one backend.

:class:`DeviceMixin` wraps the public methods an estimator defines (fit, partial_fit, predict,
decision_function, predict_proba, predict_log_proba, transform, score) so that each runs inside
:func:`kernelscale.ops.backend.using` with the backend of ``device``; the operators the solvers
create pick it up, and the solvers never name a backend. The same wrapper makes torch tensors
first-class inputs:

- a tensor argument (X, y, sample_weight) is copied to a host numpy array before validation, and
  with ``device=None`` the tensor's device is used;
- the result of a method called with a tensor X is a tensor on that device (fit returns the
  estimator, as always);
- on a CUDA device, float64 numpy input is computed in float32 (the GPU default: float64 GEMMs
  run at a small fraction of the float32 rate on most GPUs); pass a float64 tensor to compute
  in float64 there.

Dask arrays are handed to :mod:`kernelscale.dask.dispatch` at the same place, before anything else:
predictions map the estimator's numpy method over the row chunks (a lazy dask array back); the
least-squares and stagewise fits run over the row chunks, other fits gather the arrays when they
fit the memory budget.
"""

from __future__ import annotations

import functools
import inspect

import numpy as np

from ..dask import dispatch as _dask
from ..ops.backend import current_backend, device_type, get_backend, using

__all__ = ["DeviceMixin", "is_tensor"]

WRAPPED = ("fit", "partial_fit", "predict", "decision_function", "predict_proba", "predict_log_proba",
           "transform", "score")


def is_tensor(a):
    """True for a torch tensor (without importing torch)."""
    return type(a).__module__.split(".")[0] == "torch" and hasattr(a, "detach")


def _host(a):
    return a.detach().cpu().numpy() if is_tensor(a) else a


def _on_cuda(backend):
    return device_type(backend) == "cuda"


def _run_on_device(method):
    @functools.wraps(method)
    def run(self, *args, **kwargs):
        if _dask.has_dask_input(args, kwargs):
            return _dask.call(self, run, args, kwargs)  # calls run again with numpy arrays
        tensor = args[0] if args and is_tensor(args[0]) else None
        device = getattr(self, "device", None)
        backend = get_backend(tensor.device if device is None and tensor is not None else device)
        if backend is current_backend() and not any(map(is_tensor, args)) and not any(map(is_tensor, kwargs.values())):
            return method(self, *args, **kwargs)  # a nested call: already on the device, on host arrays
        args = [_host(a) for a in args]
        kwargs = {k: _host(v) for k, v in kwargs.items()}
        if args and tensor is None and _on_cuda(backend) and getattr(args[0], "dtype", None) == np.float64:
            args[0] = np.asarray(args[0], dtype=np.float32)
        with using(backend):
            result = method(self, *args, **kwargs)
        if tensor is not None and isinstance(result, np.ndarray):
            import torch

            return torch.as_tensor(result, device=tensor.device)
        return result

    return run


def _from_mixin(cls, name):
    """The plain function ``name`` that ``cls`` inherits from a base outside DeviceMixin (a mixin
    listed before it, e.g. a shared ``predict`` or scikit-learn's ``score``), or None: it is
    wrapped on ``cls`` like the methods ``cls`` defines."""
    for klass in cls.__mro__[1:]:
        if name in klass.__dict__:
            attr = klass.__dict__[name]
            return attr if inspect.isfunction(attr) and not issubclass(klass, DeviceMixin) else None
    return None


class DeviceMixin:
    """Runs the public methods a subclass defines (or takes from a mixin before it) on the backend
    of its ``device`` parameter; dask arrays go to :mod:`kernelscale.dask.dispatch` first."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name in WRAPPED:
            attr = cls.__dict__.get(name, None) or _from_mixin(cls, name)
            if attr is None or getattr(attr, "_on_device", False):
                continue
            if callable(attr):
                wrapped = _run_on_device(attr)
                wrapped._on_device = True
                setattr(cls, name, wrapped)
            elif callable(getattr(attr, "fn", None)):  # scikit-learn's available_if descriptor
                attr.fn = _run_on_device(attr.fn)
                attr.fn._on_device = True
