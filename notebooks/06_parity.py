# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 6. Checking against PyTorch: the parity report, row by row
#
# **What you will learn**
# - what `python -m parity report` compares: every submodule's output, every attention map, the loss, every
#   gradient, and the parameters after a few optimizer steps, between `transformer_np` and the same model
#   written in PyTorch (`parity/`), with the same weights and the same batch;
# - how each row is measured (max absolute error, max relative error and its floor) and judged (the tolerance);
# - why float64 and float32 get different tolerances, and the free and lockstep trajectories.
#
# The report runs in seconds to a minute. The full definitions of every term are in `docs/glossary.md`.
# Next: `07_higher_order.py`.

# %%
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from nbutil import TINY

from minitensor.testing import FLOOR, OP_RTOL, PARITY_RTOL, error_stats

# %% [markdown]
# ## Running the report
# From a shell: `python -m parity report --config copy-reverse --dtype float64`. Here we run the same command and
# read the JSON file it writes. The tiny size uses the `copy` preset with a batch of 4 and one optimizer step.

# %%
CONFIG, EXTRA = ("copy", ["--batch-size", "4", "--steps", "1"]) if TINY else ("copy-reverse", [])
out_dir = tempfile.mkdtemp(prefix="parity_")


def run_report(dtype: str) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "parity",
        "report",
        "--config",
        CONFIG,
        "--dtype",
        dtype,
        "--device",
        "cpu",
        "--out",
        out_dir,
        *EXTRA,
    ]
    print("$", " ".join(["python"] + cmd[1:]))
    proc = subprocess.run(cmd, capture_output=True, text=True)
    print("\n".join(proc.stdout.strip().splitlines()[-3:]))  # its verdict line
    if proc.returncode != 0:
        raise RuntimeError(f"the parity report failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}{proc.stderr}")
    (name,) = [f for f in os.listdir(out_dir) if f.endswith(f"_{dtype}_cpu.json")]
    with open(os.path.join(out_dir, name)) as f:
        return json.load(f)


report64 = run_report("float64")
rows = report64["rows"]
print(f"\n{len(rows)} rows; passed: {report64['passed']}")

# %% [markdown]
# ## What a row says
# Each row compares one array from `transformer_np` ("ours") with the same array from PyTorch (the reference):
#
# - `group`: where in the model (embeddings, encoder, decoder, logits, loss, grads, after-steps, hvp);
# - `kind`: what is compared (below);
# - `name`: the module or parameter, with the same dotted name on both sides;
# - `max_abs`: the largest absolute difference, `max |ours - ref|`;
# - `max_rel`: the largest relative difference, `|ours - ref| / max(|ref|, floor)`;
# - `rule`, `value`, `limit`: how the row is judged; it passes when `value <= limit`. For almost every row the
#   rule is `rel`: the value is `max_rel` and the limit the tolerance `rtol`. Two quantities are fixed by the
#   math instead: the key projection's bias gradient is exactly 0 (rule `zero`: both sides within the
#   round-off of the sum that cancels), and so that bias stays at its start (rule `drift`: within Adam's bound).
#
# One row of each kind:

# %%
KINDS = {
    "forward": "the output of a submodule in the forward pass",
    "attn": "an attention block's weights (B, H, T_q, T_k)",
    "loss": "the label-smoothed cross-entropy",
    "grad": "the gradient of an intermediate activation",
    "param.grad": "the gradient of a parameter after backward",
    "step": "one optimizer step: its loss, gradient norm or gradients",
    "param": "a parameter after the optimizer steps",
}
seen = set()
for r in rows:
    if r["kind"] in seen:
        continue
    seen.add(r["kind"])
    print(
        f"{r['kind']:<11} {r['name']:<44} max_abs {r['max_abs']:.1e}  max_rel {r['max_rel']:.1e}  "
        f"{r['rule']} {r['value']:.1e} <= {r['limit']:.0e}  {'ok' if r['ok'] else 'FAIL'}\n"
        f"{'':<12}{KINDS.get(r['kind'], '')}" + (f"; note: {r['note']}" if r.get("note") else "")
    )

