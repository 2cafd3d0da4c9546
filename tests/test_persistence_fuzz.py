"""Fuzzing kernelscale.load over mutated model files (issue 19): every mutation gives a clear
ValueError naming the file, the original model (byte-level mutations) or another kernelscale
object (rebuilt archives), and the traced peak memory stays within load_memory_bound(file size).

A small budget runs in the suite; benchmarks/tools/fuzz_persistence.py runs the same cases longer.
"""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from model_fuzzing import model_bytes, mutations, original_models, run_case, same_model


@pytest.fixture(scope="module")
def originals(tmp_path_factory):
    folder = tmp_path_factory.mktemp("originals")
    return [(model, model_bytes(model, folder)) for model in original_models()]


@pytest.fixture(scope="module")
def work_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


@settings(max_examples=600, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_load_of_a_mutated_file_is_a_clear_error_or_a_faithful_model(originals, work_dir, data):
    model, raw = data.draw(st.sampled_from(originals), label="original")
    mutation = data.draw(mutations(raw), label="mutation")
    outcome, detail = run_case(model, raw, mutation, work_dir, same_model)
    assert outcome in ("equal", "loaded", "refused"), detail


def test_unmutated_files_load_equal(originals, work_dir):
    for model, raw in originals:
        identity = type("Identity", (), {"name": "identity", "byte_level": True,
                                         "apply": staticmethod(lambda data: data)})
        assert run_case(model, raw, identity, work_dir, same_model) == ("equal", "")
