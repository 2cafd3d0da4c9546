"""Shared test helpers: the skip for tests that need the real benchmark data, the allow-list of
skip reasons, and the ops backends the batteries run on. The benchmarks are the package
``benchmarks`` (pyproject.toml puts the repository's root on the tests' path)."""

import os
import re

import pytest

from kernelscale.data.datasets import ENV_VAR, DatasetNotFoundError, find_dataset


@pytest.fixture
def require_dataset():
    """``require_dataset(name)`` returns the dataset's path, or skips the test when the file is
    absent (use it in tests marked ``real_data``)."""

    def require(name):
        try:
            return find_dataset(name)
        except DatasetNotFoundError as err:
            first_line = str(err).splitlines()[0]
            pytest.skip(f"real data absent: {first_line} (set {ENV_VAR} to the data directory)")

    return require


#: why a test may skip: what the machine lacks, never what the code lacks. Any other skip fails
#: the run, so that a skip cannot hide missing work.
SKIP_REASONS = (
    r"real data absent: ",  # require_dataset: the benchmark datasets are not on this machine
    r"no CUDA GPU visible to torch",  # tests marked gpu
    r"TRITON_INTERPRET is set|Triton's interpreter is off|triton is not installed",
    r"scipy shares numpy's BLAS here",  # nothing to throttle with one BLAS pool
    r"POSIX signals|needs FIFOs|needs Linux /proc",
    r"SCIPY_ARRAY_API is not set",  # scikit-learn's array-API check runs only with that variable
)
#: optional dependencies (the extras of pyproject.toml): a test may skip for their absence, unless
#: KERNELSCALE_REQUIRE_EXTRAS=1 says they are installed (CI's run with every extra). numba is a
#: dependency, not an extra: a test of the compiled loops may not skip for its absence
OPTIONAL_PACKAGES = ("dask", "distributed", "torch", "pandas", "matplotlib", "libsvm", "liblinear",
                     "vowpalwabbit")
_MISSING = re.compile(r"could not import '([\w.]+)'|(\w+) is not installed|(\w+) \(\w+ extra\) absent")


def skip_allowed(reason):
    """Whether a skip with this reason is on the allow-list (see SKIP_REASONS)."""
    if any(re.search(r, reason) for r in SKIP_REASONS):
        return True
    missing = _MISSING.search(reason)
    if missing and os.environ.get("KERNELSCALE_REQUIRE_EXTRAS") != "1":
        package = next(g for g in missing.groups() if g).split(".")[0]
        return package in OPTIONAL_PACKAGES
    return False


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A skip whose reason is not on the allow-list is reported as a failure."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        if not skip_allowed(reason):
            report.outcome = "failed"
            report.longrepr = (f"skipped for a reason not on the allow-list of tests/conftest.py "
                               f"(SKIP_REASONS): {reason}")


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
