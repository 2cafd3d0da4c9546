"""Iteration monitor: callbacks see every iteration and can stop the solver; verbose shows a bar."""

import pytest

from kernelscale.base.monitor import IterationMonitor, check_callback


def run(monitor, n=10):
    with monitor:
        for i in range(n):
            if monitor.update(objective=1.0 / (i + 1)):
                break
    return monitor


def test_callback_receives_each_iteration():
    seen = []
    monitor = run(IterationMonitor(callback=seen.append))
    assert [info["iteration"] for info in seen] == list(range(1, 11))
    assert seen[-1]["objective"] == pytest.approx(0.1)
    assert not monitor.stopped_by_callback


def test_callback_returning_true_stops_early():
    monitor = run(IterationMonitor(callback=lambda info: info["iteration"] == 3))
    assert monitor.iteration == 3 and monitor.stopped_by_callback


def test_verbose_shows_progress_with_objective(capsys):
    run(IterationMonitor(verbose=1, total=10, desc="fit"))
    err = capsys.readouterr().err
    assert "fit" in err and "objective" in err


def test_silent_by_default(capsys):
    run(IterationMonitor())
    assert capsys.readouterr() == ("", "")


def test_bad_arguments_are_named():
    with pytest.raises(TypeError, match="callback"):
        check_callback(42)
    with pytest.raises(TypeError, match="verbose"):
        IterationMonitor(verbose="loud")
