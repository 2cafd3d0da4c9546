"""scikit-learn parameter constraints shared by the estimators (``_parameter_constraints``)."""

from numbers import Real

from sklearn.utils._param_validation import Interval, StrOptions

from ..kernels import KERNEL_NAMES, Kernel

#: ``kernel``: a kernel name or a Kernel instance
KERNEL_CONSTRAINT = [StrOptions(set(KERNEL_NAMES)), Kernel]
#: ``max_memory``: bytes, a string such as "2GB", or None (see :mod:`kernelscale.ops.memory`)
MEMORY_CONSTRAINT = [Interval(Real, 0, None, closed="neither"), str, None]
#: ``device``: where blocks are computed; checked by :func:`kernelscale.ops.backend.get_backend`
#: (its errors name the argument and the devices torch sees)
DEVICE_CONSTRAINT = "no_validation"
