"""as_torch(): `import torch` gives minitensor inside the block, and sys.modules is as it was after it.

Inside the block a finder placed first on sys.meta_path answers every import of `torch` and `torch.*` with the
TorchModule of that name (proxy.py), or raises MissingModule for a torch module minitensor lacks. Torch modules
already imported (real torch) are taken out of sys.modules for the block, so that the finder is asked.

On exit sys.modules is put back exactly as it was on entry: the real torch modules return, and every module first
imported inside the block leaves sys.modules, the program's own modules among them (a later `import my_model` outside
the block imports it afresh, against real torch). The module objects the program holds are not changed: a model class
imported in the block keeps computing with minitensor after the block, through the `torch` its module bound. The one
exception is minitensor's own modules: one first imported in the block stays (a second copy of the engine would have
its own Tensor class and random generator). An `import torch` that runs after the block, such as one inside a
function called later, gets whatever sys.modules then holds: real torch if it is installed.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

from .names import TORCH_MODULES, is_torch_name
from .proxy import MissingModule, not_in_minitensor, torch_module


class TorchFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds and loads `torch` and `torch.*` as their TorchModules; refuses the torch modules minitensor lacks."""

    def find_spec(self, fullname, path=None, target=None):
        if not is_torch_name(fullname):
            return None
        if fullname not in TORCH_MODULES:
            raise MissingModule(not_in_minitensor(fullname))
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        return torch_module(spec.name)

    def exec_module(self, module):
        pass  # a TorchModule is complete when made: its attributes are minitensor's


def _is_minitensor(name: str) -> bool:
    return name == "minitensor" or name.startswith("minitensor.")


@contextlib.contextmanager
def as_torch():
    """Inside the block, `import torch` (and torch.nn, torch.optim, ...) imports minitensor; yields the `torch` module.

        with minitensor.compat.as_torch():
            import my_model          # my_model's `import torch` is minitensor
        model = my_model.GPT(...)    # still minitensor: the module keeps what it imported

    On exit sys.modules is restored exactly (see the module docstring), so real torch works again in the process.
    """
    before = dict(sys.modules)
    for name in [n for n in before if is_torch_name(n)]:
        del sys.modules[name]
    finder = TorchFinder()
    sys.meta_path.insert(0, finder)
    try:
        yield importlib.import_module("torch")  # through the finder: sys.modules["torch"] is the module yielded
    finally:
        sys.meta_path.remove(finder)
        for name in [n for n in sys.modules if n not in before and not _is_minitensor(n)]:
            del sys.modules[name]
        # Restoring, not aliasing: every entry gets back the very module object it held on entry.
        sys.modules.update({n: m for n, m in before.items() if sys.modules.get(n) is not m})


class _OneFile(importlib.abc.MetaPathFinder):
    """Finds one module name at one file path."""

    def __init__(self, name: str, path: str):
        self.name, self.path = name, path

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        return importlib.util.spec_from_file_location(fullname, self.path)


def import_file(path: str, name: str):
    """Import the Python file at `path` as the module `name` through the import system (the module is in
    sys.modules while it runs, where dataclasses and pickle look for it); the file's folder is searched first for
    the modules it imports, as when it runs as a script. ValueError when `name` is already imported."""
    if name in sys.modules:
        raise ValueError(f"import_file: a module named {name!r} is already imported")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such file: {path}")
    folder = os.path.dirname(os.path.abspath(path))
    finder = _OneFile(name, path)
    sys.meta_path.insert(0, finder)
    sys.path.insert(0, folder)
    try:
        return importlib.import_module(name)
    finally:
        sys.meta_path.remove(finder)
        sys.path.remove(folder)


def load_file(path: str, name: str):
    """The file at `path` imported as module `name` with torch mapped to minitensor (as_torch); the module is not
    left in sys.modules (as_torch restores it), and its `torch` stays minitensor."""
    with as_torch():
        return import_file(path, name)
