"""The project's own PyTorch programs (tests/support/programs) run on torch and, unchanged, on minitensor: every stage
compared in float64 and float32 to PARITY_RTOL.

Each program is loaded twice by `python -m parity compare`'s loader (parity.compare.load_twice: with torch mapped to
minitensor, then with real torch), the models built from the same arguments and torch's weights copied into
minitensor's by name. Forward outputs of every submodule, every gradient and the weights after optimizer steps go
through parity.compare.run_compare; the programs' own loops (training with clipping, a DataLoader, decoding) are run
on both sides and their results compared.

Generation: minitensor's random generator is not torch's, so sampled tokens cannot match. Greedy decoding (argmax)
is compared token for token; sampling (torch.multinomial with top-k) is run on minitensor and checked to be
reproducible under a seed and to draw only from the top k.
"""

from __future__ import annotations

import contextlib
import os

import numpy as np
import pytest
import torch

import minitensor as mt
from minitensor.testing import PARITY_RTOL, assert_close
from parity.compare import CompareConfig, load_twice, run_compare
from parity.convert import load_arrays, state_arrays
from tests.conftest import DTYPE_NAMES
from tests.support import ROOT

PROGRAMS = os.path.join(ROOT, "tests", "support", "programs")
_LOADED = {}


def program(name: str):
    """(module on minitensor, module on torch) of tests/support/programs/<name>.py, loaded once per test run."""
    if name not in _LOADED:
        _LOADED[name] = load_twice(os.path.join(PROGRAMS, name + ".py"))
    return _LOADED[name]


@contextlib.contextmanager
def default_dtype(dtype: str):
    previous = (mt.get_default_dtype(), torch.get_default_dtype())
    mt.set_default_dtype(getattr(mt, dtype))
    torch.set_default_dtype(getattr(torch, dtype))
    try:
        yield
    finally:
        mt.set_default_dtype(previous[0])
        torch.set_default_dtype(previous[1])


def build(name: str, cls: str, dtype: str, **kwargs):
    """(minitensor model, torch model) of one program's class, torch's weights copied into minitensor's."""
    ours, theirs = program(name)
    with default_dtype(dtype):
        torch.manual_seed(0)
        ref = getattr(theirs, cls)(**kwargs)
        model = getattr(ours, cls)(**kwargs)
    load_arrays(model, state_arrays(ref), what=f"{name}.{cls}")
    return model, ref


def same_state(model, ref, dtype: str, what: str) -> None:
    ours, theirs = state_arrays(model), state_arrays(ref)
    assert ours.keys() == theirs.keys()
    for k in theirs:
        assert_close(ours[k], theirs[k], PARITY_RTOL[dtype], f"{what}: {k}")


# ----------------------------------------------------------------------------------------------
# Every stage through parity compare: forward per submodule, gradients, weights after steps
# ----------------------------------------------------------------------------------------------
MODELS = {
    "gpt": dict(cls="GPT", kwargs=dict(n_layer=2), input_shape=(2, 8), loss="model"),
    "rnn": dict(file="rnn_lm", cls="RNNLM", kwargs={}, input_shape=(3, 5), loss="model"),
    "lstm": dict(file="rnn_lm", cls="LSTMLM", kwargs={}, input_shape=(3, 5), loss="random"),
    "convnet": dict(cls="ConvNet", kwargs={}, input_shape=(2, 1, 8, 8), loss="random", input_dtype="float"),
}


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("which", ["gpt", "rnn", "lstm", "convnet"])
def test_every_stage_of_each_model_matches_torch(which, dtype):
    spec = MODELS[which]
    path = os.path.join(PROGRAMS, spec.get("file", which) + ".py")
    report = run_compare(
        CompareConfig(
            path,
            spec["cls"],
            spec["kwargs"],
            spec["input_shape"],
            spec.get("input_dtype", "long"),
            dtype=dtype,
            steps=2,
            loss=spec["loss"],
        )
    )
    failed = [f"{r.kind} {r.name}: {r.value:.2e} > {r.limit:.1e} {r.note}" for r in report.failures()]
    assert report.passed, "\n".join(failed)
    kinds = {r.kind for r in report.rows}
    assert {"forward", "loss", "param.grad", "grad", "step", "param"} <= kinds
    params = {r.name for r in report.rows if r.kind == "param.grad"}
    assert params == {
        n for n, _ in program(spec.get("file", which))[1].__dict__[spec["cls"]](**spec["kwargs"]).named_parameters()
    }


