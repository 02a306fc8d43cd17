"""Saving and loading state dicts as `.npz` archives: `save(obj, path)` and `load(path)`.

This file owns the on-disk format of every checkpoint (model, optimizer, scheduler). It never
pickles: arrays are written with `np.lib.format.write_array(..., allow_pickle=False)` and read
back member by member with `np.lib.format.read_array(..., allow_pickle=False)`, so loading a file
cannot run code.

Key scheme (what `np.load(path).files` shows):
    Every array leaf of the nested object is one `.npy` member named by its path from the
    root, the path components joined by '/'. A model's flat state dict therefore stores its
    keys verbatim ('encoder.layers.0.norm1.weight'), and an optimizer's state dict stores
    'state/0/exp_avg', 'param_groups/0/...' and so on. In a component, '%' is written '%25',
    '/' is written '%2F', NUL (which ends a name in a zip directory) '%00' and a lone surrogate
    (which UTF-8 cannot encode) '%uXXXX'; a top-level key spelled like the structure member is
    written '%5F_minitensor__'. So every str or int key that `save` accepts loads back unchanged.
    One extra member, '__minitensor__', holds a JSON text (a NumPy unicode array, not an
    object array) describing the nesting: which containers are dicts, lists or tuples, the
    type of each dict key (str or int, since optimizer states are keyed by index), the exact
    member name of every array, and the value of every non-array leaf (Python int, float, bool,
    str, None). Python floats are written with repr, so they round-trip exactly (inf and nan
    included). `load` reads members by those exact names, never through NumPy's name lookup
    (which also answers 'a.npy' for the member of key 'a').
    A plain `.npz` without that member (e.g. written by `np.savez`) loads as a flat dict
    name -> array.

What `load` refuses, always with one ValueError naming the path and the problem (and no chained
exception): anything that is not a zip archive (a text file renamed `.npz`, a single `.npy`), a
truncated or corrupt archive, a member that is not a `.npy` array, an object (pickled) array, a
member whose data is shorter or longer than its header says, a structure entry that is not one
of those `save` writes, nesting deeper than `MAX_DEPTH`, a member the structure lists but the
archive lacks, and a member the archive holds but the structure does not list.

Devices: the file is host `.npz` always. A device array (CuPy's, or the fake device's) is
copied to the host and written as any array; its structure entry is {"c": [member, "cuda:0"]}, naming the
device it came from, and a file holding one is format version 2 (a host-only file stays version 1, readable
by older readers). `load(path, map_location=None)` puts each array back where it was saved (a missing device
is torch's error, suggesting map_location="cpu"), or where `map_location` says, as torch: "cpu", "cuda", a
device, a dict {saved device: target device} ("cpu" a key too), or a callable `f(array, saved device name)` that
returns the array placed (or None: where it was saved). So a checkpoint written on the GPU loads on the CPU and
back, bit for bit.

Deviation from PyTorch, flagged: `torch.save` pickles arbitrary objects; here only dicts,
lists, tuples, arrays (an `mt.Tensor` is saved as its array and loads back as an array) and
Python scalars/strings/None are accepted, and `load` returns arrays (NumPy's, or a device's), never Tensors.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import stat
import tempfile
import zipfile
import zlib
from collections import OrderedDict
from collections.abc import Mapping

import numpy as np

from . import devices
from .core import is_tensor_like

__all__ = ["MAX_DEPTH", "atomic_write", "load", "save"]

_META = "__minitensor__"
_FORMAT_VERSION = 2  # 2: device arrays ({"c": ...} entries); a file without one is still written as version 1
# Containers nested deeper than this are refused by both `save` and `load`: a real state dict
# nests 4 deep, and a bound keeps a crafted file from exhausting Python's recursion limit.
MAX_DEPTH = 100
# A zip directory stores a member's name length in 16 bits.
_MAX_NAME_BYTES = 0xFFFF


class _Malformed(Exception):
    """Raised inside `load` with what is wrong; `load` turns it into one ValueError naming the path."""


def _escape(component: str) -> str:
    out = []
    for c in component:
        if c in "%/\0":
            out.append(f"%{ord(c):02X}")
        elif "\ud800" <= c <= "\udfff":  # a lone surrogate: legal in a str, not encodable as UTF-8
            out.append(f"%u{ord(c):04X}")
        else:
            out.append(c)
    return "".join(out)


def _where(path: list[str]) -> str:
    return repr("/".join(path)) if path else "<root>"


def _array_key(path: list[str], arrays) -> str:
    """The archive member name (without '.npy') of the array at `path`; refuses a collision."""
    key = "/".join(_escape(c) for c in path)
    if key == _META:
        key = "%5F" + key[1:]
    if len((key + ".npy").encode("utf-8")) > _MAX_NAME_BYTES:
        raise ValueError(
            f"save: the key at {_where(path)[:200]} is too long for a zip archive "
            f"(its member name takes more than {_MAX_NAME_BYTES} bytes)"
        )
    if key in arrays:  # e.g. the int key 1 and the str key '1' in one dict
        raise ValueError(
            f"save: the key at {_where(path)} maps to the archive member {key!r}, "
            "which another entry already uses (an int key and the same number as a str?)"
        )
    return key


def _flatten(obj, path: list[str], arrays: OrderedDict[str, np.ndarray], depth: int = 0):
    """Return the JSON skeleton of `obj`, putting its arrays into `arrays` by member name (a device array
    copied to the host, its entry naming the device)."""
    if depth > MAX_DEPTH:
        raise ValueError(
            f"save: nesting deeper than {MAX_DEPTH} containers at {_where(path[:3])}... "
            "(a container that holds itself?)"
        )
    if is_tensor_like(obj):
        obj = obj._data
    if devices.is_array(obj) and not devices.is_host(obj):
        node = _flatten(devices.to_host(obj), path, arrays, depth)
        return {"c": [node["a"], str(devices.device_of(obj))]}
    if isinstance(obj, np.ndarray):
        if obj.dtype.hasobject:
            raise TypeError(
                f"save: the array at {_where(path)} has dtype object; only numeric, bool "
                "and string arrays can be saved (object arrays would need pickle)"
            )
        key = _array_key(path, arrays)
        arrays[key] = obj
        return {"a": key}
    if isinstance(obj, np.generic):  # NumPy scalar: keep its dtype as a 0-d array
        return _flatten(np.asarray(obj), path, arrays, depth)
    if obj is None or isinstance(obj, (bool, str)):
        return {"v": obj}
    if isinstance(obj, int):
        try:
            return {"i": str(obj)}  # as text: JSON readers may round big ints through double
        except ValueError:  # beyond Python's int-to-text digit limit; int() could not read it back
            raise ValueError(f"save: the int at {_where(path)} has too many digits to store") from None
    if isinstance(obj, float):
        return {"f": repr(obj)}
    if isinstance(obj, Mapping):
        items = []
        for k, v in obj.items():
            if isinstance(k, bool) or not isinstance(k, (str, int)):
                raise TypeError(f"save: dict keys must be str or int, got {type(k).__name__} {k!r} at {_where(path)}")
            node = _flatten(v, path + [str(k)], arrays, depth + 1)
            items.append([k if isinstance(k, str) else {"i": k}, node])
        return {"d": items}
    if isinstance(obj, (list, tuple)):
        kids = [_flatten(v, path + [str(i)], arrays, depth + 1) for i, v in enumerate(obj)]
        return {"t" if isinstance(obj, tuple) else "l": kids}
    raise TypeError(
        f"save: cannot store a {type(obj).__name__} at {_where(path)}; "
        "expected dict, list, tuple, np.ndarray, Tensor, int, float, bool, str or None"
    )


def _unflatten(node, read, where: str, depth: int = 0):
    """Rebuild the object from its JSON skeleton; `read(member)` returns an array."""
    if depth > MAX_DEPTH:
        raise _Malformed(f"its structure nests deeper than {MAX_DEPTH} containers")
    if not isinstance(node, dict) or len(node) != 1:
        raise _Malformed(
            f"is corrupt: malformed structure entry at {where}: expected a one-key object, got {_short(node)}"
        )
    ((kind, val),) = node.items()
    expected = {"a": str, "c": list, "v": (str, bool, type(None)), "i": str, "f": str, "d": list, "l": list, "t": list}
    if kind not in expected:
        raise _Malformed(f"is corrupt: unknown structure entry {kind!r} at {where}")
    if not isinstance(val, expected[kind]):
        raise _Malformed(f"is corrupt: malformed structure entry {kind!r} at {where}: got {_short(val)}")
    if kind == "a":
        return read(val, where)
    if kind == "c":  # a device array: its member, and the device it was saved from
        if len(val) != 2 or not all(isinstance(v, str) for v in val):
            raise _Malformed(f"is corrupt: malformed device entry at {where}: got {_short(val)}")
        try:
            saved_on = devices.device(val[1])
        except ValueError:
            raise _Malformed(f"is corrupt: unknown device {_short(val[1])} at {where}") from None
        return read(val[0], where, saved_on)
    if kind == "v":
        return val
    if kind in "if":
        try:
            return int(val) if kind == "i" else float(val)
        except ValueError:
            what = "int" if kind == "i" else "float"
            raise _Malformed(f"is corrupt: malformed {what} {_short(val)} at {where}") from None
    if kind == "d":
        out = OrderedDict()
        for item in val:
            key = _dict_key(item, where)
            if key in out:
                raise _Malformed(f"is corrupt: duplicate key {key!r} at {where}")
            out[key] = _unflatten(item[1], read, f"{where}/{key}", depth + 1)
        return out
    kids = [_unflatten(v, read, f"{where}/{i}", depth + 1) for i, v in enumerate(val)]
    return kids if kind == "l" else tuple(kids)


def _dict_key(item, where: str):
    """The key of one `[key, node]` pair of a dict entry: a str, or {"i": int} for an int key."""
    if not isinstance(item, list) or len(item) != 2:
        raise _Malformed(f"is corrupt: malformed dict item at {where}: expected [key, value], got {_short(item)}")
    k = item[0]
    if isinstance(k, str):
        return k
    if isinstance(k, dict) and len(k) == 1 and isinstance(k.get("i"), int) and not isinstance(k["i"], bool):
        return k["i"]
    raise _Malformed(f"is corrupt: malformed dict key {_short(k)} at {where}")


def _short(x) -> str:
    text = repr(x)
    return text if len(text) <= 80 else text[:77] + "..."


def _target_mode(path: str) -> int:
    """The permissions a plain `open(path, 'wb')` would give: the existing file's, else 0o666 less the umask."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        umask = os.umask(0)  # the only portable way to read the umask is to set it
        os.umask(umask)
        return 0o666 & ~umask


