"""mt.save / mt.load: round trips of flat and nested state dicts, and the refusals.

The format is `.npz` without pickles; see minitensor/serialization.py for the key scheme.
"""

from __future__ import annotations

import io
import json
import os
import re
import stat
import tempfile
import traceback
import warnings
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import minitensor as mt
from minitensor.serialization import load, save


def _same_exactly(a, b, where="<root>"):
    """Exact structural equality, bit for bit: container and key types, array dtypes, shapes and bytes (-0.0 != 0.0)."""
    assert type(a) is type(b) or (isinstance(a, dict) and isinstance(b, dict)), (where, type(a), type(b))
    if isinstance(a, dict):
        assert [(type(k), k) for k in a] == [(type(k), k) for k in b], where
        for k in a:
            _same_exactly(a[k], b[k], f"{where}/{k!r}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same_exactly(x, y, f"{where}/{i}")
    elif isinstance(a, np.ndarray):
        assert (a.dtype, a.shape) == (b.dtype, b.shape), where
        assert a.tobytes() == b.tobytes(), where
    elif isinstance(a, float):
        assert repr(a) == repr(b), (where, a, b)
    else:
        assert a == b, (where, a, b)


def test_flat_state_dict_round_trip_keeps_keys_order_dtypes(tmp_path, rng):
    sd = {
        "encoder.layers.0.self_attn.W_q.weight": rng.standard_normal((4, 4)).astype(np.float32),
        "encoder.layers.0.self_attn.W_q.bias": rng.standard_normal(4),
        "tokens": np.arange(5, dtype=np.int64),
        "flag": np.array([True, False]),
        "scalar": np.array(3.5),
    }
    path = tmp_path / "model.npz"
    save(sd, path)
    back = load(path)
    _same_exactly(sd, back)
    # the names are the archive's member names: readable with plain NumPy
    with np.load(path, allow_pickle=False) as npz:
        assert [k for k in npz.files if k != "__minitensor__"] == list(sd)


def test_nested_optimizer_state_round_trip(tmp_path, rng):
    state = {
        "model": {"w": rng.standard_normal((3, 2))},
        "optimizer": {
            "state": {
                0: {"step": 7, "exp_avg": rng.standard_normal((3, 2)), "exp_avg_sq": rng.random((3, 2))},
                1: {"momentum_buffer": rng.standard_normal(2).astype(np.float32)},
            },
            "param_groups": [
                {
                    "lr": 0.001,
                    "betas": (0.9, 0.98),
                    "eps": 1e-9,
                    "amsgrad": False,
                    "weight_decay": 0,
                    "params": [0, 1],
                    "nothing": None,
                    "name": "a/b%c",
                }
            ],
        },
        "scheduler": {"last_epoch": 12, "base_lrs": [1.0], "_last_lr": [0.1 + 0.2]},
        "special": [float("inf"), -float("inf"), float("nan"), 2**70, -0.0],
        "weird/key%": {"x": np.zeros(0)},
    }
    path = tmp_path / "ckpt.npz"
    save(state, path)
    back = load(path)
    _same_exactly(state, back)
    assert isinstance(back["optimizer"]["param_groups"][0]["betas"], tuple)
    assert list(back["optimizer"]["state"]) == [0, 1]  # int keys stay int
    with np.load(path, allow_pickle=False) as npz:
        assert "optimizer/state/0/exp_avg" in npz.files
        assert "weird%2Fkey%25/x" in npz.files


def test_tensors_are_saved_as_arrays(tmp_path):
    t = mt.tensor([[1.0, 2.0]], requires_grad=True)
    save({"t": t}, tmp_path / "t.npz")
    back = load(tmp_path / "t.npz")
    assert isinstance(back["t"], np.ndarray) and back["t"].dtype == np.float32
    np.testing.assert_array_equal(back["t"], t.detach().numpy())


def test_exact_path_is_used_and_overwrite_is_atomic(tmp_path):
    path = tmp_path / "no_suffix"
    save({"a": np.ones(2)}, path)
    assert path.exists() and not (tmp_path / "no_suffix.npz").exists()
    save({"a": np.zeros(3)}, path)
    np.testing.assert_array_equal(load(path)["a"], np.zeros(3))
    assert [p.name for p in tmp_path.iterdir()] == ["no_suffix"]  # no temporary left behind


def test_missing_file(tmp_path):
    path = tmp_path / "nope.npz"
    with pytest.raises(FileNotFoundError, match="nope.npz"):
        load(path)


def test_corrupt_file(tmp_path):
    path = tmp_path / "garbage.npz"
    path.write_bytes(b"this is not a zip archive at all" * 10)
    with pytest.raises(ValueError, match="garbage.npz"):
        load(path)


def test_truncated_file(tmp_path, rng):
    path = tmp_path / "cut.npz"
    save({"a": rng.standard_normal(1000)}, path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="cut.npz"):
        load(path)


def test_single_npy_is_refused(tmp_path):
    path = tmp_path / "one.npy"
    np.save(path, np.ones(3))
    with pytest.raises(ValueError, match="one.npy"):
        load(path)


def test_pickled_object_array_is_refused(tmp_path):
    """An .npz member holding a pickled object array must not be unpickled."""
    path = tmp_path / "evil.npz"
    obj = np.empty(1, dtype=object)
    obj[0] = {"payload": "would run on unpickle"}
    buf = io.BytesIO()
    np.lib.format.write_array(buf, obj, allow_pickle=True)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("weights.npy", buf.getvalue())
    with pytest.raises(ValueError, match=r"evil\.npz.*pickle"):
        load(path)


def test_save_refuses_unsupported_values(tmp_path):
    with pytest.raises(TypeError, match="object"):
        save({"a": np.array([{"x": 1}], dtype=object)}, tmp_path / "x.npz")
    with pytest.raises(TypeError, match="set"):
        save({"a": {1, 2}}, tmp_path / "x.npz")
    with pytest.raises(TypeError, match="dict"):
        save([np.ones(2)], tmp_path / "x.npz")
    with pytest.raises(ValueError, match=r"at '1' maps to the archive member '1'"):
        save({1: np.ones(1), "1": np.ones(1)}, tmp_path / "x.npz")
    assert not any(tmp_path.iterdir())  # nothing written on failure


def test_plain_numpy_npz_loads_as_flat_dict(tmp_path):
    path = tmp_path / "plain.npz"
    np.savez(path, a=np.arange(3), b=np.eye(2))
    back = load(path)
    assert list(back) == ["a", "b"]
    np.testing.assert_array_equal(back["b"], np.eye(2))


def test_mt_namespace_exports():
    assert mt.save is save and mt.load is load


def test_model_checkpoint_through_a_file(tmp_path):
    """state_dict -> save -> load -> load_state_dict restores a model exactly (Parameters saved as arrays)."""
    mt.manual_seed(0)
    a = mt.nn.Sequential(mt.nn.Embedding(7, 4, padding_idx=0), mt.nn.LayerNorm(4), mt.nn.Linear(4, 3))
    mt.manual_seed(1)
    b = mt.nn.Sequential(mt.nn.Embedding(7, 4, padding_idx=0), mt.nn.LayerNorm(4), mt.nn.Linear(4, 3))
    save(a.state_dict(keep_vars=True), tmp_path / "m.npz")
    b.load_state_dict(load(tmp_path / "m.npz"))
    ids = mt.tensor([[1, 2, 0, 6]])
    np.testing.assert_array_equal(a(ids).detach().numpy(), b(ids).detach().numpy())


# ---------------------------------------------------------------------------------------------
# Permissions, odd keys, hostile files, interrupted saves, and a property-based round trip.
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_save_gives_the_permissions_of_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        save({"a": np.ones(2)}, tmp_path / "m.npz")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "m.npz").st_mode) == 0o666 & ~umask


