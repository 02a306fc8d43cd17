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
