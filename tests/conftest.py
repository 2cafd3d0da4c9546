"""Shared test helpers: the skip for tests that need the real benchmark data, the ops backends
the batteries run on, and the loader of benchmark modules."""

import importlib.util
import pathlib
import sys

import pytest

from kernelscale.data.datasets import ENV_VAR, DatasetNotFoundError, find_dataset


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


BENCH_DIR = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"


def load_benchmark(name):
    """Import ``benchmarks/<name>.py`` by path (benchmarks/ on sys.path, so it finds harness)."""
    if str(BENCH_DIR) not in sys.path:
        sys.path.insert(0, str(BENCH_DIR))
    spec = importlib.util.spec_from_file_location(f"_bench_test_{name}", BENCH_DIR / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module