def test_save_over_a_file_keeps_its_permissions(tmp_path):
    path = tmp_path / "m.npz"
    save({"a": np.ones(2)}, path)
    os.chmod(path, 0o640)
    save({"a": np.zeros(2)}, path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640


ODD_KEYS = [
    "a",
    "a.npy",
    "a.npy.npy",
    "x\0y",
    "\0",
    "%",
    "%25",
    "%2F",
    "/",
    "a/b",
    "",
    ".",
    "..",
    "\ud800",
    "\udfff.npy",
    "__minitensor__",
    "%5F_minitensor__",
    "__minitensor__.npy",
    "日本語",
    "tab\tnew\nline",
    "back\\slash",
    "é" * 300,
]


def test_every_odd_key_round_trips(tmp_path):
    """Keys that clash in NumPy's name lookup ('a' and 'a.npy') or in a zip directory (NUL) load back as saved."""
    sd = {k: np.full(i + 1, i, dtype=np.int16) for i, k in enumerate(ODD_KEYS)}
    sd["nested"] = {k: {k: np.array(float(i))} for i, k in enumerate(ODD_KEYS)}
    sd["values"] = {k: k for k in ODD_KEYS}
    save(sd, tmp_path / "odd.npz")
    _same_exactly(sd, load(tmp_path / "odd.npz"))


def test_save_refuses_keys_it_cannot_store_naming_them(tmp_path):
    with pytest.raises(ValueError, match="too long for a zip archive"):
        save({"k" * 70000: np.ones(1)}, tmp_path / "x.npz")
    with pytest.raises(ValueError, match=r"at 's/0' maps to the archive member 's/0'"):
        save({"s": {0: np.ones(1), "0": np.ones(1)}}, tmp_path / "x.npz")
    loop = {}
    loop["me"] = loop
    with pytest.raises(ValueError, match="nesting deeper than"):
        save(loop, tmp_path / "x.npz")
    assert not any(tmp_path.iterdir())


# --- hostile files: each builder writes bytes to `path`; `load` must refuse with one ValueError --------------------
def _npy(arr, allow_pickle=False) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, allow_pickle=allow_pickle)
    return buf.getvalue()


