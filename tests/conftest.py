"""Shared test helpers: the skip for tests that need the real benchmark data."""

import pytest

from kernelscale.datasets import ENV_VAR, DatasetNotFoundError, find_dataset


@pytest.fixture
def require_dataset():
    """``require_dataset(name)`` returns the dataset's path, or skips the test when the file is
    absent (the only skip in the suite; use it in tests marked ``real_data``)."""

    def require(name):
        try:
            return find_dataset(name)
        except DatasetNotFoundError as err:
            first_line = str(err).splitlines()[0]
            pytest.skip(f"real data absent: {first_line} (set {ENV_VAR} to the data directory)")

    return require


def _torch_available():
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


#: the backends the operator batteries run on: numpy, and torch's CPU kernels (the test extra
#: installs torch; a checkout without it runs numpy only)
BACKENDS = ["numpy"] + (["cpu"] if _torch_available() else [])


@pytest.fixture(params=BACKENDS)
def ops_backend(request):
    """Runs the test with the ops backend ``request.param`` in use (see kernelscale.ops.backend)."""
    from kernelscale.ops.backend import get_backend, using

    with using(get_backend(request.param)) as backend:
        yield backend
