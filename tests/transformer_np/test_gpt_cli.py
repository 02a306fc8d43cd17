"""`python -m transformer_np gpt train | sample` on a small text file: a run folder written, sampling reproducible by
seed, a resumed run equal to an unbroken one, Ctrl-C saving whole steps and exiting 130, --init-from a Hugging Face
folder, --nproc 2 equal to one process on the global batch, and bad input refused in one line with exit status 2 and
nothing written."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import minitensor as mt
from minitensor.nn.parallel import run_process_group
from minitensor.testing import PARITY_RTOL, assert_close
from tests.support import ROOT, runs_ranks
from transformer_np.cli import main
from transformer_np.gpt import GPT, gpt2_shape
from transformer_np.gpt.train import load_checkpoint

WORDS = "to be or not that is the question whether tis nobler in the mind to suffer".split()
TEXT = "\n".join(" ".join(WORDS[(7 * i + 3 * j) % len(WORDS)] for j in range(8)) for i in range(200))
SMALL = ["--n-layer", "1", "--n-embd", "16", "--n-head", "2", "--block-size", "12", "--batch-size", "4"]
SMALL += ["--eval-interval", "5", "--eval-iters", "2"]


@pytest.fixture
def text(tmp_path):
    path = tmp_path / "tiny.txt"
    path.write_text(TEXT, encoding="utf-8")
    return str(path)


def run(argv, capsys) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def refused(argv, capsys, message: str) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    assert exc.value.code == 2 and out.out == ""
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], out.err


def params(path) -> dict:
    model, _, _ = load_checkpoint(path)
    return {k: p.detach().numpy() for k, p in model.named_parameters()}


@pytest.mark.parametrize("shape", ["gpt2", "llama"])
def test_train_writes_a_run_and_sample_continues_it(tmp_path, text, capsys, shape):
    out = str(tmp_path / "run")
    code, stdout, _ = run(
        ["gpt", "train", "--text", text, "--out", out, "--iters", "12", "--shape", shape, *SMALL], capsys
    )
    assert code == 0 and "12 steps" in stdout
    assert sorted(os.listdir(out)) == ["checkpoint.npz", "history.json", "loss.png", "sample.txt"]
    history = json.load(open(os.path.join(out, "history.json")))
    assert [row["step"] for row in history] == [0, 5, 10, 11]
    sample = ["gpt", "sample", "--checkpoint", out, "--prompt", "to be", "--max-new-tokens", "20"]
    first = run([*sample, "--seed", "3", "--top-k", "4", "--temperature", "0.8"], capsys)
    again = run([*sample, "--seed", "3", "--top-k", "4", "--temperature", "0.8"], capsys)
    assert first[0] == 0 and first == again and first[1].startswith("to be") and len(first[1]) == 26
    greedy = run([*sample, "--greedy"], capsys)
    assert greedy == run([*sample, "--greedy", "--seed", "9"], capsys)


def test_a_resumed_run_equals_an_unbroken_one(tmp_path, text, capsys):
    straight, split = str(tmp_path / "straight"), str(tmp_path / "split")
    assert run(["gpt", "train", "--text", text, "--out", straight, "--iters", "14", *SMALL], capsys)[0] == 0
    assert run(["gpt", "train", "--text", text, "--out", split, "--iters", "6", *SMALL], capsys)[0] == 0
    assert run(["gpt", "train", "--text", text, "--out", split, "--iters", "14", "--resume", *SMALL], capsys)[0] == 0
    a, b = params(straight), params(split)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_ctrl_c_saves_whole_steps_and_exits_130(tmp_path, text):
    out = str(tmp_path / "run")
    env = {**os.environ, "PYTHONPATH": ROOT, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "transformer_np", "gpt", "train", "--text", text, "--out", out, "--iters", "100000"]
    proc = subprocess.Popen(cmd + SMALL, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().startswith("step 0:")
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and err.strip() == "python -m transformer_np gpt train: interrupted"
    _, ckpt, _ = load_checkpoint(out)
    assert 0 < int(ckpt["meta"]["step"]) < 100000


@runs_ranks
def test_two_ranks_equal_one_process_on_the_global_batch(tmp_path, text, capsys):
    """`--nproc 2`: each rank takes half of every global batch and DistributedDataParallel averages the gradients, so
    the two ranks take one process's steps, up to the order of the sums (float32: PARITY_RTOL). The Llama shape has
    no key bias, whose identically zero gradient Adam would turn from round-off into steps of up to lr."""
    pytest.importorskip("mpi4py")
    argv = ["gpt", "train", "--text", text, "--iters", "8", "--shape", "llama", *SMALL]
    one, two = str(tmp_path / "one"), str(tmp_path / "two")
    assert run([*argv, "--out", one], capsys)[0] == 0
    env = {**os.environ, "PYTHONPATH": ROOT, "OMP_NUM_THREADS": "1"}
    done = run_process_group([sys.executable, "-m", "transformer_np", *argv, "--out", two, "--nproc", "2"], 240, env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("step 0:") == 1  # rank 0 alone prints
    a, b = params(one), params(two)
    assert a.keys() == b.keys()
    for k in a:
        assert_close(b[k], a[k], PARITY_RTOL["float32"], what=f"{k} after 8 steps on 2 ranks")
    history_one = json.load(open(os.path.join(one, "history.json")))
    history_two = json.load(open(os.path.join(two, "history.json")))
    assert [r["step"] for r in history_one] == [r["step"] for r in history_two]
    assert_close(
        np.array([r["val"] for r in history_two]), np.array([r["val"] for r in history_one]), PARITY_RTOL["float32"]
    )
    _, ckpt, _ = load_checkpoint(two)
    assert len(json.loads(ckpt["meta"]["rank_rngs"])) == 2  # every rank's dropout stream, for --resume


def test_nproc_that_does_not_divide_the_batch_is_one_line_before_any_work(tmp_path, text, capsys):
    out = str(tmp_path / "run")
    argv = ["gpt", "train", "--text", text, "--out", out, *SMALL, "--nproc", "3"]
    refused(argv, capsys, "the global batch of 4 rows does not divide into 3 equal shards")
    assert not os.path.exists(out)


def test_nproc_without_mpi_is_one_line_before_any_work(tmp_path, text):
    out = str(tmp_path / "run")
    code = (
        "import sys; sys.modules['mpi4py'] = None\n"  # as if the distributed extra were not installed
        "from transformer_np.cli import main; sys.exit(main(sys.argv[1:]))\n"
    )
    cmd = [sys.executable, "-c", code, "gpt", "train", "--text", text, "--out", out, *SMALL, "--nproc", "2"]
    env = {**os.environ, "PYTHONPATH": ROOT, "OMP_NUM_THREADS": "1"}
    done = run_process_group(cmd, 120, env)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "mpi4py is not installed" in lines[0], done.stderr
    assert not os.path.exists(out)


def test_init_from_a_hugging_face_folder(tmp_path, text, capsys):
    pytest.importorskip("safetensors")
    vocab = len(set(TEXT))
    mt.manual_seed(0)
    GPT(gpt2_shape(vocab, n_layer=1, n_embd=16, n_head=2, block_size=12)).save_pretrained(str(tmp_path / "hf"))
    out = str(tmp_path / "run")
    argv = ["gpt", "train", "--text", text, "--out", out, "--iters", "3", "--init-from", str(tmp_path / "hf"), *SMALL]
    assert run(argv, capsys)[0] == 0
    loaded = GPT.from_pretrained(str(tmp_path / "hf"))
    trained = params(out)
    assert set(trained) == {k for k, _ in loaded.named_parameters()}
    assert not np.array_equal(
        trained["tok_emb.weight"], loaded.tok_emb.weight.detach().numpy()
    )  # it trained from there
    GPT(gpt2_shape(vocab + 1, n_layer=1, n_embd=16, n_head=2, block_size=12)).save_pretrained(str(tmp_path / "big"))
    argv = ["gpt", "train", "--text", text, "--out", str(tmp_path / "r2"), "--init-from", str(tmp_path / "big")]
    refused(argv, capsys, f"its vocabulary has {vocab + 1} tokens, the data's tokenizer {vocab}")
    assert not os.path.exists(tmp_path / "r2")


def test_bad_input_is_one_line_and_exit_2(tmp_path, text, capsys):
    out = str(tmp_path / "run")
    assert run(["gpt", "train", "--text", text, "--out", out, "--iters", "2", *SMALL], capsys)[0] == 0
    before = {f: open(os.path.join(out, f), "rb").read() for f in os.listdir(out)}
    sample = ["gpt", "sample", "--checkpoint", out]
    refused([*sample, "--prompt", "to bZ"], capsys, "character 'Z' (U+005A) at position 4 is not in the vocabulary")
    refused([*sample, "--temperature", "nan"], capsys, "--temperature: expected a finite number > 0, got 'nan'")
    refused([*sample, "--temperature", "inf"], capsys, "--temperature: expected a finite number > 0, got 'inf'")
    refused([*sample, "--top-p", "0"], capsys, "--top-p: expected a finite number in (0, 1], got 0")
    refused([*sample, "--top-p", "1.5"], capsys, "--top-p: expected a finite number in (0, 1], got 1.5")
    refused([*sample, "--prompt", ""], capsys, "--prompt is empty")
    refused(["gpt", "sample", "--checkpoint", str(tmp_path / "none")], capsys, "no checkpoint at")
    refused(["gpt", "train", "--text", text, "--out", out], capsys, "holds a run: --resume to continue it")
    refused(["gpt", "train", "--text", str(tmp_path / "no.txt"), "--out", str(tmp_path / "x")], capsys, "cannot read")
    refused(["gpt", "train", "--text", text, "--out", text], capsys, "is a file, expected a directory")
    refused(
        ["gpt", "train", "--text", text, "--out", str(tmp_path / "r"), "--init-from", str(tmp_path)],
        capsys,
        "missing config.json",
    )
    refused(
        ["gpt", "train", "--text", text, "--out", str(tmp_path / "r"), "--n-embd", "15"],
        capsys,
        "n_embd (15) must be divisible by n_head (4)",
    )
    damaged = tmp_path / "damaged.npz"
    damaged.write_bytes(open(os.path.join(out, "checkpoint.npz"), "rb").read()[:200])
    refused(["gpt", "sample", "--checkpoint", str(damaged)], capsys, "damaged.npz")
    assert {f: open(os.path.join(out, f), "rb").read() for f in os.listdir(out)} == before
    assert not os.path.exists(tmp_path / "x") and not os.path.exists(tmp_path / "r")


def test_init_from_a_folder_with_its_tokenizer_trains_on_its_numbering(tmp_path, text, capsys):
    pytest.importorskip("safetensors")
    from transformer_np.gpt.tokenizer import BPETokenizer

    tok = BPETokenizer.train(TEXT, 280)
    folder = str(tmp_path / "hf")
    GPT(gpt2_shape(tok.vocab_size, n_layer=1, n_embd=16, n_head=2, block_size=12)).save_pretrained(folder)
    tok.save(folder)
    out = str(tmp_path / "run")
    assert (
        run(["gpt", "train", "--text", text, "--out", out, "--iters", "2", "--init-from", folder, *SMALL], capsys)[0]
        == 0
    )
    _, _, loaded = load_checkpoint(out)
    assert loaded.merges == tok.merges and loaded.encode(TEXT[:50]) == tok.encode(TEXT[:50])


def test_train_resume_and_sample_on_a_device(tmp_path, text, capsys):
    """--device cuda on the fake device: the run equals the CPU's (host checkpoints, the same batches)."""
    previous = mt.devices.use_fake_cuda(True)
    try:
        cpu, dev = str(tmp_path / "cpu"), str(tmp_path / "dev")
        assert run(["gpt", "train", "--text", text, "--out", cpu, "--iters", "8", *SMALL], capsys)[0] == 0
        argv = ["gpt", "train", "--text", text, "--out", dev, "--device", "cuda", *SMALL]
        assert run([*argv, "--iters", "4"], capsys)[0] == 0
        assert run([*argv, "--iters", "8", "--resume"], capsys)[0] == 0
        a, b = params(cpu), params(dev)
        for k in a:
            assert_close(b[k], a[k], PARITY_RTOL["float32"], what=f"{k} trained on the device")
        sample = ["gpt", "sample", "--checkpoint", dev, "--prompt", "to", "--greedy", "--max-new-tokens", "8"]
        assert run([*sample, "--device", "cuda"], capsys) == run(sample, capsys)
    finally:
        mt.devices.use_fake_cuda(previous)


