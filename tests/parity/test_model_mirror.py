"""transformer_np/model.py and parity/model.py say the same things, class for class, differing in spelling only.

SPELLING maps minitensor's spelling onto PyTorch's, line by line; after it, every line of the two files must agree
(blank lines aside) except the few in ALLOWED, each with the reason it must differ. A line that differs otherwise
fails the test, which names it with its line number in both files, so the two models cannot drift apart.

    python -m tests.parity.test_model_mirror [NP_FILE TORCH_FILE]

prints how many lines differ after the spelling map (the ALLOWED ones included), for any pair of versions.
"""

from __future__ import annotations

import difflib
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import parity.model as torch_model
import transformer_np.model as np_model
from tests.support import ROOT

NP_FILE = Path(ROOT) / "transformer_np" / "model.py"
TORCH_FILE = Path(ROOT) / "parity" / "model.py"

# minitensor's spelling -> PyTorch's, applied in this order to each line of transformer_np/model.py
SPELLING = [
    (r"^import minitensor as mt$", "import torch"),
    (r"\bminitensor\.(?=[a-z])", "torch."),  # module paths: minitensor.nn.functional is torch.nn.functional
    (r"\ban mt\.", "a torch."),  # the article in a message
    (r"\bmt\.", "torch."),
    (r"\barray_module\(\w+\)", "torch"),  # the array's own library (NumPy or CuPy) stands where torch's functions do
    (r"\barray_of\((\w+)\)", r"\1"),  # the array behind an mt.Tensor (a device's too): in torch the tensor itself
    (r"\btransformer_np\.masks\b", "parity.masks"),  # the masks in the same spelling as the model (parity/masks.py)
]

# The lines that differ on purpose, as each file spells them: (file, line stripped), grouped by reason
ALLOWED = [
    # the title names the library
    ("np", '"""The encoder-decoder Transformer of "Attention Is All You Need", in NumPy on minitensor.'),
    (
        "torch",
        '"""The encoder-decoder Transformer of "Attention Is All You Need", in PyTorch: the reference for '
        "transformer_np.",
    ),
    # imports: parity's Dropout replays transformer_np's masks and its attention_weights is a torch composite
    # (parity/layers.py); the import sorter places parity.masks among the first-party imports apart
    ("np", "from minitensor.devices import array_module, is_array"),
    ("np", "from minitensor.nn import Dropout"),
    ("np", "from minitensor.nn.functional import attention_weights"),
    ("np", "from transformer_np.device import array_of, device_of, on_device"),
    ("np", "from transformer_np.masks import causal_mask, padding_mask, target_mask"),
    ("torch", "from parity.layers import Dropout, attention_weights"),
    ("torch", "from parity.masks import causal_mask, padding_mask, target_mask"),
    # _raw: minitensor checks the array itself, a device's array too; torch checks a tensor (a NumPy array shared)
    ("np", "return x if is_array(x) else None"),
    ("torch", "return torch.from_numpy(x) if isinstance(x, np.ndarray) else None"),
    # the move onto the model's device: transformer_np's refuses a tensor on another device (transformer_np/device.py)
    ("np", "like = device_of(model)"),
    ("np", "return tuple(None if x is None else on_device(x, like, who) for x in (src, tgt, src_mask, tgt_mask))"),
    ("torch", "device = model.device"),
    ("torch", "return tuple(None if x is None else _raw(x).to(device) for x in (src, tgt, src_mask, tgt_mask))"),
]


def in_torch_spelling(line: str) -> str:
    for pattern, replacement in SPELLING:
        line = re.sub(pattern, replacement, line)
    return line


def differing_lines(np_text: str, torch_text: str) -> list[tuple[str, int, str]]:
    """(file, line number, line as that file spells it) of every line that differs after the spelling map, blank
    lines aside."""
    np_lines = [(i, line) for i, line in enumerate(np_text.splitlines(), 1) if line.strip()]
    torch_lines = [(i, line) for i, line in enumerate(torch_text.splitlines(), 1) if line.strip()]
    a = [in_torch_spelling(line) for _, line in np_lines]
    b = [line for _, line in torch_lines]
    out = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            out += [("np", *np_lines[i]) for i in range(i1, i2)]
            out += [("torch", *torch_lines[j]) for j in range(j1, j2)]
    return out


