"""The import graph of the kernelscale package: modules, import layers, edges and cycles.

    python -m benchmarks import_graph [SRC_PACKAGE] [--module-level]

An edge A -> B is an import of module B by module A, at module level or inside a function
(``--module-level``: only the imports that run when A is imported). ``from P import name`` counts
as an import of the submodule ``P.name`` when that is a module, else of ``P``. Layers are the
longest chain of imports over the graph with each cycle (strongly connected set) contracted;
cycles are the strongly connected sets of more than one module. Prints JSON with the figures,
the cycles, and the modules of more than 900 lines.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

DEFAULT_PACKAGE = Path(__file__).resolve().parents[2] / "src" / "kernelscale"


def modules(package):
    """{dotted name: (path, is_package)} of every module under ``package`` (a folder)."""
    package = Path(package)
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


def _module_level(tree):
    """The imports that run when the module is imported (module level, inside if/try blocks)."""
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, (ast.If, ast.Try)):
            todo.extend(node.body + node.orelse + getattr(node, "finalbody", [])
                        + [s for h in getattr(node, "handlers", []) for s in h.body])


def edges(mods, module_level=False):
    """The set of (importer, imported) pairs between the modules of ``mods``."""
    found = set()
    for name, (path, is_package) in mods.items():
        tree = ast.parse(path.read_text())
        package = name if is_package else name.rpartition(".")[0]
        for node in (_module_level(tree) if module_level else ast.walk(tree)):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                subs = [f"{source}.{a.name}" for a in node.names]
                targets = [t for t in subs if t in mods]
                if len(targets) < len(subs):
                    targets.append(source)
            else:
                continue
            for target in targets:
                while target and target not in mods:  # the longest known prefix
                    target = target.rpartition(".")[0]
                if target and target != name:
                    found.add((name, target))
    return found


def strongly_connected(nodes, pairs):
    """Tarjan's strongly connected sets of the directed graph (iterative)."""
    succ = {n: [] for n in nodes}
    for a, b in pairs:
        succ[a].append(b)
    index, low, on_stack, stack, sets = {}, {}, set(), [], []
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(succ[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        component.append(top)
                        if top == node:
                            break
                    sets.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(succ[child])))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return sets


def figures(package=DEFAULT_PACKAGE, module_level=False):
    """Modules, layers, edges, cycles and the modules over 900 lines of ``package``."""
    mods = modules(package)
    pairs = edges(mods, module_level)
    sets = strongly_connected(list(mods), pairs)
    set_of = {m: i for i, s in enumerate(sets) for m in s}
    succ = {}
    for a, b in pairs:
        if set_of[a] != set_of[b]:
            succ.setdefault(set_of[a], set()).add(set_of[b])
    depth = {}
    for i in sorted(range(len(sets)), key=lambda i: i):  # Tarjan emits successors first
        depth[i] = 1 + max((depth[j] for j in succ.get(i, ())), default=0)
    lines = {m: sum(1 for _ in path.open()) for m, (path, _) in mods.items()}
    return {
        "modules": len(mods),
        "layers": max(depth.values()),
        "edges": len(pairs),
        "cycles": [s for s in sets if len(s) > 1],
        "over_900_lines": {m: n for m, n in sorted(lines.items()) if n > 900},
    }


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    package = next((a for a in argv if not a.startswith("--")), DEFAULT_PACKAGE)
    print(json.dumps(figures(package, module_level="--module-level" in argv), indent=1))


if __name__ == "__main__":
    sys.exit(main())
