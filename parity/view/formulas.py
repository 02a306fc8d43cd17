"""Where each primitive's backward is derived: its anchor in docs/backprop.md, for the page's links.

The fused ops have a numbered section each; the reductions and selections with edge cases a section each; every other
primitive a row of the table "The primitives' one-line formulas" (anchor `op-<name>`). tests/parity/test_view.py
checks that every primitive has an anchor here and that each anchor exists in the document.
"""

from __future__ import annotations

import re

DOC = "docs/backprop.md"

LOSSES = "3-negative-log-likelihood-and-cross-entropy-label-smoothing-class-weights-class-probabilities"
SECTIONS = {
    "Softmax": "1-softmax",
    "LogSoftmax": "2-log-softmax",
    "NLLLoss": LOSSES,
    "CrossEntropy": LOSSES,
    "CrossEntropyProbs": LOSSES,
    "LayerNorm": "4-layer-normalisation",
    "Linear": "5-linear",
    "Embedding": "6-embedding",
    "Dropout": "7-dropout",
    "Gelu": "8-gelu",
    "AttentionWeights": "9-masked-attention-weights",
    "BCEWithLogits": "10-binary-cross-entropy-with-logits",
    "ScaledDotProductAttention": "11-tiled-attention-in-ot-memory-flashattention-2",
    "Conv": "12-convolution-im2col-and-a-matrix-product",
    "Fold": "12-convolution-im2col-and-a-matrix-product",
    "Unfold": "12-convolution-im2col-and-a-matrix-product",
    "AvgPool": "13-pooling",
    "MaxPool": "13-pooling",
    "RNNLayer": "14-recurrent-layers-rnn-lstm-gru",
    "LSTMLayer": "14-recurrent-layers-rnn-lstm-gru",
    "GRULayer": "14-recurrent-layers-rnn-lstm-gru",
    "RMSNorm": "15-rmsnorm",
    "RotaryEmbedding": "16-rotary-position-embedding",
    "BatchNorm": "17-batch-normalisation",
    "Var": "var-and-std",
    "Std": "var-and-std",
    "MaxMin": "maxmin",
    "AMaxMin": "amaxmin",
    "Norm": "norm",
    "NormInf": "norminf",
    "PNorm": "pnorm",
    "SVDVals": "svdvals-and-singularvectors",
    "SingularVectors": "svdvals-and-singularvectors",
    "Clamp": "clamp",
}


def anchor(op: str) -> str:
    """The anchor of op's derivation in docs/backprop.md: its section, else its row of the one-line table."""
    return SECTIONS.get(op, "op-" + op.lower())


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors_in(markdown: str) -> set:
    """Every anchor of a Markdown text: its headings' slugs and its explicit <a id="..."> targets."""
    found = {github_slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", markdown, flags=re.M)}
    return found | set(re.findall(r'<a id="([^"]+)"></a>', markdown))
