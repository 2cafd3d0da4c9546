"""The README's Python examples run as written, in order, in one namespace."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_example_runs(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "the README lost its Python example"
    monkeypatch.chdir(tmp_path)  # the example saves a model file
    namespace = {}
    exec(compile(blocks[0], str(README), "exec"), namespace)  # the front door
    assert namespace["model"].score(namespace["X_test"], namespace["y_test"]) > 0.95
    exec(compile(blocks[1], str(README), "exec"), namespace)  # a first look
    assert (tmp_path / "model.ksm").is_file()
    assert namespace["same"].predict(namespace["X"][:5]).shape == (5,)
    assert namespace["Kv"].shape == (2000,) and namespace["Phi"].shape == (2000, 2048)
