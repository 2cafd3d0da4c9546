"""The estimator boundary: what happens to every call of a public method before the method runs.

:class:`BoundaryMixin` wraps the public methods an estimator defines, or takes from a mixin listed
before it (:data:`PUBLIC_METHODS`: fit, partial_fit, predict, decision_function, predict_proba,
predict_log_proba, transform, score), in three steps, outermost first:

1. dask arrays go to :mod:`kernelscale.dask.dispatch` (mapped over row chunks, gathered, or a
   distributed fit), which calls the method again on numpy arrays;
2. the memory budget is resolved once for the call (:func:`kernelscale.ops.memory.one_reading`:
   ``max_memory=None`` is one reading of the free memory, however often the call plans), after
   the compiled code of the method is loaded on its first call in the process and what that took
   is taken off the budget (:mod:`kernelscale.base.warmup`);
3. torch tensors and the ``device`` parameter (:func:`kernelscale.base.device.on_device`).

Every estimator subclasses :class:`BoundaryMixin`, so it also carries what every estimator shares
beside the public methods (:class:`kernelscale.base.params.ParamsMixin`): ``set_params`` of
``kernel__<param>`` for a kernel given by name, and the refusal of integer parameters beyond the
float range.

Methods behind scikit-learn's ``available_if`` get a new descriptor with the same condition around
the wrapped function; scikit-learn's objects are never modified.
"""

from __future__ import annotations

import functools
import inspect

from sklearn.utils.metaestimators import available_if

from ..dask.dispatch import dispatching_dask
from ..ops.memory import one_reading
from .device import on_device
from .params import ParamsMixin
from .warmup import loaded_first

__all__ = ["BoundaryMixin", "PUBLIC_METHODS"]

PUBLIC_METHODS = ("fit", "partial_fit", "predict", "decision_function", "predict_proba", "predict_log_proba",
                  "transform", "score")


def one_budget(method):
    """``method`` with one reading of the free memory for the whole call, its compiled code loaded
    and counted first."""

    @functools.wraps(method)
    def run(self, *args, **kwargs):
        with one_reading(), loaded_first(self, method.__name__, args, kwargs):
            return method(self, *args, **kwargs)

    return run


def at_boundary(method):
    """``method`` with the three steps of the module docstring."""
    wrapped = dispatching_dask(one_budget(on_device(method)))
    wrapped._at_boundary = True
    return wrapped


def _inherited(cls, name):
    """The function or ``available_if`` descriptor ``name`` that ``cls`` takes from a base outside
    BoundaryMixin (a mixin listed before it, e.g. a shared ``predict`` or scikit-learn's
    ``score``), or None."""
    for klass in cls.__mro__[1:]:
        if name in klass.__dict__:
            return None if issubclass(klass, BoundaryMixin) else klass.__dict__[name]
    return None


class BoundaryMixin(ParamsMixin):
    """Runs the public methods of a subclass through :func:`at_boundary` (and gives it the
    ``set_params`` of :class:`~kernelscale.base.params.ParamsMixin`). Every estimator takes
    scipy.sparse X (validated and kept as CSR by :func:`kernelscale.base.validation.validate_data`),
    so the tag ``input_tags.sparse`` is set here."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name in PUBLIC_METHODS:
            attr = cls.__dict__.get(name) or _inherited(cls, name)
            if attr is None:
                continue
            if inspect.isfunction(attr) and not getattr(attr, "_at_boundary", False):
                setattr(cls, name, at_boundary(attr))
            elif inspect.isfunction(getattr(attr, "fn", None)) and not getattr(attr.fn, "_at_boundary", False):
                setattr(cls, name, available_if(attr.check)(at_boundary(attr.fn)))