# ----------------------------------------------------------------------------------------------
# The programs' own loops
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_gpt_greedy_generation_gives_torchs_tokens(dtype):
    model, ref = build("gpt", "GPT", dtype, n_layer=2)
    model.eval()
    ref.eval()
    idx = np.random.default_rng(1).integers(0, 17, (2, 3))
    ours = model.generate(mt.tensor(idx), 9, greedy=True)  # past block_size 8: the window slides
    theirs = ref.generate(torch.tensor(idx), 9, greedy=True)
    assert ours.shape == (2, 12)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_gpt_sampling_with_multinomial_is_seeded_and_keeps_to_the_top_k():
    model, _ = build("gpt", "GPT", "float64", n_layer=1)
    model.eval()
    idx = mt.tensor(np.random.default_rng(2).integers(0, 17, (3, 2)))
    runs = []
    for _ in range(2):
        mt.manual_seed(5)
        runs.append(model.generate(idx, 4, temperature=0.8, top_k=3).numpy())
    np.testing.assert_array_equal(runs[0], runs[1])
    # each sampled token is among the 3 most likely after the tokens before it
    seq = runs[0]
    for t in range(2, 6):
        logits, _ = model(mt.tensor(seq[:, :t]))
        top = np.argsort(-logits.detach().numpy()[:, -1], axis=-1)[:, :3]
        assert all(seq[b, t] in top[b] for b in range(3))


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("cls", ["RNNLM", "LSTMLM"])
def test_recurrent_language_model_training_with_clipping_matches_torch(cls, dtype):
    kwargs = dict(dropout=0.0) if cls == "LSTMLM" else {}  # dropout masks come from two different generators
    model, ref = build("rnn_lm", cls, dtype, **kwargs)
    rng = np.random.default_rng(3)
    batches = [rng.integers(0, 13, (2, 3, 6)) for _ in range(3)]
    ours_mod, theirs_mod = program("rnn_lm")
    ours = ours_mod.train(model, [(mt.tensor(x), mt.tensor(y)) for x, y in batches])
    theirs = theirs_mod.train(ref, [(torch.tensor(x), torch.tensor(y)) for x, y in batches])
    assert_close(np.array(ours), np.array(theirs), PARITY_RTOL[dtype], f"{cls}: (loss, clipped norm) per step")
    same_state(model, ref, dtype, f"{cls} after 3 SGD steps")


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_seq2seq_trained_from_a_dataloader_matches_torch(dtype):
    model, ref = build("seq2seq", "Seq2Seq", dtype)
    ours_mod, theirs_mod = program("seq2seq")
    ours = ours_mod.train(model, ours_mod.reversal_data())
    theirs = theirs_mod.train(ref, theirs_mod.reversal_data())
    assert len(theirs) == 6  # 12 pairs in batches of 4, two epochs
    rtol = PARITY_RTOL[dtype]
    assert_close(np.array(ours), np.array(theirs), rtol, "seq2seq: loss per step")
    same_state(model, ref, dtype, "seq2seq after 6 Adam steps")
    src = np.random.default_rng(4).integers(1, 10, (3, 5))
    np.testing.assert_array_equal(
        model.greedy(mt.tensor(src), 5).numpy(), ref.greedy(torch.tensor(src), 5).numpy(), "greedy decoding"
    )


def test_state_dict_surgery_copies_renamed_and_transposed_weights_as_torch():
    ours_mod, theirs_mod = program("surgery")
    torch.manual_seed(0)
    source_ref, target_ref = theirs_mod.Source(), theirs_mod.Target()
    source, target = ours_mod.Source(), ours_mod.Target()
    load_arrays(source, state_arrays(source_ref))
    load_arrays(target, state_arrays(target_ref))
    assert ours_mod.copy_pretrained(source, target) == theirs_mod.copy_pretrained(source_ref, target_ref)
    same_state(target, target_ref, "float32", "the target after the copy")
    x = np.random.default_rng(5).standard_normal((2, 4)).astype(np.float32)
    ours, theirs = target(mt.tensor(x)).detach().numpy(), target_ref(torch.tensor(x)).detach().numpy()
    assert_close(ours, theirs, PARITY_RTOL["float32"], "the target's output after the copy")


def test_partial_load_with_strict_false_reports_torchs_missing_and_unexpected_keys():
    ours_mod, theirs_mod = program("surgery")
    torch.manual_seed(0)
    source_ref, target_ref = theirs_mod.Source(), theirs_mod.Target()
    source, target = ours_mod.Source(), ours_mod.Target()
    load_arrays(source, state_arrays(source_ref))
    load_arrays(target, state_arrays(target_ref))
    keys = ours_mod.partial_load(source.state_dict(), target)
    assert keys == theirs_mod.partial_load(source_ref.state_dict(), target_ref)
    assert keys == (["extra.bias", "extra.weight", "head.bias", "head.weight"], ["stale.weight"])
    same_state(target, target_ref, "float32", "the target after the partial load")