# %% [markdown]
# ## The relative error and its floor
# A plain relative error `|a - b| / |b|` explodes where `b` is (almost) zero: a masked attention weight, a
# gradient whose terms cancel. Both sides then hold round-off of different sizes, and dividing by a tiny `b`
# makes a correct result look wrong. The measure therefore divides by at least a floor,
# `FLOOR[dtype] * max |b|`: near zero it becomes an absolute error on the array's own scale.
#
# A worked example: `b` has one entry that should be 0 and holds round-off.

# %%
b = np.array([2.0, -1.5, 3e-17])  # the reference; the last entry is round-off of a true 0
a = np.array([2.0 + 2e-16, -1.5, -4e-17])  # ours: one ulp off, and different round-off near 0
plain = np.abs(a - b) / np.abs(b)
print("plain relative error per entry:", plain, "-> max", f"{plain.max():.1e}")
print("with the floor: (max_abs, max_rel) =", tuple(f"{v:.1e}" for v in error_stats(a, b, scale_free=True)))
print("floor for float64:", FLOOR["float64"], "x the array's scale; for float32:", FLOOR["float32"])

# %% [markdown]
# ## What each tolerance means
# The numbers live in one file, `minitensor/testing.py`, and are never loosened to make a check pass:
#
# - `OP_RTOL`: one op against PyTorch's. A single op in float64 agrees to ~1e-16 relative; 1e-10 leaves room for a
#   different summation order over long reductions. In float32 (machine epsilon 1.2e-7) 1e-5 does the same.
# - `PARITY_RTOL`: a whole model. Errors grow through ~100 ops and a softmax, so 1e-9 (float64) and 1e-4
#   (float32). A real bug (a swapped axis, a missing scale) gives errors of order 1, far above both.

# %%
for dtype in ("float64", "float32"):
    print(f"{dtype}: OP_RTOL {OP_RTOL[dtype]:.0e}, PARITY_RTOL {PARITY_RTOL[dtype]:.0e}, FLOOR {FLOOR[dtype]:.0e}")
worst = max(rows, key=lambda r: r["value"] / r["limit"])
print(
    f"\nfloat64 report, worst row relative to its limit: {worst['kind']} {worst['name']}: "
    f"{worst['rule']} {worst['value']:.1e} = {worst['value'] / worst['limit']:.0e} of its limit {worst['limit']:.0e}"
    + (f"\n  ({worst['note']})" if worst.get("note") else "")
)

# %% [markdown]
# ## Free and lockstep trajectories (the `after-steps` rows)
# After the first backward, both sides take N optimizer steps on fresh batches. Two ways:
#
# - **free**: each side steps on its own gradients; afterwards the parameters must agree. Sound in float64,
#   where gradient round-off (~1e-16) is far below Adam's eps (1e-9).
# - **lockstep**: at each step the gradients are compared (a `step` row), then `transformer_np` takes PyTorch's
#   gradients, so both optimizers see identical inputs and the final parameters check the optimizer arithmetic.
#   Needed in float32: a gradient entry within round-off of 0 is comparable to eps, and Adam's first update
#   `lr * g / (|g| + eps)` would turn that round-off into a step of up to `lr`, between two correct programs.
#
# `--trajectory auto` (the default) picks free for float64 and lockstep for float32.

# %%
report32 = run_report("float32")
print(
    "float64 trajectory:",
    report64["meta"].get("trajectory"),
    "| float32 trajectory:",
    report32["meta"].get("trajectory"),
)
step_rows = [r for r in report32["rows"] if r["kind"] == "step"]
for r in step_rows[:6]:
    print(f"  {r['name']:<24} {r['rule']} {r['value']:.1e} <= {r['limit']:.0e}  {'ok' if r['ok'] else 'FAIL'}")

# %% [markdown]
# **Recap.** Every row is one array compared with PyTorch's; `max_rel` is a relative error that turns absolute
# near zero (the floor); a row passes when its judged value is within its limit (`rtol`, set per dtype in
# `minitensor/testing.py`, for the `rel` rule). Try
# `python -m parity report --config copy-reverse --norm-first --activation gelu` to check another variant, or
# `--failures-only` to print only what fails.
