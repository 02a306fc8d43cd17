"""The page's layout, computed here so that the page only draws: every item's row, depth and edges' lanes.

The graph is shown as nested rows: a module call is a row that folds and unfolds its contents (the op nodes it ran
directly, its parameters and the calls inside it), ordered as the backward reaches them. Python fixes each item's
place in the fully unfolded list (`row`, DFS order), its depth (the indent), its parent, and the lane of each edge
(how far its arc bulges, from its span in that list); folding only hides rows, and the page places each visible row
below the previous one.

`page_data` gathers what the page needs, values summarised (capture.summarize), never dumped.
"""

from __future__ import annotations

import math

from .capture import ROOT, select_calls
from .compare import Comparison
from .formulas import anchor

MAX_LANE = 24


class TooLarge(ValueError):
    """The graph is larger than the page can draw responsively."""


def walk_positions(graph) -> tuple[dict, dict]:
    """(call index -> first walk position of a node in its subtree, parameter name -> first consumer's position)."""
    first = {}
    params = {}
    for i, node in enumerate(graph.nodes):
        c = node["call"]
        while c is not None and first.get(c, math.inf) > i:
            first[c] = i
            c = graph.calls[c].parent
        for kind, target in node["edges"]:
            if kind == "p" and target not in params:
                params[target] = i + 0.5
    return first, params


def _owner(graph, name: str) -> int:
    """The first call of the module that holds parameter `name` (ROOT's when that module never ran)."""
    path = name.rsplit(".", 1)[0] if "." in name else ""
    for i, c in enumerate(graph.calls[1:], start=1):
        if c.path == path:
            return i
    return 0


def page_data(graph, comparison: Comparison, divergence: int | None, meta: dict, pattern: str | None, limit: int):
    """The JSON the page draws: meta, items (in row order) and edges ([from row, to row, lane])."""
    shown, chosen = select_calls(graph, pattern)
    call_first, param_first = walk_positions(graph)
    nodes = [i for i, n in enumerate(graph.nodes) if n["call"] in chosen]
    if len(nodes) > limit:
        raise TooLarge(
            f"the graph has {len(nodes)} nodes, more than the page's limit of {limit}: "
            f"pick a part with --modules PATTERN (e.g. --modules 'decoder.layers.0*')"
        )
    params = {name: _owner(graph, name) for name in graph.params}
    params = {name: owner for name, owner in params.items() if owner in chosen and name in param_first}

    # children of each call: (position, kind, id)
    children = {i: [] for i in shown}
    for i in shown:
        parent = graph.calls[i].parent
        if parent is not None and i in call_first:
            children[parent].append((call_first[i], 0, "g", i))
    for i in nodes:
        children[graph.nodes[i]["call"]].append((i, 1, "n", i))
    for name, owner in params.items():
        children[owner].append((param_first[name], 2, "p", name))

    items, row_of = [], {}
    stack = [(0, -1, 0)]  # (call, parent row, depth): DFS without recursion
    while stack:
        kind_id, parent, depth = stack.pop()
        kind, ident = ("g", kind_id) if not isinstance(kind_id, tuple) else kind_id
        row = len(items)
        items.append(_item(graph, comparison, kind, ident, parent, depth, divergence))
        row_of[(kind, ident)] = row
        if kind == "g":
            kids = sorted(children.get(ident, []), key=lambda k: (k[0], k[1]))
            for _, _, k, x in reversed(kids):
                stack.append(((k, x), row, depth + 1))
    # each group's subtree: the rows it spans and the nodes in it
    for row in range(len(items) - 1, -1, -1):
        item = items[row]
        item.setdefault("end", row + 1)
        item.setdefault("nn", 1 if item["k"] == "n" else 0)
        if item["p"] >= 0:
            parent = items[item["p"]]
            parent["end"] = max(parent.get("end", row + 1), item["end"])
            parent["nn"] = parent.get("nn", 0) + item["nn"]
    edges = []
    for i in nodes:
        a = row_of[("n", i)]
        for kind, target in graph.nodes[i]["edges"]:
            b = row_of.get(("n", target) if kind == "n" else ("p", target))
            if b is not None:
                edges.append([a, b, min(MAX_LANE, int(math.log2(abs(b - a) + 1)))])
    planted = [row_of[("n", i)] for i in nodes if graph.nodes[i].get("planted")]
    meta = dict(
        meta,
        nodes=len(nodes),
        nodes_total=len(graph.nodes),
        params=len(params),
        calls=len(shown) - 1,
        reference=comparison.reference,
        tolerance=comparison.tolerance,
        divergence=row_of.get(("g", divergence)) if divergence is not None else None,
        divergence_key=graph.calls[divergence].key if divergence is not None else None,  # drawn or not
        planted_rows=planted,
        modules=pattern,
        failing=_failing(comparison),
    )
    return {"meta": meta, "items": items, "edges": edges}


def _failing(comparison: Comparison) -> int:
    return sum(not c.ok for checks in comparison.calls.values() for c in checks) + sum(
        not c.ok for c in comparison.params.values()
    )


def _worst(checks) -> float | None:
    ratios = [c.ratio() for c in checks]
    return max(ratios) if ratios else None


def _r(x):
    return None if x is None else (1e300 if not math.isfinite(x) else float(f"{x:.3g}"))


def _item(graph, comparison, kind, ident, parent, depth, divergence) -> dict:
    if kind == "g":
        call = graph.calls[ident]
        checks = comparison.calls.get(call.key, [])
        item = {"k": "g", "p": parent, "d": depth, "key": call.key, "type": call.type}
        item["checks"] = [c.to_json() for c in checks]
        item["r"] = _r(_worst(checks))
        if ident == divergence:
            item["culprit"] = True
        if call.key == ROOT:
            item["type"] = "the loss, outside the model"
        return item
    if kind == "p":
        p = graph.params[ident]
        check = comparison.params.get(ident)
        item = {"k": "p", "p": parent, "d": depth, "name": ident, "shape": list(p.shape), "dtype": str(p.dtype)}
        if check is not None:
            item["checks"] = [check.to_json()]
            item["r"] = _r(check.ratio())
        return item
    node = graph.nodes[ident]
    return {
        "k": "n",
        "p": parent,
        "d": depth,
        "i": ident,
        "op": node["op"],
        "a": anchor(node["op"]),
        "in": node["in"],
        "out": node["out"],
        "v": node["value"],
        "g": node.get("grad"),
        "s": node["saved"],
        "tf": _r(node["tf"]),
        "tb": _r(node.get("tb")),
        **({"pl": True} if node.get("planted") else {}),
    }
