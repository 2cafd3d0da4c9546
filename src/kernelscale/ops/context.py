"""The backend in use for the running call: set by :func:`kernelscale.ops.backend.using` at the
estimator boundary, read by the operators and by the memory budget. A leaf module, so that both
``ops.backend`` and ``ops.memory`` can read it without importing each other."""

from __future__ import annotations

import contextvars

__all__ = ["ACTIVE_BACKEND"]

#: the backend object of the running call; None outside any ``using`` block (numpy)
ACTIVE_BACKEND = contextvars.ContextVar("kernelscale_backend", default=None)
