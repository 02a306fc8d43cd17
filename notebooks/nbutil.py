"""What every notebook of the learner's path shares: the size switch and showing a figure.

MT_NOTEBOOK_TINY=1 shrinks every training and sweep so the notebooks run in seconds each
(the test suite runs them that way); unset, each runs at full size in a few minutes on a laptop CPU.
"""

from __future__ import annotations

import os
import sys

TINY = os.environ.get("MT_NOTEBOOK_TINY", "0") not in ("", "0")
HERE = os.path.dirname(os.path.abspath(__file__))
# Figures written by the notebooks (and by the project's plot functions they call), git-ignored.
# (A copy of this file run from a folder named build/ writes the figures beside it.)
FIGURES = os.path.join(HERE, "figures") if os.path.basename(HERE) == "build" else os.path.join(HERE, "build", "figures")


def sized(full, tiny):
    """`full` normally, `tiny` under MT_NOTEBOOK_TINY=1."""
    return tiny if TINY else full


def in_jupyter() -> bool:
    return "ipykernel" in sys.modules


def figure_path(name: str) -> str:
    os.makedirs(FIGURES, exist_ok=True)
    return os.path.join(FIGURES, name)


def show(fig_or_png, name: str | None = None) -> None:
    """Show a matplotlib Figure or a PNG file: inline in Jupyter, else saved (a Figure) and its path printed."""
    if isinstance(fig_or_png, str):
        path = fig_or_png
    else:
        path = figure_path(name)
        fig_or_png.savefig(path, dpi=100, bbox_inches="tight")
    if in_jupyter():
        from IPython.display import Image, display

        display(Image(filename=path))
    else:
        print(f"[figure] {path}")


def say(template: str, **values) -> str:
    """Prose with numbers from the run: `template`'s {markers} filled from `values` (computed variables), shown
    as Markdown in Jupyter, printed by a script. The notebooks state the results of their own runs only this way,
    so the words cannot drift from what the run computed (tests/notebooks/test_notebooks.py checks it)."""
    text = template.format(**values)
    if "{" in text or "}" in text:
        raise ValueError(f"say: a marker left unfilled in {text!r}")
    if in_jupyter():
        from IPython.display import Markdown, display

        display(Markdown(text))
    else:
        print(text)
    return text


def trim_traceback(message: str) -> str:
    """An error message whose "File ..." frames are cut to the reader's own: the frames of Python, Jupyter and the
    installed packages (a kernel adds about 30) are dropped, and their number said."""
    lines, kept, dropped, skip_code = message.splitlines(), [], 0, False
    for line in lines:
        stripped = line.strip()
        if stripped.startswith('File "'):
            path = stripped.split('"')[1]
            own = not (path.startswith("<frozen") or "site-packages" in path or "/lib/python3" in path)
            dropped += not own
            skip_code = not own
            if own:
                kept.append(line)
        elif skip_code and line.startswith("    "):
            skip_code = False  # the source line under a dropped frame
        else:
            skip_code = False
            kept.append(line)
    if dropped:
        kept.append(f"  ({dropped} frames of Python, Jupyter and the packages trimmed)")
    return "\n".join(kept)
