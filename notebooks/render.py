"""Executed copies of the notebooks, figures included, for a reader who opens the repository on a web page.

    python notebooks/render.py                 # every notebooks/NN_*.py -> notebooks/rendered/NN_*.ipynb
    python notebooks/render.py 03_attention    # only these
    python notebooks/render.py --check         # exit 1 naming every rendering missing or made from another source

`make notebooks` runs the first. Each source (jupytext percent format) is executed top to bottom by a Jupyter
kernel at the tiny size (MT_NOTEBOOK_TINY=1, as the tests run them), its figures kept as PNG in the outputs. The
rendering's metadata holds the SHA-256 of the source it was made from: `--check` (and tests/notebooks/test_notebooks.py)
compares that hash with the source's, not the outputs, which hold timings and differ from run to run.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RENDERED = os.path.join(HERE, "rendered")
KEY = "minitensor_render"  # the rendering's metadata entry: {"source", "source_sha256", "mode"}
PATTERN = re.compile(r"\d\d_\w+\.py")
TIMEOUT_S = 600  # per cell


def sources() -> list[str]:
    """The notebooks' file names, in order: every NN_name.py in notebooks/."""
    return sorted(f for f in os.listdir(HERE) if PATTERN.fullmatch(f))


def source_hash(name: str) -> str:
    with open(os.path.join(HERE, name), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def rendered_path(name: str) -> str:
    return os.path.join(RENDERED, name[:-3] + ".ipynb")


def stale() -> list[str]:
    """'NAME: why' for every source whose rendering is missing or was made from different source text."""
    # nbformat comes with the notebooks extra; only the check and the rendering need it
    import nbformat

    out = []
    for name in sources():
        path = rendered_path(name)
        if not os.path.exists(path):
            out.append(f"{name}: no rendering at {os.path.relpath(path, ROOT)}")
            continue
        meta = nbformat.read(path, as_version=4).metadata.get(KEY, {})
        if meta.get("source_sha256") != source_hash(name):
            out.append(f"{name}: {os.path.relpath(path, ROOT)} was rendered from another version of the source")
    return out


def render(name: str) -> str:
    """Execute notebooks/NAME (tiny size) and write notebooks/rendered/NAME.ipynb; returns its path."""
    # the rendering's tools come with the notebooks extra (pyproject.toml), not with the package
    import jupytext
    import nbformat
    from nbclient import NotebookClient

    nb = jupytext.read(os.path.join(HERE, name))
    intro = (
        f"*An executed copy of [`notebooks/{name}`](../{name}), run at the tiny size (`MT_NOTEBOOK_TINY=1`) by "
        "`make notebooks`. Edit the source, not this file; run the source as a script or open it in Jupyter "
        "(`make lab`).*"
    )
    nb.cells.insert(0, nbformat.v4.new_markdown_cell(intro))
    env_before = {k: os.environ.get(k) for k in ("MT_NOTEBOOK_TINY", "PYTHONPATH", "OMP_NUM_THREADS")}
    os.environ["MT_NOTEBOOK_TINY"] = "1"
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env_before["PYTHONPATH"]) if p)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        NotebookClient(nb, timeout=TIMEOUT_S, kernel_name="python3", resources={"metadata": {"path": HERE}}).execute()
    finally:
        for k, v in env_before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    nb.metadata[KEY] = {"source": name, "source_sha256": source_hash(name), "mode": "MT_NOTEBOOK_TINY=1"}
    os.makedirs(RENDERED, exist_ok=True)
    path = rendered_path(name)
    nbformat.write(nb, path)
    return path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python notebooks/render.py", description=__doc__.split("\n\n")[0])
    p.add_argument("names", nargs="*", help="notebooks to render (e.g. 03_attention or 03_attention.py); default: all")
    p.add_argument("--check", action="store_true", help="only check that every rendering matches its source")
    args = p.parse_args(argv)
    if args.check:
        problems = stale()
        print("\n".join(problems) if problems else f"all {len(sources())} renderings match their sources")
        return 1 if problems else 0
    names = [n if n.endswith(".py") else n + ".py" for n in args.names] or sources()
    unknown = [n for n in names if n not in sources()]
    if unknown:
        print(f"error: no such notebook: {', '.join(unknown)} (expected one of {', '.join(sources())})")
        return 2
    for name in names:
        path = render(name)
        print(f"{os.path.relpath(path, ROOT)}  ({os.path.getsize(path) / 1024:.0f} KB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
