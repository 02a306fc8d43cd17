"""Saving and loading state dicts as `.npz` archives: `save(obj, path)` and `load(path)`.

This file owns the on-disk format of every checkpoint (model, optimizer, scheduler). It never
pickles: arrays are written with `np.lib.format.write_array(..., allow_pickle=False)` and read
with `np.load(..., allow_pickle=False)`, so loading a file cannot run code.

Key scheme (what `np.load(path).files` shows):
    Every array leaf of the nested object is one `.npy` member named by its path from the
    root, the path components joined by '/'. A model's flat state dict therefore stores its
    keys verbatim ('encoder.layers.0.norm1.weight'), and an optimizer's state dict stores
    'state/0/exp_avg', 'param_groups/0/...' and so on. In a component, '%' is written '%25'
    and '/' is written '%2F' so that any string key survives.
    One extra member, '__minitensor__', holds a JSON text (a NumPy unicode array, not an
    object array) describing the nesting: which containers are dicts, lists or tuples, the
    type of each dict key (str or int, since optimizer states are keyed by index), and the
    value of every non-array leaf (Python int, float, bool, str, None). Python floats are
    written with repr, so they round-trip exactly (inf and nan included).
    A plain `.npz` without that member (e.g. written by `np.savez`) loads as a flat dict
    name -> array.

Deviation from PyTorch, flagged: `torch.save` pickles arbitrary objects; here only dicts,
lists, tuples, arrays (an `mt.Tensor` is saved as its array and loads back as an array) and
Python scalars/strings/None are accepted, and `load` returns NumPy arrays, never Tensors.
"""
from __future__ import annotations

import json
import os
import tempfile
import zipfile
from collections import OrderedDict
from collections.abc import Mapping

import numpy as np

__all__ = ["save", "load"]

_META = "__minitensor__"
_FORMAT_VERSION = 1


def _escape(component: str) -> str:
    return component.replace("%", "%25").replace("/", "%2F")


def _is_tensor(x) -> bool:
    from .tensor import Tensor  # imported late: this file must not depend on the import order
    return isinstance(x, Tensor)


def _flatten(obj, path: list[str], arrays: "OrderedDict[str, np.ndarray]"):
    """Return the JSON skeleton of `obj`, putting its arrays into `arrays` by path."""
    if _is_tensor(obj):
        obj = obj.data
    if isinstance(obj, np.ndarray):
        if obj.dtype.hasobject:
            raise TypeError(f"save: the array at {'/'.join(path) or '<root>'!r} has dtype object; "
                            "only numeric, bool and string arrays can be saved (object arrays would need pickle)")
        key = "/".join(_escape(c) for c in path)
        if key == _META:
            raise ValueError(f"save: the key {_META!r} is reserved for the file's structure")
        if key in arrays:  # e.g. the int key 1 and the str key '1' in one dict
            raise ValueError(f"save: two entries map to the same archive key {key!r}")
        arrays[key] = obj
        return {"a": key}
    if isinstance(obj, np.generic):  # NumPy scalar: keep its dtype as a 0-d array
        return _flatten(np.asarray(obj), path, arrays)
    if obj is None or isinstance(obj, (bool, str)):
        return {"v": obj}
    if isinstance(obj, int):
        return {"i": str(obj)}  # as text: JSON readers may round big ints through double
    if isinstance(obj, float):
        return {"f": repr(obj)}
    if isinstance(obj, Mapping):
        items = []
        for k, v in obj.items():
            if isinstance(k, bool) or not isinstance(k, (str, int)):
                raise TypeError(f"save: dict keys must be str or int, got {type(k).__name__} "
                                f"{k!r} at {'/'.join(path) or '<root>'!r}")
            items.append([k if isinstance(k, str) else {"i": k}, _flatten(v, path + [str(k)], arrays)])
        return {"d": items}
    if isinstance(obj, (list, tuple)):
        kids = [_flatten(v, path + [str(i)], arrays) for i, v in enumerate(obj)]
        return {"t" if isinstance(obj, tuple) else "l": kids}
    raise TypeError(f"save: cannot store a {type(obj).__name__} at {'/'.join(path) or '<root>'!r}; "
                    "expected dict, list, tuple, np.ndarray, Tensor, int, float, bool, str or None")


