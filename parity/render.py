"""The parity report for people: the terminal table, the Markdown file and the JSON file.

The terminal shows what a reader needs at a glance, each line at most WIDTH characters: a header
(what was run, and every adjustment made to the reference, with its count), a legend, the checks
grouped by part of the model, one summary line per group and the verdict. The Markdown adds every
row's max abs and note; the JSON holds everything (Report.to_dict).
"""

from __future__ import annotations

import json
import os
import textwrap

from minitensor.serialization import atomic_write
from minitensor.testing import FLOOR
from transformer_np.cliutil import sigint_deferred

from .results import Report, Row

WIDTH = 120


def plural(n: int, word: str) -> str:
    """'1 check', '2 checks'."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _wrap(text: str, indent: str = "") -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=indent + "  ")


def title(meta: dict) -> str:
    if meta.get("family") == "gpt":
        what = f"the {meta['config']}-shaped GPT"
    elif meta["config"] == "checkpoint":
        what = f"checkpoint {meta.get('checkpoint')}"
    else:
        what = f"the {meta['config']} preset"
    # (a report written before --np-device names no pairing: its reference was PyTorch on meta['device'])
    who = meta.get("pairing", f"PyTorch reference on {meta['device']}")
    return f"parity report: {what}, {meta['dtype']}, {who} (torch {meta['torch']})"


def run_line(meta: dict) -> str:
    model = meta["model"]
    if meta.get("family") == "gpt":
        return (
            f"batch {meta['batch']}; {plural(meta['steps'], 'AdamW step')}, {meta['trajectory']} trajectory; "
            f"seed {meta['seed']}; {model['n_layer']} layers, {model['n_head']} heads "
            f"({model['n_kv_head'] or model['n_head']} key/value), width {model['n_embd']}, vocabulary "
            f"{model['vocab_size']}; positions {model['positions']}, norm {model['norm']}, mlp {model['mlp']}, "
            f"{'tied' if model['tie_weights'] else 'untied'} head, dropout {model['dropout']}"
        )
    return (
        f"batch {meta['batch']}; {plural(meta['steps'], 'optimizer step')}, {meta['trajectory']} trajectory; "
        f"seed {meta['seed']}; dropout {model['dropout']}, {'pre-norm' if model['norm_first'] else 'post-norm'}, "
        f"activation {model['activation']}"
    )


def header(report: Report) -> list[str]:
    """What was run, and how the reference was adjusted (with counts); every line <= WIDTH."""
    lines = [title(report.meta)] + _wrap(run_line(report.meta), "  ") + ["  reference adjusted, torch side only:"]
    for line in adjustments(report.meta):
        lines += _wrap("- " + line, "    ")
    return lines


def adjustments(meta: dict) -> list[str]:
    """The report's adjustments of the reference, each in one sentence with its count."""
    a = meta.get("adjustments", {})
    out = []
    out.append(a["clip_norm"] if a.get("clip_norm") else "gradient clipping is off: no adjustment")
    if a.get("relu_branches_aligned") is None:
        out.append("ReLU branches: none aligned (the activation is not ReLU)")
    else:
        out.append(
            f"ReLU branches: torch took transformer_np's side of 0 for {a['relu_branches_aligned']:,} of "
            f"{a['relu_inputs_compared']:,} ReLU inputs (values within round-off of 0, signs opposite)"
        )
    return out


LEGEND = """\
legend
  kinds  forward: a submodule's output; attn: its attention weights; loss: the training loss
         grad: an output's gradient; param.grad: a parameter's gradient; param: a parameter after the steps
         hvp: the loss's Hessian times a random direction v (the same v on both sides), by double backward
         jvp: the loss's derivative along a random direction v by forward mode (forward_ad), eval mode
         fwd-hvp: H v by forward over reverse (the gradient's tangent in a dual level) on both sides, eval mode
         step: a later optimizer step's loss, worst parameter gradient, key-bias gradients, gradient norm
         cache: logits decoded with the key/value cache; tokens: greedy decoding's tokens (GPT reports)
  rules  rel: value = max rel = max|ours - torch| / max(|torch|, {floor:g} * max|torch|) <= limit
         zero: exact value 0; the largest |entry| of either side <= n*eps*sum|terms|, the round-off of its sum
         drift: exact value constant; each side's change from its start <= sum lr*min(1, max|grad|/eps) + rounding
         equal: integers; value = how many differ, limit 0
  trajectory  free: each side steps on its own gradients; the parameters after the steps must agree
              lockstep: gradients compared, then transformer_np takes torch's; isolates the optimizer arithmetic"""


def legend(meta: dict) -> list[str]:
    """The row kinds, the rules and the trajectory modes, one line each."""
    return LEGEND.format(floor=FLOOR[meta["dtype"]]).splitlines()


# The judged value only: for rule 'rel' it is the max rel; max abs and max rel of every row are in the Markdown.
COLUMNS = ("kind", "module / parameter", "shape", "rule", "value", "limit", "result")


def _cells(r: Row) -> list[str]:
    return [
        r.kind,
        r.name,
        "x".join(map(str, r.shape)) or "()",
        r.rule,
        f"{r.value:.2e}",
        f"{r.limit:.1e}",
        "ok" if r.ok else "FAIL",
    ]


