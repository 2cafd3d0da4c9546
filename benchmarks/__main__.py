"""``python -m benchmarks NAME [ARGS ...]``: run the benchmark script NAME (in the repository's root).

NAME is a script's file name (``slkl``, ``dsg-stream`` or ``dsg_stream``, ``refactor_check``),
optionally with its folder (``papers.slkl``), or a suite's name (``fused-matvec``); ARGS go to
the script's ``main``. With no NAME, or ``--list``, it lists the scripts by folder with the first
line of each one's docstring.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

from benchmarks.harness import FOLDERS, find_script, scripts

USAGE = "usage: python -m benchmarks NAME [ARGS ...] | --list   (NAME --help: the script's options)"


def listing():
    """The scripts by folder: name, ``[its suite]`` (the results file's stem) for a suite, and
    the first line of its docstring."""
    found = scripts()
    width = max(len(s.name) for s in found)
    lines = []
    for folder in FOLDERS:
        lines.append(f"{folder}/")
        for s in (s for s in found if s.folder == folder):
            tag = f"[{s.suite}] " if s.suite else ""
            shell = " (bash)" if s.module is None else ""
            lines.append(f"  {s.name:<{width}}  {tag}{s.summary}{shell}")
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("--list", "-l", "list"):
        print(listing())
        return 0
    if argv[0] in ("-h", "--help"):
        print(f"{USAGE}\n\n{__doc__.split(chr(10) * 2, 1)[1].strip()}\n\n{listing()}")
        return 0
    name, args = argv[0], argv[1:]
    try:
        script = find_script(name)
    except ValueError as exc:
        print(f"{exc}\n{USAGE}", file=sys.stderr)
        return 2
    if script.module is None:  # a shell script (tools/gpu_run.sh)
        return subprocess.call(["bash", str(script.path), *args])
    module = importlib.import_module(script.module)
    sys.argv = [f"python -m benchmarks {script.name}", *args]  # argparse's prog in --help
    status = module.main(args)
    return status if isinstance(status, int) else 0


if __name__ == "__main__":
    sys.exit(main())
