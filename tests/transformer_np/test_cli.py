"""transformer_np/cli.py, commands.py and the experiments package: every command on a tiny model in a temporary
directory."""

import json
import os
import subprocess
import sys

import pytest

import transformer_np.cli
from tests.support import ROOT
from tests.support.cli_help import undocumented_flags
from transformer_np.cli import main
from transformer_np.experiments import EXPERIMENTS

TINY = [
    "--d-model",
    "16",
    "--num-heads",
    "2",
    "--num-encoder-layers",
    "1",
    "--num-decoder-layers",
    "1",
    "--d-ff",
    "32",
    "--train-size",
    "60",
    "--eval-size",
    "8",
    "--batch-size",
    "8",
    "--warmup-steps",
    "4",
    "--no-progress",
]


def user_error(argv, capsys) -> str:
    """Run the command line on `argv`, expecting a user error: exit status 2 and one line on stderr."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("cli") / "cr")
    assert (
        main(
            [
                "train",
                "--task",
                "copy-reverse",
                "--out",
                out,
                "--steps",
                "4",
                "--checkpoint-every",
                "2",
                "--eval-every",
                "2",
                *TINY,
            ]
        )
        == 0
    )
    return out


def test_train_writes_checkpoint_and_flags_reach_the_configs(run_dir, capsys):
    import minitensor as mt

    state = mt.load(os.path.join(run_dir, "checkpoint.npz"))
    assert state["model_config"]["d_model"] == 16 and state["model_config"]["num_heads"] == 2
    assert state["train_config"]["steps"] == 4 and state["train_config"]["train_size"] == 60
    assert state["step"] == 4
    with open(os.path.join(run_dir, "history.json")) as f:
        assert len(json.load(f)["loss"]) == 4


def test_train_resume_continues(run_dir, tmp_path, capsys):
    import shutil

    out = str(tmp_path / "cr")
    shutil.copytree(run_dir, out)
    assert main(["train", "--out", out, "--resume", "--steps", "6", "--no-progress"]) == 0
    assert "done: 6 steps" in capsys.readouterr().out
    # a resumed run may not change the model
    err = user_error(["train", "--out", out, "--resume", "--steps", "8", "--d-model", "32", "--no-progress"], capsys)
    assert "d_model: checkpoint 16 vs requested 32" in err


def test_decode_greedy_and_beam(run_dir, capsys):
    assert main(["decode", "--checkpoint", run_dir, "--input", "3 4 5"]) == 0
    out = capsys.readouterr().out
    assert "input:  3 4 5" in out and "greedy:" in out
    assert (
        main(["decode", "--checkpoint", run_dir, "--input", "3 4 5", "--beam", "3", "--n-best", "2", "--max-len", "8"])
        == 0
    )
    out = capsys.readouterr().out
    assert "beam 1 (score" in out and "beam 2 (score" in out


def test_plot_writes_every_figure(run_dir, tmp_path, capsys):
    out = str(tmp_path / "plots")
    assert main(["plot", "--checkpoint", run_dir, "--out", out, "--input", "3 4 5 6"]) == 0
    names = set(os.listdir(out))
    for want in (
        "positional_encoding.png",
        "positional_curves.png",
        "causal_mask.png",
        "lr_schedule.png",
        "loss.png",
        "grad_norms.png",
        "attn_encoder_layer0_head0.png",
        "attn_decoder_self_layers.png",
        "attn_decoder_cross_layer0_heads.png",
    ):
        assert want in names
        assert os.path.getsize(os.path.join(out, want)) > 1000


def test_clear_errors_and_nonzero_exit(tmp_path, capsys):
    assert "invalid choice: 'nope'" in user_error(["train", "--task", "nope", "--out", str(tmp_path / "x")], capsys)
    assert "no checkpoint" in user_error(["decode", "--checkpoint", str(tmp_path / "missing"), "--input", "3"], capsys)
    user_error(["plot", "--checkpoint", str(tmp_path / "missing"), "--out", str(tmp_path / "p")], capsys)
    assert "invalid choice: 'nope'" in user_error(["experiment", "nope", "--out", str(tmp_path / "e")], capsys)
    assert "no checkpoint" in user_error(["train", "--out", str(tmp_path / "y"), "--resume"], capsys)
    user_error(["frobnicate"], capsys)
    assert os.listdir(tmp_path) == []


def test_decode_rejects_bad_input(run_dir, capsys):
    assert "unknown source tokens ['99']" in user_error(["decode", "--checkpoint", run_dir, "--input", "3 99"], capsys)
    user_error(["decode", "--checkpoint", run_dir, "--input", "3", "--n-best", "2"], capsys)
    assert "the input is empty" in user_error(["decode", "--checkpoint", run_dir, "--input", ""], capsys)
    assert "special tokens ['<unk>']" in user_error(["decode", "--checkpoint", run_dir, "--input", "3 <unk>"], capsys)


def test_decode_no_cache_is_honoured_by_beam_search(run_dir, capsys, monkeypatch):
    import transformer_np.commands as commands  # decode_text calls beam_search from there

    seen = []
    real = commands.beam_search
    monkeypatch.setattr(commands, "beam_search", lambda *a, **k: seen.append(k["use_cache"]) or real(*a, **k))
    outputs = []
    for flags in ([], ["--no-cache"]):
        assert main(["decode", "--checkpoint", run_dir, "--input", "3 4 5", "--beam", "3", *flags]) == 0
        outputs.append(capsys.readouterr().out)
    assert seen == [True, False] and outputs[0] == outputs[1]


def test_every_flag_has_help_and_shows_its_default():
    assert undocumented_flags(transformer_np.cli.build_parser()) == []


def test_train_help_groups_the_flags_and_lists_the_choices(capsys):
    with pytest.raises(SystemExit) as e:
        main(["train", "--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0
    for group in ("model (ModelConfig):", "optimisation (TrainConfig):", "data (TrainConfig):", "run (TrainConfig):"):
        assert group in out
    for choices in ("{warmup,step,constant}", "{relu,gelu}", "{sinusoidal,learned}", "copy-reverse,reverse"):
        assert choices in out


def test_a_run_is_never_overwritten_by_accident(run_dir, tmp_path, capsys):
    import shutil

    out = str(tmp_path / "cr")
    shutil.copytree(run_dir, out)
    before = {f: os.path.getmtime(os.path.join(out, f)) for f in os.listdir(out)}
    assert "already holds a run" in user_error(["train", "--out", out, "--steps", "2", *TINY], capsys)
    assert {f: os.path.getmtime(os.path.join(out, f)) for f in os.listdir(out)} == before
    assert main(["train", "--out", out, "--steps", "2", "--overwrite", *TINY]) == 0
    import minitensor as mt

    assert mt.load(os.path.join(out, "checkpoint.npz"))["step"] == 2


def test_python_dash_m_entry_point(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "transformer_np", "decode", "--checkpoint", str(tmp_path / "none"), "--input", "3"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert r.returncode == 2 and "no checkpoint" in r.stderr


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_each_experiment_runs_in_tiny_mode(name, tmp_path, capsys):
    out = str(tmp_path / name)
    assert main(["experiment", name, "--out", out, "--steps", "2", "--no-progress"]) == 0
    with open(os.path.join(out, f"{name}.json")) as f:
        res = json.load(f)
    assert res["experiment"] == name and res["rows"]
    assert os.path.getsize(os.path.join(out, f"{name}.png")) > 1000
    with open(os.path.join(out, f"{name}.md")) as f:
        assert sum(line.startswith("|---") for line in f.read().splitlines()) == 1
    assert sorted(os.listdir(out)) == sorted(f"{name}.{ext}" for ext in ("json", "md", "png"))


def test_experiments_share_a_directory_without_overwriting(tmp_path, capsys):
    out = str(tmp_path / "exp")
    assert main(["experiment", "residual", "--out", out, "--no-progress"]) == 0
    first = open(os.path.join(out, "residual.json")).read()
    err = user_error(["experiment", "residual", "--out", out, "--no-progress"], capsys)
    assert "already holds a result" in err and open(os.path.join(out, "residual.json")).read() == first
    # a second experiment writes its own files beside the first
    assert main(["experiment", "heads", "--out", out, "--steps", "1", "--no-progress"]) == 0
    assert {"residual.md", "heads.md", "residual.json", "heads.json"} <= set(os.listdir(out))
    assert open(os.path.join(out, "residual.json")).read() == first


def test_demo_runs_end_to_end_in_tiny_mode(tmp_path, capsys):
    out = str(tmp_path / "demo")
    assert main(["demo", "--out", out, "--steps", "1", "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "held-out (200 sequences never seen in training): exact match" in text
    assert "beam 4:" in text
    assert os.path.isfile(os.path.join(out, "checkpoint.npz"))
    assert len([f for f in os.listdir(os.path.join(out, "plots")) if f.endswith(".png")]) == 15


def test_train_help_says_why_tasks_and_parity_presets_differ(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "python -m parity --config` lists presets" in out and "--allow-nonfinite" in out


def test_the_readme_names_every_notebook():
    root = ROOT
    notebooks = [f for f in os.listdir(os.path.join(root, "notebooks")) if f[:2].isdigit() and f.endswith(".py")]
    with open(os.path.join(root, "README.md")) as f:
        readme = f.read()
    words = {6: "six", 7: "seven", 8: "eight", 9: "nine", 10: "ten", 11: "eleven", 12: "twelve"}
    assert f"the {words[len(notebooks)]} notebooks" in readme, f"{len(notebooks)} notebooks, README says otherwise"


def test_make_clean_keeps_the_environment_and_the_demo_can_run_again():
    root = ROOT
    with open(os.path.join(root, "Makefile")) as f:
        rules = f.read().split("\n\n")
    clean = next(r for r in rules if "\nclean:" in "\n" + r)
    assert "$(VENV)" not in clean.split("clean:")[1]  # only distclean removes .venv
    assert any("distclean: clean" in r and "rm -rf $(VENV)" in r for r in rules)
    demo = next(r for r in rules if r.startswith("demo:"))
    assert "$(DEMO_FLAGS)" in demo and "DEMO_FLAGS ?= --overwrite" in "\n".join(rules)
