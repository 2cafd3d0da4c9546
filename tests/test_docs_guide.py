"""The user guide's Python examples (docs/guide/*.md) run as written, each page in one namespace."""

import re
from pathlib import Path

import pytest

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guide"
PAGES = sorted(GUIDE.glob("*.md"))


def test_every_family_page_is_here():
    assert {p.stem for p in PAGES} >= {"slkl", "doubly-stochastic", "regularized", "lssvm", "least-squares"}


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_guide_examples_run(page, tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)
    monkeypatch.chdir(tmp_path)
    namespace = {}
    for block in blocks:
        exec(compile(block, str(page), "exec"), namespace)