def test_the_two_models_differ_in_spelling_only():
    differ = differing_lines(NP_FILE.read_text(), TORCH_FILE.read_text())
    allowed = set(ALLOWED)
    unexpected = [(side, n, line) for side, n, line in differ if (side, line.strip()) not in allowed]
    name = {"np": "transformer_np/model.py", "torch": "parity/model.py"}
    assert not unexpected, "the two models say different things (after the spelling map):\n" + "\n".join(
        f"  {name[side]}:{n}: {line.strip()}" for side, n, line in unexpected
    )
    unused = allowed - {(side, line.strip()) for side, _, line in differ}
    assert not unused, f"ALLOWED lists lines that no longer differ (drop them): {sorted(unused)}"


def test_a_difference_is_caught_and_named():
    np_text = NP_FILE.read_text()
    changed = np_text.replace("self.norm1 = nn.LayerNorm(d_model)", "self.norm1 = nn.LayerNorm(d_model, eps=1e-6)", 1)
    differ = differing_lines(changed, TORCH_FILE.read_text())
    assert ("np", "self.norm1 = nn.LayerNorm(d_model, eps=1e-6)") in {(s, line.strip()) for s, _, line in differ}


if __name__ == "__main__":
    paths = sys.argv[1:] or [NP_FILE, TORCH_FILE]
    if len(paths) != 2:
        print("usage: python -m tests.parity.test_model_mirror [NP_FILE TORCH_FILE]", file=sys.stderr)
        sys.exit(2)
    np_text, torch_text = (Path(p).read_text() for p in paths)
    print(
        f"{len(differing_lines(np_text, torch_text))} lines differ after the spelling map "
        f"({len(np_text.splitlines())} and {len(torch_text.splitlines())} lines)"
    )


def _bad_inputs():
    """(name, call(model, src, tgt)) of inputs both models must refuse before any work."""
    rng = np.random.default_rng(0)
    src, tgt = rng.integers(1, 11, size=(2, 6)), rng.integers(1, 13, size=(2, 4))
    out_of_range = src.copy()
    out_of_range[1, 2] = 11
    return [
        ("float ids", lambda m: m(src.astype(np.float32), tgt)),
        ("a list", lambda m: m(src.tolist(), tgt)),
        ("an id past the vocabulary", lambda m: m(out_of_range, tgt)),
        ("a negative target id", lambda m: m(src, -tgt)),
        ("1-D ids", lambda m: m(src[0], tgt)),
        ("an empty batch", lambda m: m(src[:0], tgt[:0])),
        ("past max_len", lambda m: m(src, rng.integers(1, 13, size=(2, 25)))),
        ("batch sizes apart", lambda m: m(src, tgt[:1])),
        ("an int mask", lambda m: m(src, tgt, src_mask=(src != 0).astype(np.int64)[:, None, None, :])),
        ("a mask too wide", lambda m: m(src, tgt, src_mask=np.ones((2, 1, 1, 5), dtype=bool))),
        ("a tgt_mask too small", lambda m: m(src, tgt, tgt_mask=np.ones((1, 1, 3, 3), dtype=bool))),
        ("no memory", lambda m: m.decode(tgt, None)),
        ("memory of another width", lambda m: m.decode(tgt, m.encode(src)[..., :3])),
        ("a mask not an array", lambda m: m.encode(src, src_mask=[[True]])),
    ]


@pytest.mark.parametrize("case", range(len(_bad_inputs())), ids=[name for name, _ in _bad_inputs()])
def test_both_models_refuse_bad_inputs_with_the_same_message(case):
    _, call = _bad_inputs()[case]
    cfg = dict(
        src_vocab_size=11,
        tgt_vocab_size=13,
        d_model=16,
        num_heads=4,
        num_encoder_layers=1,
        num_decoder_layers=1,
        d_ff=32,
        dropout=0.0,
        max_len=20,
    )
    errors = []
    for module in (np_model, torch_model):
        with pytest.raises((TypeError, ValueError)) as e:
            call(module.Transformer(**cfg))
        errors.append((e.type, in_torch_spelling(str(e.value)).replace("torch.", "")))  # dtypes: float32 either way
    assert errors[0] == errors[1]
