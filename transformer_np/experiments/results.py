"""An experiment's result files: NAME.md (a Markdown table under a title and a note), NAME.json, NAME.png."""

from __future__ import annotations

import json
import os

from minitensor.serialization import atomic_write


def result_files(name: str, out_dir: str) -> list[str]:
    """The files experiment `name` writes: NAME.md, NAME.json, NAME.png."""
    return [os.path.join(out_dir, f"{name}.{ext}") for ext in ("md", "json", "png")]


def markdown_table(rows: list[dict], columns: list[str]) -> str:
    """A GitHub Markdown table of `rows` (dicts) restricted to `columns`; floats get 4 significant digits."""

    def fmt(v):
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(v)

    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    lines += ["| " + " | ".join(fmt(r.get(c, "")) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def write_result(
    out_dir: str, name: str, title: str, note: str, rows: list[dict], columns: list[str], figures: list[str], meta: dict
) -> dict:
    """Write NAME.md (`title`, `note`, the table of `rows` in `columns`) and NAME.json (`rows` and `meta`) into
    `out_dir`; return {"rows", "markdown", "files"}, the files being those two and `figures`."""
    md = f"## {title}\n\n{note}\n\n{markdown_table(rows, columns)}\n"
    md_path, json_path, _ = result_files(name, out_dir)
    with atomic_write(md_path) as f:
        f.write(md)
    with atomic_write(json_path) as f:
        json.dump({"experiment": name, "rows": rows, **meta}, f, indent=1)
    return {"rows": rows, "markdown": md, "files": [md_path, json_path] + figures}