def save(obj, path) -> None:
    """Write `obj` (a state dict, possibly nested) to `path` as an uncompressed `.npz`.

    The file is written to a temporary name next to `path`, flushed to disk and renamed over
    it (atomic_write), so a crash or an exception at any point leaves either the previous file or
    the new one, never a half-written checkpoint. If `path` is a symlink, the file it points to is
    updated and the link kept. The new file gets the permissions `open()` would give (the existing
    file's, else those of the umask). `path` is used exactly (no '.npz' is appended).
    """
    if not isinstance(obj, Mapping):
        raise TypeError(f"save: expected a dict (a state_dict), got {type(obj).__name__}")
    path = os.fspath(path)
    arrays: OrderedDict[str, np.ndarray] = OrderedDict()
    skeleton = _flatten(obj, [], arrays)
    tree = json.dumps(skeleton, allow_nan=True)
    version = _FORMAT_VERSION if '{"c": [' in tree else 1  # (a key's text is escaped inside its JSON string)
    meta = json.dumps({"format": "minitensor", "version": version, "tree": skeleton}, allow_nan=True)
    with atomic_write(path, "wb", suffix=".npz") as f:
        with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
            for key, arr in arrays.items():
                with zf.open(key + ".npy", "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, np.asanyarray(arr), allow_pickle=False)
            with zf.open(_META + ".npy", "w") as member:
                np.lib.format.write_array(member, np.array(meta), allow_pickle=False)


def _resolve_links(path: str) -> str:
    """The file that writing to `path` would change: a symlink (or a chain of them) is followed to
    its end, as `open(path, 'w')` follows it, so the link stays a link and its target gets the new
    contents. A dangling link gives its missing target, which the write then creates (as open()
    does); a loop raises open()'s ELOOP error."""
    real = os.path.realpath(path)
    if os.path.islink(real):  # realpath stops on a loop (non-strict) and returns a link still
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)
    return real


