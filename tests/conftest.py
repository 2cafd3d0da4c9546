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