def _unflatten(node, arrays, path: str):
    if not isinstance(node, dict) or len(node) != 1:
        raise ValueError(f"malformed structure entry at {path!r}")
    (kind, val), = node.items()
    if kind == "a":
        return arrays(val)
    if kind == "v":
        return val
    if kind == "i":
        return int(val)
    if kind == "f":
        return float(val)
    if kind == "d":
        out = OrderedDict()
        for k, v in val:
            key = int(k["i"]) if isinstance(k, dict) else k
            out[key] = _unflatten(v, arrays, f"{path}/{key}")
        return out
    if kind == "l":
        return [_unflatten(v, arrays, f"{path}/{i}") for i, v in enumerate(val)]
    if kind == "t":
        return tuple(_unflatten(v, arrays, f"{path}/{i}") for i, v in enumerate(val))
    raise ValueError(f"unknown structure entry {kind!r} at {path!r}")


def save(obj, path) -> None:
    """Write `obj` (a state dict, possibly nested) to `path` as an uncompressed `.npz`.

    The file is written to a temporary name next to `path` and renamed over it, so a crash
    never leaves a half-written checkpoint. `path` is used exactly (no '.npz' is appended).
    """
    if not isinstance(obj, Mapping):
        raise TypeError(f"save: expected a dict (a state_dict), got {type(obj).__name__}")
    path = os.fspath(path)
    arrays: OrderedDict[str, np.ndarray] = OrderedDict()
    skeleton = _flatten(obj, [], arrays)
    meta = json.dumps({"format": "minitensor", "version": _FORMAT_VERSION, "tree": skeleton},
                      allow_nan=True)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".npz", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f, zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
            for key, arr in arrays.items():
                with zf.open(key + ".npy", "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, np.asanyarray(arr), allow_pickle=False)
            with zf.open(_META + ".npy", "w") as member:
                np.lib.format.write_array(member, np.array(meta), allow_pickle=False)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def load(path):
    """Read a file written by `save` (or any `.npz` of plain arrays) back into dicts of arrays.

    Raises FileNotFoundError when `path` does not exist and ValueError naming the path when it
    is not a readable `.npz`, or when a member holds a pickled object array (refused, never run).
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"load: no such file: {path!r}")
    try:
        npz = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
        raise ValueError(f"load: {path!r} is not a readable .npz archive ({type(e).__name__}: {e})") from None
    if not isinstance(npz, np.lib.npyio.NpzFile):
        raise ValueError(f"load: {path!r} holds a single .npy array, expected an .npz archive written by save()")

    with npz:
        def get(key):
            try:
                return npz[key]
            except KeyError:
                raise ValueError(f"load: {path!r} is corrupt: member {key!r} listed in its structure is missing") from None
            except ValueError as e:
                if "allow_pickle" in str(e) or "Object arrays" in str(e):
                    raise ValueError(f"load: {path!r} member {key!r} is a pickled object array; "
                                     "refusing to unpickle (minitensor files never contain pickles)") from None
                raise ValueError(f"load: {path!r} member {key!r} is corrupt: {e}") from None
            except (OSError, EOFError, zipfile.BadZipFile) as e:
                raise ValueError(f"load: {path!r} member {key!r} is corrupt ({type(e).__name__}: {e})") from None

        if _META not in npz.files:
            return OrderedDict((k, get(k)) for k in npz.files)
        try:
            meta = json.loads(str(get(_META)))
            tree = meta["tree"]
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise ValueError(f"load: {path!r} has an unreadable {_META!r} entry ({e})") from None
        if meta.get("version", 0) > _FORMAT_VERSION:
            raise ValueError(f"load: {path!r} was written by a newer format (version {meta['version']}, "
                             f"this reader knows {_FORMAT_VERSION})")
        try:
            return _unflatten(tree, get, "<root>")
        except ValueError as e:
            if str(e).startswith("load:"):
                raise
            raise ValueError(f"load: {path!r} is corrupt: {e}") from None