def _zip(path, members, compression=zipfile.ZIP_STORED):
    with warnings.catch_warnings(), zipfile.ZipFile(path, "w", compression) as zf:
        warnings.simplefilter("ignore")  # "Duplicate name": a hostile case wants exactly that
        for name, data in members:
            zf.writestr(name, data)


def _meta(tree=None, **fields) -> bytes:
    """The structure member; `tree` may be given as JSON text."""
    meta = {"format": "minitensor", "version": 1, "tree": "TREE"}
    meta.update(fields)
    tree = tree if tree is not None else {"d": []}
    return _npy(np.array(json.dumps(meta).replace('"TREE"', tree if isinstance(tree, str) else json.dumps(tree))))


def _with_tree(tree, *members):
    return lambda p: _zip(p, [*members, ("__minitensor__.npy", _meta(tree))])


def _deep_tree(depth):
    """A tree of `depth` nested lists, as JSON text (json.dumps itself cannot write one 100000 deep)."""
    return '{"d": [["k", ' + '{"l": [' * depth + '{"v": null}' + "]}" * depth + "]]}"


def _good_file(p):
    save({"w": np.arange(64, dtype=np.float64), "step": 3}, p)


def _edit(edit):
    """A file written by `save`, then `edit(bytes) -> bytes`."""

    def build(p):
        _good_file(p)
        p.write_bytes(edit(p.read_bytes()))

    return build


def _flip_data_byte(data: bytes) -> bytes:
    i = data.index(np.arange(64, dtype=np.float64).tobytes()) + 100  # inside w's data: the CRC no longer holds
    return data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1 :]


def _header_with_shape(shape):
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f8", "fortran_order": False, "shape": shape})
    return buf.getvalue()


def _unknown_compression(p):
    _zip(p, [("a.npy", _npy(np.ones(3)))])
    data = bytearray(p.read_bytes())
    for sig, off in ((b"PK\x03\x04", 8), (b"PK\x01\x02", 10)):  # method field of local and central headers
        i = data.index(sig)
        data[i + off : i + off + 2] = (99).to_bytes(2, "little")
    p.write_bytes(bytes(data))


