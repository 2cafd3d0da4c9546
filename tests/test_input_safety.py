"""Regression tests of issue 19 (items 1, 6, 7): hostile input never corrupts memory, fits leave
the process's BLAS thread count as they found it, and finite input never gives non-finite output.

Cases that crashed the interpreter run in a subprocess, so a regression fails one test instead of
killing the test run.
"""

import json
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
import scipy.sparse as sp
from threadpoolctl import OpenBLASController, threadpool_info, threadpool_limits

from kernelscale import SLKLClassifier
from kernelscale._validation import check_sparse

# ----------------------------------------------------------------------------------------------
# item 1: sparse structure is checked before scipy's conversions or compiled loops read it

CORRUPTIONS = """
import numpy as np, scipy.sparse as sp

def corrupt(kind, fmt="csr"):
    X = sp.random(200, 5, density=0.5, format=fmt, random_state=0, dtype=np.float64)
    if kind == "index_7":
        X.indices[-1] = 7
    elif kind == "index_huge":
        X.indices[-1] = 10**9
    elif kind == "index_negative":
        X.indices[0] = -1
    elif kind == "indptr_decreasing":
        X.indptr[3] = X.indptr[5]
    elif kind == "indptr_short_end":
        X.indptr[-1] -= 1
    elif kind == "indptr_not_zero":
        X.indptr[0] = 1
    elif kind == "data_nan":
        X.data[2] = np.nan
    elif kind == "coo_row":
        X.row[-1] = 10**9
    elif kind == "coo_col":
        X.col[0] = -3
    return X
"""

SPARSE_CASES = [("index_7", "csr"), ("index_huge", "csr"), ("index_negative", "csr"), ("indptr_decreasing", "csr"),
                ("indptr_short_end", "csr"), ("indptr_not_zero", "csr"), ("data_nan", "csr"), ("index_huge", "csc"),
                ("index_negative", "csc"), ("coo_row", "coo"), ("coo_col", "coo")]


def _run_isolated(body):
    """Run `body` in a fresh interpreter; it prints a JSON dict of outcomes as its last line."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(body)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"the subprocess died (rc={proc.returncode}): {proc.stderr[-2000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_corrupt_sparse_input_is_refused_by_every_sparse_entry_point():
    outcomes = _run_isolated(CORRUPTIONS + f"""
import json, warnings
warnings.simplefilter("ignore")
from kernelscale import RegularizedKernelClassifier, RegularizedKernelRegressor
from kernelscale.coordinate_descent import linear_coordinate_descent
y = np.r_[np.ones(100), -np.ones(100)]
good = sp.random(200, 5, density=0.5, format="csr", random_state=1)
fitted = {{
    "clf": RegularizedKernelClassifier(kernel="linear").fit(good, y),
    "reg": RegularizedKernelRegressor(kernel="linear", loss="absolute").fit(good, y),
    "clf_fp": RegularizedKernelClassifier(kernel="linear", solver="fixed_point").fit(good, y),
}}
calls = {{
    "clf.fit": lambda X: RegularizedKernelClassifier(kernel="linear").fit(X, y),
    "clf_fp.fit": lambda X: RegularizedKernelClassifier(kernel="linear", solver="fixed_point").fit(X, y),
    "reg.fit": lambda X: RegularizedKernelRegressor(kernel="linear", loss="absolute").fit(X, y),
    "clf.predict": lambda X: fitted["clf"].predict(X),
    "clf.decision_function": lambda X: fitted["clf"].decision_function(X),
    "clf_fp.predict": lambda X: fitted["clf_fp"].predict(X),
    "reg.predict": lambda X: fitted["reg"].predict(X),
    "linear_coordinate_descent": lambda X: linear_coordinate_descent(X, y),
}}
out = {{}}
for kind, fmt in {SPARSE_CASES!r}:
    for name, call in calls.items():
        try:
            call(corrupt(kind, fmt))
            out[f"{{name}} {{kind}} {{fmt}}"] = "accepted"
        except (ValueError, TypeError) as err:
            out[f"{{name}} {{kind}} {{fmt}}"] = f"{{type(err).__name__}}: {{err}}"
print(json.dumps(out))
""")
    accepted = [case for case, outcome in outcomes.items() if not outcome.startswith("ValueError: X")]
    assert not accepted, f"corrupt sparse X not refused with a ValueError naming X: {accepted}"
    assert "outside [0, 5)" in outcomes["clf.fit index_7 csr"]


@pytest.mark.parametrize("kind, fmt", SPARSE_CASES)
def test_check_sparse_names_the_defect(kind, fmt):
    namespace = {}
    exec(CORRUPTIONS, namespace)
    with pytest.raises(ValueError, match=r"^X(\.\w+)? .*(indices|indptr|row|col|NaN)"):
        check_sparse(namespace["corrupt"](kind, fmt))


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "bsr", "lil", "dok", "dia"])
def test_check_sparse_accepts_valid_matrices_of_every_format(fmt):
    X = sp.random(30, 7, density=0.3, format=fmt, random_state=0)
    assert check_sparse(X) is X
    assert check_sparse(sp.csr_array((0, 3))).shape == (0, 3)


def test_check_sparse_refuses_bad_index_dtypes_and_data():
    X = sp.random(20, 4, density=0.5, format="csr", random_state=0)
    X.indices = X.indices.astype(np.int16)
    with pytest.raises(ValueError, match="X.indices must be a 1-d int32 or int64 array"):
        check_sparse(X)
    X = sp.random(20, 4, density=0.5, format="csr", random_state=0)
    X.data = X.data.astype(complex)
    with pytest.raises(TypeError, match="X has dtype complex"):
        check_sparse(X)


# ----------------------------------------------------------------------------------------------
# item 6: overlapping SLKL fits restore the BLAS thread count


def _blas_threads():
    return sorted({info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"})


def _let_go():
    """threadpoolctl >= 3.7: let other threads change the OpenBLAS limit this thread set."""
    getattr(OpenBLASController, "clear_controlling_thread", lambda: None)()


def test_overlapping_slkl_fits_in_two_threads_restore_the_blas_thread_count():
    """A enters, B enters, A leaves (its thread stays alive, as in a pool), B leaves: a limit
    nested in B would "restore" 1, and a restore from B of A's limit would be ignored."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(120, 3)), np.repeat([0, 1], 60)
    a_in, b_in, a_out, b_out = (threading.Event() for _ in range(4))
    seen, errors = [], []

    def fit(mine, other, done):
        def callback(info):
            seen.append(_blas_threads())
            mine.set()
            other.wait(10)

        try:
            SLKLClassifier(n_columns=20, random_state=0, callback=callback).fit(X, y)
        except Exception as err:  # reported below, in the main thread
            errors.append(err)
        done.set()
        b_out.wait(10)  # keep the thread alive until both fits are done

    outer = threadpool_limits(limits=2, user_api="blas")  # 2 even on a one-core machine
    _let_go()
    try:
        before = _blas_threads()
        first = threading.Thread(target=fit, args=(a_in, b_in, a_out))
        second = threading.Thread(target=fit, args=(b_in, a_out, b_out))
        first.start()
        assert a_in.wait(10)
        second.start()
        assert b_out.wait(30)
        after = _blas_threads()
        first.join(10)
        second.join(10)
    finally:
        outer.restore_original_limits()
        _let_go()
    assert not errors, errors
    assert seen and all(threads == [1] for threads in seen), seen
    assert after == before == [2]
