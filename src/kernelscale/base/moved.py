"""Import paths of modules that moved when the package was laid out by method family.

``import kernelscale.stagewise`` (and ``from kernelscale.datasets import load_dataset``, ...) keep
working: :class:`MovedModuleFinder` answers an old path with the module at its new one (the same
module object, so ``isinstance`` checks and monkeypatches see one module) and a
DeprecationWarning naming the new path. :mod:`kernelscale.persistence` translates class paths
recorded in model files through :data:`MOVED` without the warning.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

#: old module path -> new module path (kernelscale 0.1.0's flat layout -> one package per family)
MOVED = {
    "kernelscale.stagewise": "kernelscale.least_squares.stagewise",
    "kernelscale.fixed_point": "kernelscale.regularized.fixed_point",
    "kernelscale.coordinate_descent": "kernelscale.regularized.coordinate_descent",
    "kernelscale.woodbury": "kernelscale.slkl.woodbury",
    "kernelscale.datasets": "kernelscale.data.datasets",
    "kernelscale.virtual_digits": "kernelscale.data.virtual_digits",
    "kernelscale.lazy_files": "kernelscale.data.lazy_files",
}


def current_path(module_path):
    """Where ``module_path`` lives now (itself when it did not move)."""
    return MOVED.get(module_path, module_path)


class MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves the old paths of :data:`MOVED` to the modules at their new paths."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        new = MOVED[spec.name]
        warnings.warn(f"{spec.name} moved to {new}; import it from there (or from kernelscale).",
                      DeprecationWarning, stacklevel=3)
        return importlib.import_module(new)

    def exec_module(self, module):
        pass  # the module at the new path is already executed


def install():
    """Put the finder on ``sys.meta_path`` once."""
    if not any(isinstance(f, MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.append(MovedModuleFinder())
