"""Containers of child modules: `Sequential`, `ModuleList`, `ModuleDict`, as in torch.nn.modules.container."""

from __future__ import annotations

import numbers
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping

from .module import Module

__all__ = ["ModuleDict", "ModuleList", "Sequential"]


def _index(where: str, idx, n: int) -> int:
    if isinstance(idx, bool) or not isinstance(idx, numbers.Integral):
        raise TypeError(f"{where} indices must be integers or slices, got {type(idx).__name__}")
    if not -n <= idx < n:
        raise IndexError(f"{where} index {idx} is out of range for length {n}")
    return int(idx) % n


class Sequential(Module):
    """Modules called in order: Sequential(a, b, c)(x) = c(b(a(x))). Also Sequential(OrderedDict(name=module))."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, m in args[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(args):
                if not isinstance(m, Module):
                    raise TypeError(f"Sequential: argument {i} is a {type(m).__name__}, expected a Module")
                self.add_module(str(i), m)

    def __getitem__(self, idx):
        items = list(self._modules.items())
        if isinstance(idx, slice):
            return Sequential(OrderedDict(items[idx]))
        return items[_index("Sequential", idx, len(items))][1]

    def __setitem__(self, idx, module) -> None:
        key = list(self._modules)[_index("Sequential", idx, len(self._modules))]
        setattr(self, key, module)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def append(self, module: Module) -> Sequential:
        self.add_module(str(len(self)), module)
        return self

    def forward(self, input):
        for m in self._modules.values():
            input = m(input)
        return input


class ModuleList(Module):
    """A list of modules, registered as children '0', '1', ... (no forward of its own)."""

    def __init__(self, modules: Iterable[Module] | None = None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _rebuild(self, mods: list) -> None:
        self._modules.clear()
        for i, m in enumerate(mods):
            self.add_module(str(i), m)

    def __getitem__(self, idx):
        mods = list(self._modules.values())
        if isinstance(idx, slice):
            return ModuleList(mods[idx])
        return mods[_index("ModuleList", idx, len(mods))]

    def __setitem__(self, idx, module: Module) -> None:
        i = _index("ModuleList", idx, len(self))
        if not isinstance(module, Module):
            raise TypeError(f"ModuleList: can only hold Modules, got {type(module).__name__}")
        self._modules[str(i)] = module

    def __delitem__(self, idx) -> None:
        mods = list(self._modules.values())
        if isinstance(idx, slice):
            del mods[idx]
        else:
            del mods[_index("ModuleList", idx, len(mods))]
        self._rebuild(mods)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __iadd__(self, modules: Iterable[Module]) -> ModuleList:
        return self.extend(modules)

    def append(self, module: Module) -> ModuleList:
        if not isinstance(module, Module):
            raise TypeError(f"ModuleList.append: expected a Module, got {type(module).__name__}")
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        if isinstance(modules, Module) and not isinstance(modules, (ModuleList, Sequential)):
            raise TypeError("ModuleList.extend: expected an iterable of Modules, got a single Module")
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> None:
        mods = list(self._modules.values())
        mods.insert(index, module)
        for m in mods:
            if not isinstance(m, Module):
                raise TypeError(f"ModuleList.insert: expected a Module, got {type(m).__name__}")
        self._rebuild(mods)

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleList has no forward(); iterate over it and call its modules")


class ModuleDict(Module):
    """An ordered dict of named child modules (no forward of its own)."""

    def __init__(self, modules: Mapping | Iterable | None = None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        try:
            return self._modules[key]
        except KeyError:
            raise KeyError(f"ModuleDict has no key {key!r}; keys are {list(self._modules)}") from None

    def __setitem__(self, key: str, module: Module) -> None:
        if not isinstance(module, Module):
            raise TypeError(f"ModuleDict: can only hold Modules, got {type(module).__name__} for key {key!r}")
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key) -> bool:
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def pop(self, key: str) -> Module:
        m = self[key]
        del self._modules[key]
        return m

    def clear(self) -> None:
        self._modules.clear()

    def update(self, modules) -> None:
        items = modules.items() if isinstance(modules, Mapping) else modules
        for item in items:
            if not isinstance(item, (tuple, list)) or len(item) != 2:
                raise TypeError(f"ModuleDict.update: expected (name, Module) pairs, got {item!r}")
            self[item[0]] = item[1]

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleDict has no forward(); index it and call its modules")