@contextlib.contextmanager
def atomic_write(path, mode: str = "w", *, suffix: str = ".tmp", **open_kwargs):
    """`with atomic_write(path) as f:` writes `f` to a temporary file beside the target, flushes it to
    disk and renames it over the target, so a crash, an exception or a Ctrl-C at any point leaves
    either the previous file or the new one, never a half-written one (the temporary is removed).

    Through a symlink the link's final target is updated and the link kept (_resolve_links). The new
    file gets the permissions `open()` would give (the existing file's, else 0o666 less the umask).
    `mode` is "w" (text; `open_kwargs` such as encoding go to open) or "wb"."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write: mode must be 'w' or 'wb', got {mode!r}")
    target = _resolve_links(os.fspath(path))
    file_mode = _target_mode(target)
    # beside the target (same filesystem, so the rename is atomic); mkstemp creates it 0600, chmod fixes that
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=suffix, dir=os.path.dirname(target))
    try:
        with open(fd, mode, **open_kwargs) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())  # the data reaches the disk before the name points at it
        os.chmod(tmp, file_mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        raise


def load(path, map_location=None):
    """Read a file written by `save` (or any `.npz` of plain arrays) back into dicts of arrays.

    map_location, as torch's: None puts each array on the device it was saved from; "cpu", "cuda" or a device
    puts every array there; a dict {saved device: target} moves the arrays of the devices it names ("cpu" too);
    a callable is called as `map_location(host_array, "cuda:0")` (the array as read, the name of the device it
    was saved from) and returns the array to keep, or None for the saved device (torch's
    `lambda storage, loc: storage` keeps everything on the CPU). A saved device that is not here is a
    RuntimeError naming it and suggesting map_location="cpu".

    Raises FileNotFoundError when `path` does not exist and one ValueError naming the path and
    what is wrong for any file that is not such an archive (see the module docstring for the
    list). No NumPy message is passed through and nothing is chained: a malformed file is
    refused, never "loaded unsafely".
    """
    path = os.fspath(path)
    place = _placement(map_location)
    if not os.path.exists(path):
        raise FileNotFoundError(f"load: no such file: {path!r}")
    if os.path.isdir(path):
        raise ValueError(f"load: {path!r} is a directory, expected a file written by mt.save")
    try:
        return _load_archive(path, place)
    except _Malformed as e:
        problem = str(e)
    # raised here, after the handler, so that no NumPy or zipfile exception is chained to it
    raise ValueError(f"load: {path!r} {problem}")


# Everything reading a hostile file can raise, besides our own checks.
_READ_ERRORS = (
    ValueError,
    TypeError,
    KeyError,
    OSError,
    EOFError,
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    zlib.error,
    NotImplementedError,
    OverflowError,
    MemoryError,
    RecursionError,
    UnicodeError,
)


def _placement(map_location):
    """From load's map_location, the function (host array, saved device, where) -> the array placed."""
    if map_location is None:
        return lambda array, saved, where: _placed(array, saved, saved, where)
    if isinstance(map_location, (str, int)) and not isinstance(map_location, bool):
        target = devices.device(map_location)
        return lambda array, saved, where: _placed(array, saved, target, where)
    if isinstance(map_location, Mapping):
        table = {devices.device(k): devices.device(v) for k, v in map_location.items()}
        return lambda array, saved, where: _placed(array, saved, table.get(saved, saved), where)
    if callable(map_location):
        return lambda array, saved, where: _called(map_location, array, saved, where)
    raise TypeError(
        f"load: map_location must be None, a device ('cpu', 'cuda', mt.device(...)), a dict of devices or a "
        f"callable (array, saved device) -> array, got {type(map_location).__name__}"
    )