def _fit(name: str, width: int) -> str:
    return name if len(name) <= width else "..." + name[len(name) - width + 3 :]


def table(report: Report, failures_only: bool = False) -> str:
    """The checks, grouped (a heading line per group), every column headed, every line <= WIDTH."""
    rows = [r for r in report.grouped() if not failures_only or not r.ok]
    if failures_only and not rows:
        return f"no failures: all {plural(len(report.rows), 'check')} within their limits"
    body = [_cells(r) for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(COLUMNS)]
    name_width = WIDTH - (sum(widths) - widths[1]) - 2 * (len(COLUMNS) - 1)
    widths[1] = min(widths[1], name_width)
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()
    out = [line(COLUMNS), line(["-" * w for w in widths])]
    group = None
    for r, cells in zip(rows, body):
        if r.group != group:
            group = r.group
            n = sum(x.group == group for x in report.rows)
            out.append(f"[{group}: {plural(n, 'check')}]")
        cells[1] = _fit(cells[1], widths[1])
        out.append(line(cells))
        if not r.ok and r.note:
            out += _wrap(r.note, "    ")
    return "\n".join(out)


def summary_table(report: Report) -> str:
    """One line per group: checks, failures, the worst plain comparison and where it is."""
    lines = [f"{'group':<12} {'checks':>6}  {'failed':>6}  {'max rel':>9}  {'limit':>7}  result  worst row"]
    for g, s in report.summary().items():
        row = (
            f"{g:<12} {s['checks']:>6}  {s['failed']:>6}  {s['max_rel']:9.2e}  {s['limit']:7.1e}  "
            f"{'ok' if s['ok'] else 'FAIL':<6}  "
        )
        lines.append(row + _fit(f"{s['kind']} {s['worst']}", WIDTH - len(row)))
    return "\n".join(lines)


def verdict(report: Report) -> str:
    n, failed = len(report.rows), len(report.failures())
    if report.passed:
        return f"PASS: all {plural(n, 'check')} within their limits"
    return f"FAIL: {plural(failed, 'check')} of {n} outside their limits"


def text(report: Report, failures_only: bool = False) -> str:
    """Everything the terminal shows for `python -m parity report`."""
    return "\n".join(
        header(report)
        + legend(report.meta)
        + ["", table(report, failures_only), "", summary_table(report), "", verdict(report)]
    )


def _md(text: str) -> str:
    """Text for a Markdown table cell: a '|' would end the cell."""
    return text.replace("|", "\\|")


def markdown(report: Report) -> str:
    m = report.meta
    out = ["# " + title(m), "", run_line(m) + ".", "", "Reference adjusted, torch side only:", ""]
    out += ["- " + line for line in adjustments(m)]
    out += [
        "",
        "```",
        *legend(m),
        "```",
        "",
        f"Result: **{verdict(report)}**. Measure: "
        "minitensor.testing.error_stats (scale_free); limits: PARITY_RTOL and the rules above.",
        "",
        "## Summary",
        "",
        "| group | checks | failed | worst | max rel | limit | result |",
        "|---|---|---|---|---|---|---|",
    ]
    for g, s in report.summary().items():
        out.append(
            f"| {g} | {s['checks']} | {s['failed']} | {s['kind']} `{s['worst']}` | {s['max_rel']:.2e} | "
            f"{s['limit']:.1e} | {'ok' if s['ok'] else 'FAIL'} |"
        )
    out += [
        "",
        "## Every check",
        "",
        "| group | kind | module / parameter | shape | max abs | max rel | rule | value | limit | result | note |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report.grouped():
        out.append(
            f"| {r.group} | {r.kind} | `{r.name}` | {'x'.join(map(str, r.shape))} | {r.max_abs:.2e} | "
            f"{r.max_rel:.2e} | {r.rule} | {r.value:.2e} | {r.limit:.1e} | {'ok' if r.ok else 'FAIL'} | "
            f"{_md(r.note)} |"
        )
    return "\n".join(out) + "\n"


def write(report: Report, out_dir: str) -> tuple[str, str]:
    """parity_<config>_<dtype>_<reference device>[_np-<np device>].json and .md in `out_dir`; returns both paths.
    The reference device is torch's, or np-cpu (--against np-cpu); a pairing's files never overwrite another's."""
    os.makedirs(out_dir, exist_ok=True)
    m = report.meta
    reference = m["device"] if m.get("against", "torch") == "torch" else m["against"]
    subject = "" if m.get("np_device", "cpu") == "cpu" else f"_np-{m['np_device']}"
    stem = os.path.join(out_dir, f"parity_{m['config']}_{m['dtype']}_{reference}{subject}")
    text = markdown(report)
    # Both files or neither: each is written atomically, and a Ctrl-C between them waits for the second.
    with sigint_deferred():
        with atomic_write(stem + ".json") as f:
            json.dump(report.to_dict(), f, indent=1)
        with atomic_write(stem + ".md") as f:
            f.write(text)
    return stem + ".json", stem + ".md"