_obj = np.empty(1, dtype=object)
_obj[0] = {"payload": "would run on unpickle"}
W = ("w.npy", _npy(np.ones(2)))

HOSTILE = {
    # not an archive at all
    "text file renamed .npz": (lambda p: p.write_text("hello, I am text\n" * 20), "not a readable .npz"),
    "empty file": (lambda p: p.write_bytes(b""), "not a readable .npz"),
    "random bytes": (lambda p: p.write_bytes(np.random.default_rng(0).bytes(4096)), "not a readable .npz"),
    "a pickle renamed .npz": (lambda p: p.write_bytes(b"\x80\x04\x95" + b"cos\nsystem\n" * 8), "not a readable"),
    "a single .npy": (lambda p: p.write_bytes(_npy(np.ones(3))), "single .npy array"),
    "a single pickled .npy": (lambda p: p.write_bytes(_npy(_obj, allow_pickle=True)), "single .npy array"),
    # a damaged archive
    "truncated to half": (_edit(lambda d: d[: len(d) // 2]), "not a readable .npz"),
    "truncated by one byte": (_edit(lambda d: d[:-1]), "not a readable .npz"),
    "only the first 30 bytes": (_edit(lambda d: d[:30]), "not a readable .npz"),
    "a data byte flipped (bad CRC)": (_edit(_flip_data_byte), "cannot be read"),
    "zip directory lists a name twice": (lambda p: _zip(p, [W, W]), "twice"),
    "unsupported compression method": (_unknown_compression, "cannot be read"),
    # members that are not plain arrays
    "a member that is not .npy": (lambda p: _zip(p, [("readme.txt", b"hi")]), "not a .npy array"),
    "a member with a bad npy magic": (lambda p: _zip(p, [("a.npy", b"NOTNUMPY" * 10)]), "cannot be read"),
    "plain npz with a pickled object array": (lambda p: _zip(p, [("a.npy", _npy(_obj, True))]), "object array"),
    "saved file with a pickled member": (
        _with_tree({"d": [["a", {"a": "a"}]]}, ("a.npy", _npy(_obj, True))),
        "object array",
    ),
    "member shorter than its header": (
        lambda p: _zip(p, [("a.npy", _header_with_shape((1000,)) + b"\0" * 80)]),
        "declares 8000 bytes",
    ),
    "member claims a huge shape": (lambda p: _zip(p, [("a.npy", _header_with_shape((10**12, 10**6)))]), "declares"),
    "member with bytes after its data": (lambda p: _zip(p, [("a.npy", _npy(np.ones(3)) + b"xx")]), "holds"),
    # the structure member
    "structure is not JSON": (lambda p: _zip(p, [("__minitensor__.npy", _npy(np.array("{not json")))]), "invalid JSON"),
    "structure is a number array": (
        lambda p: _zip(p, [("__minitensor__.npy", _npy(np.arange(3)))]),
        "expected a 0-d text array",
    ),
    "structure is a pickled object": (lambda p: _zip(p, [("__minitensor__.npy", _npy(_obj, True))]), "object array"),
    "structure is a JSON list": (
        lambda p: _zip(p, [("__minitensor__.npy", _npy(np.array("[1, 2]")))]),
        "expected an object",
    ),
    "structure without a tree": (
        lambda p: _zip(p, [("__minitensor__.npy", _npy(np.array('{"format": "minitensor"}')))]),
        "expected an object",
    ),
    "structure from another format": (
        lambda p: _zip(p, [("__minitensor__.npy", _meta(format="other"))]),
        "'format': 'minitensor'",
    ),
    "a newer format version": (lambda p: _zip(p, [("__minitensor__.npy", _meta(version=99))]), "newer format"),
    "a version that is text": (lambda p: _zip(p, [("__minitensor__.npy", _meta(version="1"))]), "format version"),
    "root is a list": (_with_tree({"l": []}), "root is not a dict"),
    "dict entries are an int": (_with_tree({"d": 5}), "malformed structure entry 'd'"),
    "a dict item is an int": (_with_tree({"d": [5]}), "malformed dict item"),
    "a dict item without a value": (_with_tree({"d": [["a"]]}), "malformed dict item"),
    "a dict key is a float": (_with_tree({"d": [[1.5, {"v": 1}]]}), "malformed dict key"),
    "an int key that is text": (_with_tree({"d": [[{"i": "0"}, {"v": 1}]]}), "malformed dict key"),
    "a duplicate key": (_with_tree({"d": [["a", {"v": True}], ["a", {"v": None}]]}), "duplicate key 'a'"),
    "an unknown entry": (_with_tree({"d": [["a", {"x": 1}]]}), "unknown structure entry 'x'"),
    "an entry with two kinds": (_with_tree({"d": [["a", {"v": 1, "i": "2"}]]}), "one-key object"),
    "an entry that is a list": (_with_tree({"d": [["a", [1]]]}), "one-key object"),
    "an array name that is a number": (_with_tree({"d": [["a", {"a": 5}]]}), "malformed structure entry 'a'"),
    "an int that is not a number": (_with_tree({"d": [["a", {"i": "abc"}]]}), "malformed int"),
    "an int with 5000 digits": (_with_tree({"d": [["a", {"i": "9" * 5000}]]}), "malformed int"),
    "a float that is not a number": (_with_tree({"d": [["a", {"f": "x1"}]]}), "malformed float"),
    "a value that is a list": (_with_tree({"d": [["a", {"v": [1]}]]}), "malformed structure entry 'v'"),
    "a value that is a number": (_with_tree({"d": [["a", {"v": 1.5}]]}), "malformed structure entry 'v'"),
    "nesting 150 deep": (_with_tree(_deep_tree(150)), "deeper than"),
    "nesting 100000 deep (JSON recursion)": (_with_tree(_deep_tree(100_000)), "deeper than"),
    # members against the structure
    "a listed member is missing": (_with_tree({"d": [["w", {"a": "w"}], ["x", {"a": "x"}]]}, W), "'x'.* missing"),
    "a member the structure does not list": (_with_tree({"d": []}, W), "does not list"),
    "the member of key 'a' asked as 'a.npy'": (_with_tree({"d": [["w", {"a": "w.npy"}]]}, W), "missing"),
    "a member name with '..'": (_with_tree({"d": [["w", {"a": "../../w"}]]}, W), "missing"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_load_refuses_a_hostile_file_with_one_clear_value_error(tmp_path, case):
    build, phrase = HOSTILE[case]
    path = tmp_path / "hostile.npz"
    build(path)
    with pytest.raises(ValueError) as info:
        load(path)
    e = info.value
    assert type(e) is ValueError
    assert str(e).startswith(f"load: {str(path)!r} ") and re.search(phrase, str(e)), str(e)
    assert e.__cause__ is None and e.__context__ is None  # nothing chained: one error, ours
    shown = "".join(traceback.format_exception(e))
    assert "allow_pickle" not in shown and "unsafe" not in shown, shown


def test_load_refuses_a_directory(tmp_path):
    with pytest.raises(ValueError, match="is a directory"):
        load(tmp_path)


# --- a save interrupted at each stage leaves the previous file ----------------------------------------------------
def _raise_on_call(n):
    """A replacement that raises at its n-th call (1-based) and otherwise calls the original."""

    def wrap(original):
        calls = []

        def patched(*args, **kwargs):
            calls.append(1)
            if len(calls) == n:
                raise OSError("disk full (injected)")
            return original(*args, **kwargs)

        return patched

    return wrap


def _raise_after_call(original):
    """Closes the archive (end record written), then fails once, as a full disk would at the last write."""
    calls = []

    def patched(*args, **kwargs):
        original(*args, **kwargs)
        calls.append(1)
        if len(calls) == 1:
            raise OSError("I/O error after the end record (injected)")

    return patched


INTERRUPTIONS = {
    "creating the temporary file": (tempfile, "mkstemp", _raise_on_call(1), OSError),
    "writing the first array": (np.lib.format, "write_array", _raise_on_call(1), OSError),
    "writing the second array": (np.lib.format, "write_array", _raise_on_call(2), OSError),
    "writing the structure": (np.lib.format, "write_array", _raise_on_call(3), OSError),
    "closing the archive": (zipfile.ZipFile, "close", _raise_after_call, OSError),
    "flushing to disk": (os, "fsync", _raise_on_call(1), OSError),
    "setting the permissions": (os, "chmod", _raise_on_call(1), OSError),
    "renaming over the old file": (os, "replace", _raise_on_call(1), OSError),
    "Ctrl-C while writing an array": (
        np.lib.format,
        "write_array",
        lambda orig: lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt()),
        KeyboardInterrupt,
    ),
}


@pytest.mark.parametrize("stage", list(INTERRUPTIONS))
def test_interrupted_save_leaves_the_previous_file_intact(tmp_path, monkeypatch, stage):
    owner, name, make, error = INTERRUPTIONS[stage]
    path = tmp_path / "ckpt.npz"
    old = {"w": np.arange(5.0), "step": 1}
    save(old, path)
    before = path.read_bytes()
    monkeypatch.setattr(owner, name, make(getattr(owner, name)))
    with pytest.raises(error):
        save({"w": np.ones(5), "b": np.zeros(2), "step": 2}, path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    _same_exactly(old, load(path))
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.npz"]  # the temporary file is gone


# --- property: any nested state dict of supported values round-trips bit for bit ---------------------------------
_DTYPES = [
    np.bool_,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
    np.float16,
    np.float32,
    np.float64,
    np.complex64,
    np.complex128,
    "U3",
    "S3",
    "M8[ns]",
    "m8[s]",
    ">f8",
    "<i4",
]
_ODD_TEXT = st.sampled_from(["\0", "%", "/", ".npy", "__minitensor__", "\ud800", "%2F", "", "a"])
_KEY_TEXT = st.lists(st.one_of(_ODD_TEXT, st.text(max_size=4)), max_size=3).map("".join)
_KEYS = st.one_of(_KEY_TEXT, st.integers(-10, 10**30))
_ARRAYS = st.sampled_from(_DTYPES).flatmap(
    lambda dt: hnp.arrays(np.dtype(dt), hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3))
)
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), _KEY_TEXT)


def _unique_archive_keys(d):
    """Drop one of an int key and its str spelling in the same dict (save refuses that pair by design)."""
    return {k: v for k, v in d.items() if not (isinstance(k, int) and str(k) in d)}


_TREES = st.recursive(
    st.one_of(_ARRAYS, _SCALARS),
    lambda kids: st.one_of(
        st.lists(kids, max_size=3),
        st.lists(kids, max_size=3).map(tuple),
        st.dictionaries(_KEYS, kids, max_size=3).map(_unique_archive_keys),
    ),
    max_leaves=12,
)


@settings(
    max_examples=80,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.dictionaries(_KEYS, _TREES, max_size=4).map(_unique_archive_keys))
def test_any_nested_state_dict_round_trips(tmp_path, obj):
    path = tmp_path / "prop.npz"
    save(obj, path)
    _same_exactly(obj, load(path))


# ---- files through a symlink ------------------------------------------------------------------


def _links_and_files(root):
    """{relative path: 'link -> target' or 'file'} of everything under root: shows a leftover temporary."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, root)
            out[rel] = f"link -> {os.readlink(p)}" if os.path.islink(p) else ("dir" if os.path.isdir(p) else "file")
    return out


def test_save_through_a_symlink_updates_its_target_and_keeps_the_link(tmp_path):
    (tmp_path / "store").mkdir()
    target = tmp_path / "store" / "ckpt.npz"
    save({"a": np.ones(2)}, target)
    os.chmod(target, 0o640)
    link = tmp_path / "last.npz"
    link.symlink_to(os.path.join("store", "ckpt.npz"))  # a relative link, as `ln -s` makes
    save({"a": np.zeros(3)}, link)
    assert _links_and_files(tmp_path) == {
        "store": "dir",
        "store/ckpt.npz": "file",
        "last.npz": "link -> store/ckpt.npz",
    }
    np.testing.assert_array_equal(load(target)["a"], np.zeros(3))
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640  # the target's permissions, as open() keeps them


def test_save_through_a_chain_of_symlinks(tmp_path):
    for d in ("a", "b", "c"):
        (tmp_path / d).mkdir()
    save({"x": np.ones(1)}, tmp_path / "c" / "real.npz")
    (tmp_path / "b" / "mid").symlink_to(tmp_path / "c" / "real.npz")
    (tmp_path / "a" / "top").symlink_to(os.path.join("..", "b", "mid"))
    save({"x": np.full(1, 7.0)}, tmp_path / "a" / "top")
    assert _links_and_files(tmp_path) == {
        "a": "dir",
        "b": "dir",
        "c": "dir",
        "a/top": "link -> ../b/mid",
        "b/mid": f"link -> {tmp_path / 'c' / 'real.npz'}",
        "c/real.npz": "file",
    }
    np.testing.assert_array_equal(load(tmp_path / "a" / "top")["x"], [7.0])


def test_save_through_a_dangling_symlink_creates_its_target(tmp_path):
    """As `open(link, 'w')` does: the link is kept and the file it names is created."""
    link = tmp_path / "ckpt.npz"
    link.symlink_to("made.npz")
    save({"a": np.ones(2)}, link)
    assert _links_and_files(tmp_path) == {"ckpt.npz": "link -> made.npz", "made.npz": "file"}
    np.testing.assert_array_equal(load(tmp_path / "made.npz")["a"], np.ones(2))
    # a dangling link into a missing folder fails as open() does, leaving nothing behind
    (tmp_path / "far").symlink_to(os.path.join("nowhere", "x.npz"))
    with pytest.raises(FileNotFoundError):
        save({"a": np.ones(2)}, tmp_path / "far")
    assert sorted(_links_and_files(tmp_path)) == ["ckpt.npz", "far", "made.npz"]


def test_save_through_a_symlink_loop_raises_as_open_does(tmp_path):
    (tmp_path / "x").symlink_to("y")
    (tmp_path / "y").symlink_to("x")
    with pytest.raises(OSError) as info:
        open(tmp_path / "x", "wb")
    with pytest.raises(OSError) as ours:
        save({"a": np.ones(1)}, tmp_path / "x")
    assert ours.value.errno == info.value.errno
    assert sorted(_links_and_files(tmp_path)) == ["x", "y"]


def test_a_failed_save_through_a_symlink_leaves_the_old_file(tmp_path, monkeypatch):
    """The write is atomic through a link too: an error halfway leaves the old contents and no temporary."""
    target = tmp_path / "real.npz"
    save({"a": np.ones(2), "b": np.ones(2)}, target)
    link = tmp_path / "link.npz"
    link.symlink_to("real.npz")
    calls = []
    write_array = np.lib.format.write_array

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt  # a Ctrl-C between two members
        return write_array(*args, **kwargs)

    monkeypatch.setattr(np.lib.format, "write_array", failing)
    with pytest.raises(KeyboardInterrupt):
        save({"a": np.zeros(2), "b": np.zeros(2)}, link)
    monkeypatch.undo()
    assert _links_and_files(tmp_path) == {"real.npz": "file", "link.npz": "link -> real.npz"}
    np.testing.assert_array_equal(load(link)["a"], np.ones(2))


def test_atomic_write_text_through_a_symlink(tmp_path):
    from minitensor.serialization import atomic_write

    (tmp_path / "notes.txt").write_text("old\n")
    (tmp_path / "link.txt").symlink_to("notes.txt")
    with atomic_write(tmp_path / "link.txt", encoding="utf-8") as f:
        f.write("new ü\n")
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "new ü\n"
    assert _links_and_files(tmp_path) == {"notes.txt": "file", "link.txt": "link -> notes.txt"}
    with pytest.raises(ValueError, match="mode must be 'w' or 'wb'"):
        with atomic_write(tmp_path / "x", "a"):
            pass