def _called(map_location, array: np.ndarray, saved_on, where: str):
    """A callable map_location's placement of one array: its result, or the saved device's when it gives None."""
    result = map_location(array, str(saved_on))
    if result is None:
        return _placed(array, saved_on, saved_on, where)
    if not devices.is_array(result):
        raise TypeError(
            f"load: map_location returned {type(result).__name__} for the array at {where}; expected an array "
            "(NumPy's or a device's) or None"
        )
    return result


def _placed(array: np.ndarray, saved_on, target, where: str):
    """A host array read from the file, on `target` (torch's error when that device is not here)."""
    if target == devices.CPU:
        return array
    try:
        return devices.to_device(array, target)
    except RuntimeError as e:
        raise RuntimeError(
            f"load: attempting to deserialize an array on {saved_on} (at {where}) onto {target}, which is not "
            f"available: {e}. If you are running on a CPU-only machine, please use mt.load with "
            f"map_location='cpu' to map the arrays to the CPU"
        ) from None


def _load_archive(path: str, place):
    with open(path, "rb") as f:
        if f.read(6) == b"\x93NUMPY":
            raise _Malformed("holds a single .npy array, expected an .npz archive written by mt.save")
    try:
        zf = zipfile.ZipFile(path)
    except _READ_ERRORS as e:
        raise _Malformed(f"is not a readable .npz archive ({_reason(e)})") from None
    with zf:
        names = zf.namelist()
        if len(set(names)) != len(names):
            raise _Malformed("is corrupt: its zip directory lists a member name twice")
        for name in names:
            if not name.endswith(".npy"):
                raise _Malformed(f"holds the member {name!r}, which is not a .npy array")
        if _META + ".npy" not in names:
            return OrderedDict(
                (name[:-4], place(_read_member(zf, name, repr(name[:-4])), devices.CPU, repr(name[:-4])))
                for name in names
            )
        return _load_with_structure(zf, names, place)


