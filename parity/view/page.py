"""The page: one self-contained HTML file, its data, script and styles inline (no network when it is viewed).

`render(data)` puts layout.page_data's JSON into the template with page.js and page.css (files beside this one);
`check_out` refuses an output path before any work, `write` writes the file whole or not at all.
"""

from __future__ import annotations

import html
import json
import os
from importlib import resources

TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>{title}</title>
<script>window.__errors = [];
window.addEventListener("error", function (e) {{ window.__errors.push(String(e.message)); }});</script>
<style>{css}</style></head>
<body>
<header>
  <h1>{title}</h1>
  <div class="meta">{subtitle}</div>
  <div class="bar">
    <span><b id="node-count"></b> nodes{of_total} · {params} parameters · {calls} module calls</span>
    <input id="search" type="search" placeholder="search an op or a module (Enter: next)" autocomplete="off">
    <span id="search-count"></span>
    <button id="expand-all">unfold all</button><button id="collapse-all">fold</button>
    <button id="fit">reset view</button>
    <span class="legend">error / tolerance: 1e-6 <span class="scale" style="background:linear-gradient(90deg,
      hsl(140,60%,45%),hsl(65,60%,45%) 50%,hsl(30,85%,50%) 50%,hsl(0,85%,42%))"></span> 1e3</span>
    <span id="shown" class="dim"></span>
  </div>
  <div id="divergence"></div>
</header>
<main><div id="viewport"><div id="world"><svg id="edges"></svg><div id="rows"></div></div></div>
<aside id="panel"><p>Click a row: a module folds or unfolds and shows its checks; an op node shows its statistics.</p>
</aside></main>
<script id="data" type="application/json">{data}</script>
<script>{js}</script>
</body></html>
"""


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def render(data: dict) -> str:
    """The page's HTML for layout.page_data's `data`."""
    meta = data["meta"]
    payload = json.dumps(data, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    return TEMPLATE.format(
        title=html.escape(meta["title"]),
        subtitle=html.escape(meta["subtitle"]),
        of_total="" if meta["nodes"] == meta["nodes_total"] else f" (of {meta['nodes_total']})",
        params=meta["params"],
        calls=meta["calls"],
        css=_asset("page.css"),
        js=_asset("page.js"),
        data=payload,
    )


def check_out(path: str, overwrite: bool) -> None:
    """ValueError naming what is wrong with the output path: its folder missing, a folder, or a file without
    --overwrite."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ValueError(f"--out {path}: the folder {folder} does not exist")
    if os.path.isdir(path):
        raise ValueError(f"--out {path}: is a folder; expected the path of an HTML file")
    if os.path.exists(path) and not overwrite:
        raise ValueError(f"--out {path}: the file exists; pass --overwrite to replace it")


def write(text: str, path: str) -> None:
    """Write whole or not at all: a temporary file beside it, renamed over it."""
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
