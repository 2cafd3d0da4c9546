"""The README's Python example runs as written."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_example_runs(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "the README lost its Python example"
    monkeypatch.chdir(tmp_path)  # the example saves a model file
    namespace = {}
    exec(compile(blocks[0], str(README), "exec"), namespace)
    assert (tmp_path / "model.ksm").is_file()
    assert namespace["same"].predict(namespace["X"][:5]).shape == (5,)
    assert namespace["Kv"].shape == (2000,) and namespace["Phi"].shape == (2000, 2048)