def _load_with_structure(zf: zipfile.ZipFile, names: list[str], place):
    meta_array = _read_member(zf, _META + ".npy", "the structure")
    if meta_array.shape != () or meta_array.dtype.kind != "U":
        raise _Malformed(
            f"has a malformed structure member {_META!r}: expected a 0-d text array, "
            f"got dtype {meta_array.dtype} shape {meta_array.shape}"
        )
    try:
        meta = json.loads(str(meta_array))
    except RecursionError:
        raise _Malformed(f"its structure nests deeper than {MAX_DEPTH} containers") from None
    except ValueError as e:
        raise _Malformed(f"has an unreadable structure member {_META!r} (invalid JSON: {e})") from None
    if not isinstance(meta, dict) or "tree" not in meta or meta.get("format") != "minitensor":
        raise _Malformed(
            f"has a malformed structure member {_META!r}: expected an object with 'format': 'minitensor' and a 'tree'"
        )
    version = meta.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise _Malformed(f"has a malformed format version {_short(version)}")
    if version > _FORMAT_VERSION:
        raise _Malformed(f"was written by a newer format (version {version}, this reader knows {_FORMAT_VERSION})")
    tree = meta["tree"]
    if not (isinstance(tree, dict) and set(tree) == {"d"}):
        raise _Malformed(f"is corrupt: its structure's root is not a dict (got {_short(tree)})")

    listed = set(names) - {_META + ".npy"}
    used = set()

    def read(member: str, where: str, saved_on=devices.CPU):
        name = member + ".npy"
        if name not in listed:
            raise _Malformed(f"is corrupt: the member {member!r} of {where} is missing")
        used.add(name)
        return place(_read_member(zf, name, where), saved_on, where)

    obj = _unflatten(tree, read, "<root>")
    unlisted = sorted(listed - used)
    if unlisted:
        raise _Malformed(f"is corrupt: it holds member(s) its structure does not list: {_short(unlisted)}")
    return obj


def _read_member(zf: zipfile.ZipFile, name: str, where: str) -> np.ndarray:
    """Read one `.npy` member, refusing object arrays and data whose size disagrees with its header."""
    try:
        info = zf.getinfo(name)
        with zf.open(info) as f:
            version = np.lib.format.read_magic(f)
            header = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
            if version in header:  # version 3.0 (UTF-8 field names) is left to read_array's own checks
                shape, _, dtype = header[version](f)
                if dtype.hasobject:
                    raise _Malformed(
                        f"member {name!r} ({where}) is an object array (it would need "
                        "unpickling); refused: minitensor files never contain pickles"
                    )
                needed = math.prod(shape) * dtype.itemsize
                if needed != info.file_size - f.tell():
                    raise _Malformed(
                        f"is corrupt: member {name!r} ({where}) declares {needed} bytes of "
                        f"{dtype} {shape} but holds {info.file_size - f.tell()}"
                    )
            f.seek(0)
            array = np.lib.format.read_array(f, allow_pickle=False)
            if f.read(1):
                raise _Malformed(f"is corrupt: member {name!r} ({where}) has bytes after its array data")
    except _READ_ERRORS as e:
        raise _Malformed(f"is corrupt: member {name!r} ({where}) cannot be read ({_reason(e)})") from None
    if array.dtype.hasobject:  # defensive: read_array refuses these when allow_pickle is False
        raise _Malformed(f"member {name!r} ({where}) is an object array; refused")
    return array


def _reason(e: BaseException) -> str:
    """A short cause for the message; NumPy's advice to load unsafely is never repeated."""
    text = str(e)
    if "pickle" in text.lower():
        text = "pickled data"
    return f"{type(e).__name__}: {text}"[:200]
