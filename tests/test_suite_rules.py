"""The suite's own rules: which skips are allowed (tests/conftest.py)."""

import pytest
from conftest import skip_allowed


@pytest.mark.parametrize("reason", [
    "Skipped: real data absent: mnist.npz not found (set KERNELSCALE_DATA to the data directory)",
    "Skipped: no CUDA GPU visible to torch",
    "Skipped: could not import 'dask': No module named 'dask'",
    "Skipped: matplotlib (plot extra) absent",
])
def test_skips_for_what_the_machine_lacks_are_allowed(reason, monkeypatch):
    monkeypatch.delenv("KERNELSCALE_REQUIRE_EXTRAS", raising=False)
    assert skip_allowed(reason)


@pytest.mark.parametrize("reason", [
    "Skipped: not implemented yet",
    "Skipped: flaky",
    "Skipped: could not import 'kernelscale.auto': No module named 'kernelscale.auto'",
    "Skipped: could not import 'numba': No module named 'numba'",  # a dependency, not an extra
])
def test_other_skips_are_not(reason):
    assert not skip_allowed(reason)


def test_with_the_extras_required_a_missing_extra_is_not_a_reason(monkeypatch):
    monkeypatch.setenv("KERNELSCALE_REQUIRE_EXTRAS", "1")
    assert not skip_allowed("Skipped: could not import 'dask': No module named 'dask'")
    assert skip_allowed("Skipped: no CUDA GPU visible to torch")


def test_a_skip_off_the_list_fails_the_run(pytester):
    pytester.makeconftest(open(__file__.replace("test_suite_rules.py", "conftest.py")).read())
    pytester.makepyfile("import pytest\n\ndef test_a():\n    pytest.skip('later')\n\n"
                        "def test_b():\n    pytest.skip('no CUDA GPU visible to torch')\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1, skipped=1)
