"""Held-out evaluation: teacher-forced loss and token accuracy, and exact-sequence accuracy by greedy decoding.

- `evaluate(model, pairs, ...)`: the metrics train() records (padding excluded from every count).
- `greedy_outputs(model, srcs, max_new_tokens)`: each source's greedy decoding, as a plain token list.
- `strip_decoded(seq)`: a decoded row without <bos>, cut before <eos>, without padding.
"""

from __future__ import annotations

import numpy as np

import minitensor as mt

from ..data import BOS_ID, EOS_ID, PAD_ID, make_batches
from ..decode import greedy_decode
from ..device import array_of, to_host
from ..loss import compute_loss


def strip_decoded(seq) -> list[int]:
    """A decoded row without its leading <bos>, cut before the first <eos>, without padding."""
    out = []
    for i, t in enumerate(np.asarray(seq).reshape(-1).tolist()):
        if i == 0 and t == BOS_ID:
            continue
        if t == EOS_ID:
            break
        if t != PAD_ID:
            out.append(int(t))
    return out


def greedy_outputs(
    model, srcs: list[list[int]], max_new_tokens: int, batch_size: int = 100, use_cache: bool = True
) -> list[list[int]]:
    """Greedy decoding of each source; each result without <bos>/<eos>/padding."""
    results: list[list[int]] = []
    was_training = model.training
    model.eval()
    try:
        with mt.no_grad():
            for i in range(0, len(srcs), batch_size):
                src = make_batches([(s, [BOS_ID, EOS_ID]) for s in srcs[i : i + batch_size]], batch_size)[0][0]
                out = greedy_decode(
                    model,
                    mt.tensor(src),
                    max_len=max_new_tokens,
                    bos_id=BOS_ID,
                    eos_id=EOS_ID,
                    pad_id=PAD_ID,
                    use_cache=use_cache,
                )
                results.extend(strip_decoded(row) for row in out)
    finally:
        model.train(was_training)
    return results


def evaluate(
    model,
    pairs,
    batch_size: int = 100,
    label_smoothing: float = 0.0,
    exact: bool = True,
    max_new_tokens: int | None = None,
) -> dict:
    """Held-out metrics: loss (label smoothing as given, PAD ignored), token accuracy (PAD excluded),
    and exact-sequence accuracy of greedy decoding (the whole target, up to <eos>, must match)."""
    if len(pairs) == 0:
        raise ValueError("evaluate: the evaluation set is empty")
    was_training = model.training
    model.eval()
    total_loss, total_tokens, correct = 0.0, 0, 0
    try:
        with mt.no_grad():
            for src, tgt in make_batches(pairs, batch_size):
                loss, logits, labels = compute_loss(model, src, tgt, label_smoothing)
                keep = labels != PAD_ID
                n = int(keep.sum())
                total_loss += loss.item() * n
                total_tokens += n
                correct += int((to_host(array_of(logits).argmax(-1)) == labels)[keep].sum())  # a read on a device
    finally:
        model.train(was_training)
    out = {"loss": total_loss / total_tokens, "token_acc": correct / total_tokens, "num_examples": len(pairs)}
    if exact:
        longest = max(len(t) for _, t in pairs)
        # generated tokens = target length - 1 (<eos> counted, <bos> not); a little slack shows overruns
        max_new = max_new_tokens if max_new_tokens is not None else min(longest + 2, model.max_len)
        preds = greedy_outputs(model, [s for s, _ in pairs], max_new, batch_size)
        hits = sum(p == strip_decoded(t) for p, (_, t) in zip(preds, pairs))
        out["exact_acc"] = hits / len(pairs)
    return out
