"""Parameters shared by the estimators: scikit-learn constraints (``_parameter_constraints``),
``set_params`` of the nested parameters of a kernel given by name and the refusal of integers
beyond the float range (:class:`ParamsMixin`, which every estimator has through
:class:`kernelscale.base.boundary.BoundaryMixin`)."""

import math
from numbers import Integral, Real

from sklearn.utils._param_validation import Interval, StrOptions

from ..kernels import KERNEL_NAMES, Kernel, make_kernel
from .validation import float_value, number_repr

#: ``kernel``: a kernel name or a Kernel instance
KERNEL_CONSTRAINT = [StrOptions(set(KERNEL_NAMES)), Kernel]
#: ``max_memory``: bytes, a string such as "2GB", or None (see :mod:`kernelscale.ops.memory`)
MEMORY_CONSTRAINT = [Interval(Real, 0, None, closed="neither"), str, None]
#: ``device``: where blocks are computed; checked by :func:`kernelscale.ops.backend.get_backend`
#: (its errors name the argument and the devices torch sees)
DEVICE_CONSTRAINT = "no_validation"

#: the parameter whose nested parameters ``kernel__<name>`` address a kernel given by name
KERNEL_PARAMETER = "kernel"


class ParamsMixin:
    """What every estimator's parameters share beyond scikit-learn's ``BaseEstimator``.

    ``_validate_params`` (called by every fit): scikit-learn's constraints, then a ValueError
    naming any parameter that is a Python integer beyond the float range (``alpha=10**400``): an
    ``Interval(Real, ...)`` constraint accepts it, and the arithmetic would fail on it deep inside
    (``float()`` overflows, numpy's ufuncs refuse it as an object). Integers within the range
    (``alpha=10**30``) are used as the floats they convert to.

    ``set_params`` accepts ``kernel__<param>`` when ``kernel`` is a name ("gaussian").

    scikit-learn's ``set_params`` sets ``kernel__sigma`` by calling ``kernel.set_params(sigma=...)``,
    which a string has not. Here, when ``kernel__*`` keys meet a kernel given by name (the current
    value, or a name passed in the same call), the name is first replaced by the kernel object it
    stands for, with that kernel's defaults (``"gaussian"`` is ``GaussianKernel(sigma="median")``;
    :meth:`_kernel_for_name` says which object an estimator's name or None stands for), and the
    nested parameters are then set on it. So ``GridSearchCV(est, {"kernel__sigma": [...]})`` works
    with the default ``kernel="gaussian"``, and after ``set_params`` ``get_params()["kernel"]`` is
    the kernel object. ``__init__`` still stores ``kernel`` unchanged: a name stays a name until a
    nested parameter is set, so ``clone`` and scikit-learn's estimator checks see the parameters
    as given.
    """

    def _validate_params(self):
        super()._validate_params()
        for name, value in self.get_params(deep=False).items():
            if isinstance(value, Integral) and not isinstance(value, bool) and not math.isfinite(float_value(value)):
                raise ValueError(f"{name}={number_repr(value)} is beyond the float range (about 1.8e308), which "
                                 f"kernelscale computes in; pass a smaller {name}.")

    def set_params(self, **params):
        nested = sorted(key for key in params if key.startswith(KERNEL_PARAMETER + "__"))
        if nested and KERNEL_PARAMETER in self.get_params(deep=False):
            value = params.get(KERNEL_PARAMETER, getattr(self, KERNEL_PARAMETER))
            if not isinstance(value, Kernel):
                kernel = self._kernel_for_name(value)
                if kernel is None:
                    raise ValueError(
                        f"{nested[0]} cannot be set: kernel={value!r} names no kernel whose parameters could be "
                        f"set; pass a kernel object with its parameters instead, e.g. "
                        f"kernel=GaussianKernel(sigma=1.0), or one of the names {', '.join(map(repr, KERNEL_NAMES))}."
                    )
                params = {**params, KERNEL_PARAMETER: kernel}
        return super().set_params(**params)

    def _kernel_for_name(self, value):
        """The kernel object (with its default parameters) that ``kernel=value`` stands for, value
        not a Kernel: the kernel of a name of ``KERNEL_NAMES``; None where there is none."""
        if isinstance(value, str):
            return make_kernel(value, KERNEL_PARAMETER)
        return None
