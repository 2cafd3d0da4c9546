"""The ``device`` parameter: every estimator runs its fit and predictions on one backend.

:func:`on_device` wraps a public method (kernelscale.base.boundary applies it to every public
method an estimator defines) so that it runs inside :func:`kernelscale.ops.backend.using` with
the backend of ``device``; the operators the solvers create pick it up, and the solvers never
name a backend. The same wrapper makes torch tensors first-class inputs:

- a tensor argument (X, y, sample_weight) is copied to a host numpy array before validation, and
  with ``device=None`` the tensor's device is used; a tensor without values (the "meta" device)
  or of a dtype numpy has not (bfloat16, float8) is refused first, naming the argument;
- the result of a method called with a tensor X is a tensor on that device (fit returns the
  estimator, as always);
- the computation dtype follows the input on every device, as everywhere else (``dtype=None``):
  float64 input is computed in float64 on a GPU too. Pass float32 data (or ``dtype=np.float32``
  where an estimator has it) for the GPU's float32 rate, several times its float64 one.
"""

from __future__ import annotations

import functools
import inspect

import numpy as np

from ..ops.backend import current_backend, get_backend, using
from .validation import check_tensor, is_tensor

__all__ = ["on_device", "is_tensor", "check_tensor"]


def _host(a):
    return a.detach().cpu().numpy() if is_tensor(a) else a


def _argument_names(method):
    """The names of the positional parameters of ``method`` after self (X, y, ...)."""
    parameters = list(inspect.signature(method).parameters.values())[1:]
    return [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def on_device(method):
    """``method`` run on the backend of the estimator's ``device`` (see the module docstring)."""
    names = _argument_names(method)

    @functools.wraps(method)
    def run(self, *args, **kwargs):
        for i, a in enumerate(args):
            check_tensor(a, names[i] if i < len(names) else f"argument {i + 1}")
        for key, a in kwargs.items():
            check_tensor(a, key)
        tensor = args[0] if args and is_tensor(args[0]) else None
        device = getattr(self, "device", None)
        backend = get_backend(tensor.device if device is None and tensor is not None else device)
        if backend is current_backend() and not any(map(is_tensor, args)) and not any(map(is_tensor, kwargs.values())):
            return method(self, *args, **kwargs)  # a nested call: already on the device, on host arrays
        args = [_host(a) for a in args]
        kwargs = {k: _host(v) for k, v in kwargs.items()}
        with using(backend):
            result = method(self, *args, **kwargs)
        if tensor is not None and isinstance(result, np.ndarray):
            import torch

            return torch.as_tensor(result, device=tensor.device)
        return result

    return run

