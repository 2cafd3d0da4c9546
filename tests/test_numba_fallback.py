"""numba is a dependency: the compiled loops are the speed users get (issue 38, item 3). The
pure-Python fallbacks stay for platforms numba does not support, and stay tested here: a child
process in which ``import numba`` fails (``sys.modules["numba"] = None``, what Python does for a
package that is not installed) imports kernelscale, finds every compiled path switched off, and
fits the estimators whose inner loops numba compiles; their predictions equal those of the same
fits with numba in this process (the same iterates up to rounding).

Each module's switch (``USE_NUMBA``) is flipped by its own tests as well
(tests/test_coordinate_descent.py runs every case on both paths, test_slkl.py,
test_virtual_digits.py and test_fast_cos.py compare the compiled and Python loops); this test is
the one that runs kernelscale as installed on a machine without numba.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

#: fits whose inner loops numba compiles: coordinate descent (kernel and linear), SLKL's visits,
#: the cosines of doubly stochastic feature blocks, and the virtual digits' resampling
FITS = r"""
import numpy as np
from sklearn.datasets import load_digits, make_regression
from kernelscale import (DoublyStochasticRegressor, RegularizedKernelClassifier, SLKLRegressor,
                         VirtualDigits)

digits = load_digits()
Xc, yc = digits.data[:400] / 16.0, digits.target[:400]
Xr, yr = make_regression(n_samples=300, n_features=5, noise=0.1, random_state=0)
yr = yr / np.std(yr)
out = {
    "cd_kernel": RegularizedKernelClassifier(C=10.0, tol=1e-4, random_state=0).fit(Xc, yc)
                 .decision_function(Xc[:50]),
    "cd_linear": RegularizedKernelClassifier("linear", C=1.0, tol=1e-4, random_state=0).fit(Xc, yc)
                 .decision_function(Xc[:50]),
    "slkl": SLKLRegressor(n_components=64, random_state=0).fit(Xr, yr).predict(Xr[:50]),
    "dsg": DoublyStochasticRegressor(n_iter=20, batch_size=100, block_size=64, random_state=0)
           .fit(Xr, yr).predict(Xr[:50]),
    "digits": VirtualDigits(digits.images[:20], digits.target[:20], n_examples=60, chunk_size=30,
                            seed=3, include_originals=False).chunk(1)[0],
}
"""

CHILD = r"""
import json, sys
sys.modules["numba"] = None  # as on a platform without numba: `import numba` raises ImportError
import kernelscale
from kernelscale.data import virtual_digits
from kernelscale.ops import fast_cos
from kernelscale.regularized import cd_loops, coordinate_descent
from kernelscale.slkl import loop
switches = {
    "cd_loops.NUMBA_AVAILABLE": cd_loops.NUMBA_AVAILABLE,
    "coordinate_descent.USE_NUMBA": coordinate_descent.USE_NUMBA,
    "slkl.loop.USE_NUMBA": loop.USE_NUMBA,
    "slkl.loop.compiled_epoch()": loop.compiled_epoch() is not None,
    "virtual_digits.NUMBA_AVAILABLE": virtual_digits.NUMBA_AVAILABLE,
    "fast_cos.available()": fast_cos.available(),
}
""" + FITS + r"""
assert sys.modules["numba"] is None, "numba was imported after all"
import numpy as np
np.savez(sys.argv[1], **out)
print(json.dumps(switches))
"""


def test_numba_is_a_dependency_not_an_extra():
    text = (ROOT / "pyproject.toml").read_text()
    dependencies = re.search(r"(?ms)^dependencies = \[(.*?)^\]", text).group(1)
    assert re.search(r'^\s*"numba>=[\d.]+",', dependencies, flags=re.M), "numba belongs in [project] dependencies"
    import numba  # noqa: F401  (installed with kernelscale: no test may skip for its absence)


def test_without_numba_the_python_loops_fit_the_same_models(tmp_path):
    from kernelscale.data import virtual_digits
    from kernelscale.ops import fast_cos
    from kernelscale.regularized import coordinate_descent
    from kernelscale.slkl import loop

    assert coordinate_descent.USE_NUMBA and loop.USE_NUMBA and virtual_digits.NUMBA_AVAILABLE
    assert fast_cos.available() and loop.compiled_epoch() is not None  # this process: compiled
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    result = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "python.npz")], env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    switches = json.loads(result.stdout.strip().splitlines()[-1])
    assert not any(switches.values()), f"compiled paths still on without numba: {switches}"

    scope = {}
    exec(FITS, scope)  # the same fits, compiled
    compiled = scope["out"]
    with np.load(tmp_path / "python.npz") as python:
        assert sorted(python.files) == sorted(compiled)
        for name in compiled:
            np.testing.assert_allclose(python[name], compiled[name], rtol=1e-6, atol=1e-8, err_msg=name)

