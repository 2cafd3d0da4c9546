"""MkDocs hook of kernelscale's site: the figures of benchmarks/results/ and the examples gallery.

- every ``benchmarks/results/*.png`` becomes ``figures/<name>.png`` of the site;
- every ``examples/*.py`` is run (``KERNELSCALE_EXAMPLE_SIZE``, default ``small``) with
  ``KERNELSCALE_EXAMPLE_OUT`` set to a folder for its figure; its page ``examples/<name>.md``
  shows the script's docstring, its figure, what it printed and its source. A failing example
  fails the build. Results are cached by the script's content and size in ``.cache/examples``.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "examples"


def _run(script, size):
    key = hashlib.sha256(script.read_bytes() + size.encode()).hexdigest()[:16]
    out = CACHE / f"{script.stem}-{key}"
    if not (out / "stdout.txt").is_file():
        out.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, KERNELSCALE_EXAMPLE_SIZE=size, KERNELSCALE_EXAMPLE_OUT=str(out),
                   MPLBACKEND="Agg", PYTHONPATH=os.pathsep.join(
                       [str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")]))
        done = subprocess.run([sys.executable, str(script)], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise PluginError(f"example {script.name} failed:\n{done.stdout}\n{done.stderr}")
        (out / "stdout.txt").write_text(done.stdout)
    return out


def _page(script, out):
    source = script.read_text()
    doc = source.split('"""')[1].strip() if source.startswith('"""') else script.stem
    title, _, rest = doc.partition("\n")
    lines = [f"# {title}", "", rest.strip(), ""]
    for png in sorted(out.glob("*.png")):
        lines += [f"![{title}]({png.name})", ""]
    printed = (out / "stdout.txt").read_text().strip()
    if printed:
        lines += ["What it printed:", "", "```text", printed, "```", ""]
    lines += [f"The script, `examples/{script.name}`:", "", "```python", source.rstrip(), "```", ""]
    return "\n".join(lines)


def on_files(files, config):
    for png in sorted((ROOT / "benchmarks" / "results").glob("*.png")):
        files.append(File.generated(config, f"figures/{png.name}", abs_src_path=str(png)))
    size = os.environ.get("KERNELSCALE_EXAMPLE_SIZE", "small")
    index = ["# Examples", "", "Small scripts in `examples/`, run by every build of this site "
             f"(here with `KERNELSCALE_EXAMPLE_SIZE={size}`); each page shows the figure the "
             "build produced.", ""]
    for script in sorted((ROOT / "examples").glob("*.py")):
        out = _run(script, size)
        files.append(File.generated(config, f"examples/{script.stem}.md", content=_page(script, out)))
        for png in sorted(out.glob("*.png")):
            files.append(File.generated(config, f"examples/{png.name}", abs_src_path=str(png)))
        doc = script.read_text().split('"""')[1].strip().partition("\n")[0]
        index.append(f"- [{doc}]({script.stem}.md)")
    files.append(File.generated(config, "examples/index.md", content="\n".join(index) + "\n"))
    return files
