"""The module objects that stand for torch's modules, and the one error they raise for what minitensor lacks.

A TorchModule named 'torch.nn' answers every attribute from minitensor.nn (names.TORCH_MODULES says which part of
minitensor stands for which torch module); an attribute that is itself a listed torch module ('torch.nn.functional')
is that module's TorchModule, so `torch.nn.functional.relu` and `import torch.nn.functional as F` reach the same
object. What minitensor does not have raises MissingAttribute (an AttributeError, so that `hasattr(torch, 'compile')`
probes answer False as usual) or, for an import, MissingModule (a ModuleNotFoundError): each names the torch API and
the file and line of the program that asked for it.
"""

from __future__ import annotations

import os
import sys
import types

from .names import TORCH_MODULES, resolve

_HERE = os.path.dirname(os.path.abspath(__file__))


class NotInMinitensor(Exception):
    """The mark of minitensor.compat's error: `except minitensor.compat.NotInMinitensor` catches both kinds."""


class MissingAttribute(NotInMinitensor, AttributeError):
    """A torch attribute (torch.foo, torch.nn.Foo) that minitensor does not have."""


class MissingModule(NotInMinitensor, ModuleNotFoundError):
    """A torch module (import torch.distributed) or an imported name (from torch.nn import Foo) minitensor lacks.

    Its `name` is left None: the import machinery swallows a ModuleNotFoundError whose name is the module it was
    probing for (`from torch.nn import Foo` probes for a submodule torch.nn.Foo), and this message must reach the
    program."""


def call_site() -> str:
    """'file:line' of the innermost frame outside minitensor.compat and the import machinery: the program's line."""
    frame = sys._getframe(1)
    while frame is not None:
        file = frame.f_code.co_filename
        if not (file.startswith(_HERE) or file.startswith("<frozen importlib")):
            return f"{file}:{frame.f_lineno}"
        frame = frame.f_back
    return "an unknown place"


def not_in_minitensor(api: str) -> str:
    """The error's one line: what is missing and where the program asked for it."""
    return f"{api} is not in minitensor (used at {call_site()}); minitensor.compat maps only what minitensor has"


class TorchModule(types.ModuleType):
    """A torch module name over its minitensor counterpart. Attributes set on it stay on it (a program's
    `torch.backends.cudnn.benchmark = True` does not change minitensor for the code outside the mapping)."""

    def __init__(self, name: str, target):
        super().__init__(name)
        self.__dict__["__minitensor__"] = target
        # A package: the import system walks through it to import its submodules (import torch.nn.functional).
        self.__path__ = []

    def __getattr__(self, name: str):  # called only for names not in the module's own dict
        child = f"{self.__name__}.{name}"
        if child in TORCH_MODULES:
            return torch_module(child)
        try:
            return getattr(self.__dict__["__minitensor__"], name)
        except AttributeError:
            pass
        raise MissingAttribute(not_in_minitensor(child), name=name, obj=self)

    def __dir__(self):
        children = {n.rpartition(".")[2] for n in TORCH_MODULES if n.rpartition(".")[0] == self.__name__}
        return sorted(set(dir(self.__dict__["__minitensor__"])) | children | set(self.__dict__))

    def __repr__(self):
        target = self.__dict__["__minitensor__"]
        return f"<module {self.__name__!r}: minitensor's {getattr(target, '__name__', type(target).__name__)}>"


# One TorchModule per torch name for the whole process, so that every path to it gives the same object.
_MODULES: dict[str, TorchModule] = {}


def torch_module(name: str) -> TorchModule:
    """The TorchModule standing for the torch module `name` (a key of TORCH_MODULES)."""
    module = _MODULES.get(name)
    if module is None:
        module = _MODULES.setdefault(name, TorchModule(name, resolve(TORCH_MODULES[name])))
    return module