def _break_folder(path, how: str) -> None:
    """A save_pretrained folder made unusable one way: another architecture, a field the family lacks, a tensor
    missing or of the wrong shape, a damaged safetensors file."""
    config_file = path / "config.json"
    config = json.loads(config_file.read_text())
    if how == "damaged":
        weights = path / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[:-100])
        return
    config.update(
        {
            "architecture": {"model_type": "bert", "architectures": ["BertModel"]},
            "field": {"activation_function": "relu"},
            "missing": {"n_layer": 2},
            "mismatched": {"n_embd": 32},
        }[how]
    )
    config_file.write_text(json.dumps(config))


@pytest.mark.parametrize(
    "how, message",
    [
        ("architecture", "a checkpoint of architecture 'bert'"),
        ("field", "unsupported config field activation_function='relu'"),
        ("missing", "missing ['transformer.h.1."),
        ("mismatched", "tensors do not fit the config"),
        ("damaged", "not a readable safetensors file"),
    ],
)
def test_a_bad_init_from_folder_is_one_line_and_nothing_is_overwritten(tmp_path, text, capsys, how, message):
    """--init-from a folder that cannot be read: one line, exit 2, before any work; neither the run it would have
    replaced (--overwrite) nor the folder itself is changed."""
    pytest.importorskip("safetensors")
    out = str(tmp_path / "run")
    assert run(["gpt", "train", "--text", text, "--out", out, "--iters", "2", *SMALL], capsys)[0] == 0
    hf = tmp_path / "hf"
    mt.manual_seed(0)
    GPT(gpt2_shape(len(set(TEXT)), n_layer=1, n_embd=16, n_head=2, block_size=12)).save_pretrained(str(hf))
    _break_folder(hf, how)
    files = lambda folder: {f: open(os.path.join(folder, f), "rb").read() for f in sorted(os.listdir(folder))}
    run_before, hf_before = files(out), files(hf)
    argv = ["gpt", "train", "--text", text, "--out", out, "--overwrite", "--init-from", str(hf), *SMALL]
    refused(argv, capsys, message)
    assert files(out) == run_before and files(hf) == hf_before
