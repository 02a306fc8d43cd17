"""The parity report's results: one Row per check, the Report that holds them, and the rules that judge them.

Every row shows the plain comparison of the two sides (max abs, max rel: minitensor.testing.error_stats
with the floor relative to the array's own scale) and is judged by one of three rules, named in its
`rule` field, with the judged `value` and its `limit` in the row:

    rel    max rel <= PARITY_RTOL[dtype]: the two sides agree to the dtype's precision.
    zero   the exact value is 0 (terms that cancel): on both sides, every entry's magnitude is within
           the round-off of its sum, n * eps * sum |terms| (minitensor.testing.sum_roundoff_limit).
           The key projection's bias gradient (`structurally_zero_grad`).
    drift  the exact value is constant (its gradient is identically 0): after the optimizer steps,
           each side stays within Adam's step bound of its start, the sum over the steps of
           lr * min(1, max|grad| / eps) for 1 - beta1 <= sqrt(1 - beta2) as in the paper's recipe
           (parity.report.adam_step_bound).
    equal  integers that must be identical (the tokens of greedy decoding): value = how many differ, limit 0.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from minitensor.testing import error_stats

from .placement import host

# The summary groups of each model's report, and all of them in the order the table shows them.
ENCODER_DECODER_GROUPS = (
    "embeddings",
    "encoder",
    "decoder",
    "logits",
    "loss",
    "grads",
    "hvp",
    "forward-mode",
    "after-steps",
)
GPT_GROUPS = ("embeddings", "blocks", "logits", "loss", "grads", "after-steps", "generation")
COMPARE_GROUPS = ("modules", "grads", "after-steps")  # python -m parity compare: any model's submodules
GROUPS = (*ENCODER_DECODER_GROUPS[:3], "blocks", "modules", *ENCODER_DECODER_GROUPS[3:], "generation")
RULES = ("rel", "zero", "drift", "equal")


@dataclass
class Row:
    group: str  # one of GROUPS
    kind: str  # 'forward', 'attn', 'loss', 'grad', 'param.grad', 'hvp', 'jvp', 'fwd-hvp', 'step', 'param'
    name: str  # module path or parameter name
    shape: tuple
    max_abs: float  # the plain comparison of the two sides, whatever the rule
    max_rel: float
    rule: str  # one of RULES
    value: float  # the judged quantity: max_rel, the largest |entry|, or the largest drift
    limit: float  # ok means value <= limit
    ok: bool
    note: str = ""


@dataclass
class Report:
    meta: dict
    rows: list = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.rows) and all(r.ok for r in self.rows)

    def failures(self) -> list:
        return [r for r in self.rows if not r.ok]

    def names(self, kind: str) -> set:
        return {r.name for r in self.rows if r.kind == kind}

    def grouped(self) -> list:
        """The rows in GROUPS order (stable within a group)."""
        return sorted(self.rows, key=lambda r: GROUPS.index(r.group))

    def check_close(self, group, kind, name, ours, ref, rtol, note="") -> None:
        """Rule 'rel': max rel <= rtol."""
        ours, ref = host(ours), host(ref)
        if ours.shape != ref.shape:
            self.missing(group, kind, name, rtol, f"shape {tuple(ours.shape)} vs reference {tuple(ref.shape)}")
            return
        a, r = error_stats(ours, ref, scale_free=True)
        self.rows.append(Row(group, kind, name, tuple(ref.shape), a, r, "rel", r, rtol, bool(r <= rtol), note))

    def missing(self, group, kind, name, rtol, note) -> None:
        """A check that could not be made (an output or gradient on one side only): a failure."""
        self.rows.append(Row(group, kind, name, (), math.inf, math.inf, "rel", math.inf, rtol, False, note))

    def check_zero(self, group, kind, name, sides, limit, note) -> None:
        """Rule 'zero': every entry of every array in `sides` within `limit` (broadcast, per entry)."""
        ours, ref = host(sides[0]), host(sides[-1])
        a, r = error_stats(ours, ref, scale_free=True)
        value, lim = worst_against(sides, limit)
        self.rows.append(Row(group, kind, name, tuple(ref.shape), a, r, "zero", value, lim, value <= lim, note))

    def check_equal(self, group, kind, name, ours, ref, note="") -> None:
        """Rule 'equal': the integer arrays are identical; the value is the number of entries that differ."""
        ours, ref = host(ours), host(ref)
        if ours.shape != ref.shape:
            self.missing(group, kind, name, 0.0, f"shape {tuple(ours.shape)} vs reference {tuple(ref.shape)}")
            return
        differ = int((ours != ref).sum())
        a = float(np.abs(ours.astype(np.float64) - ref).max(initial=0.0))
        self.rows.append(Row(group, kind, name, tuple(ref.shape), a, a, "equal", differ, 0.0, differ == 0, note))

    def check_drift(self, name, ours, ref, init, bound, note) -> None:
        """Rule 'drift': both sides within `bound` of `init`."""
        a, r = error_stats(ours, ref, scale_free=True)
        drift = max(float(np.abs(ours - init).max(initial=0.0)), float(np.abs(ref - init).max(initial=0.0)))
        self.rows.append(
            Row("after-steps", "param", name, tuple(np.shape(ref)), a, r, "drift", drift, bound, drift <= bound, note)
        )

    def summary(self) -> dict:
        """Per group: number of checks, the worst 'rel' row (the plain comparison), pass/fail of every rule."""
        out = {}
        for g in GROUPS:
            rows = [r for r in self.rows if r.group == g]
            if rows:
                plain = [r for r in rows if r.rule == "rel"] or rows
                worst = max(plain, key=lambda r: r.max_rel)
                out[g] = dict(
                    checks=len(rows),
                    worst=worst.name,
                    kind=worst.kind,
                    max_abs=worst.max_abs,
                    max_rel=worst.max_rel,
                    limit=worst.limit,
                    failed=sum(not r.ok for r in rows),
                    ok=all(r.ok for r in rows),
                )
        return out

    def to_dict(self) -> dict:
        return dict(
            meta=self.meta,
            passed=self.passed,
            summary=self.summary(),
            rows=[dict(asdict(r), shape=list(r.shape)) for r in self.rows],
        )


def worst_against(arrays, limit) -> tuple[float, float]:
    """(|entry|, its limit) at the entry of `arrays` with the largest |entry| / limit; `limit` broadcasts."""
    value, lim, ratio = 0.0, float(np.max(limit, initial=0.0)), -1.0
    for x in arrays:
        mag = np.abs(np.asarray(x, dtype=np.float64))
        lims = np.broadcast_to(np.asarray(limit, dtype=np.float64), mag.shape)
        if mag.size == 0:
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios = np.where(mag == 0, 0.0, mag / lims)
        i = np.unravel_index(int(np.argmax(ratios)), mag.shape)
        if ratios[i] > ratio:
            value, lim, ratio = float(mag[i]), float(lims[i]), float(ratios[i])
    return value, lim


def group_of(name: str) -> str:
    """The summary group of a module path or parameter name."""
    head = name.split(".")[0].split("#")[0]
    if head in ("src_embed", "tgt_embed", "pos_encoding", "tok_emb", "pos_emb", "drop"):  # the last three: the GPT's
        return "embeddings"
    if head in ("encoder", "decoder", "blocks"):
        return head
    if head in ("generator", "norm_f", "lm_head"):
        return "logits"
    return "loss"


# ----------------------------------------------------------------------------------------------
# Quantities fixed by the math, not by the arithmetic
# ----------------------------------------------------------------------------------------------
KEY_BIAS = "W_k.bias"  # the encoder-decoder's key projection bias; the GPT's is 'k_proj.bias' (parity/gpt/report.py)


def structurally_zero_grad(name: str, key_bias: str | None = KEY_BIAS) -> bool:
    """True for parameters whose gradient is identically zero: the key projection's bias.

    softmax is shift-invariant along each query row, and q . (k_j + b_k) = q . k_j + q . b_k adds
    the same number to every key j of the row, so d loss / d b_k = 0 for any input. Both sides
    compute round-off there, the cancelled sum over the key rows of the key projection's output
    gradient dK (`parity.hooks.KeyProjectionGrads`); torch.nn.MultiheadAttention's in_proj_bias[D:2D]
    is the same. No relative measure can compare two round-offs: the rule 'zero' judges each.

    key_bias: the name's suffix of such a bias in the model at hand; None where there is none (a GPT whose keys
    are rotated after the bias is added: the rotation depends on the key's position, so the shift is no longer
    the same for every key).
    """
    return key_bias is not None and name.endswith(key_bias)


def key_projection(name: str) -> str:
    """'encoder.layers.0.self_attn.W_k.bias' -> 'encoder.layers.0.self_attn.W_k', the module whose rows it sums."""
    return name[: -len(".bias")]
