"""benchmarks/gpt_recipe.py: the whole-split evaluation, the two sides' runs from the same weights and batches (a
few steps on a small text, in this process: nothing is timed), the combined result and its section of the page."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from benchmarks import gpt_recipe, results_page
from transformer_np.gpt.tokenizer import CharTokenizer
from transformer_np.gpt.train import Recipe

pytestmark = pytest.mark.full


@pytest.mark.parametrize("length", [1 + 64 * 3, 64 * 3 + 20, 2])
def test_the_windows_make_every_token_after_the_first_a_target_once(length):
    ids = np.arange(length) % 50
    batches = list(gpt_recipe.windows(ids, 64, batch=2))
    xs = np.concatenate([x.ravel() for x, _ in batches])
    ys = np.concatenate([y.ravel() for _, y in batches])
    np.testing.assert_array_equal(xs, ids[:-1])
    np.testing.assert_array_equal(ys, ids[1:])
    assert all(x.shape == y.shape and x.shape[1] <= 64 for x, y in batches)


def test_the_whole_split_loss_is_the_mean_over_every_target():
    ids = np.arange(200) % 7
    seen = []

    def loss_sum(x, y):
        seen.append(y.size)
        return float(y.sum())

    assert gpt_recipe.whole_split_loss(loss_sum, ids, 64) == pytest.approx(ids[1:].mean())
    assert sum(seen) == 199


def _splits():
    rng = np.random.default_rng(0)
    words = ["the ", "king ", "and ", "queen ", "of ", "rome, ", "speak!\n", "thou "]
    text = "".join(rng.choice(words, 3000))
    tokenizer = CharTokenizer.from_text(text)
    ids = {
        k: np.asarray(tokenizer.encode(t), dtype=np.int64) for k, t in (("train", text[:12000]), ("val", text[12000:]))
    }
    return tokenizer, ids


def test_the_two_sides_train_from_the_same_weights_on_the_same_batches():
    """Five steps of the recipe on each side: the same loss estimates along the way and the same validation loss,
    to float32's precision (the twin's batches come from the same generator in the same state)."""
    tokenizer, splits = _splits()
    recipe = dataclasses.replace(Recipe(), iters=5, lr_decay_iters=5, warmup_iters=2, eval_interval=2, eval_iters=2)
    ours = gpt_recipe.numpy_run(recipe, tokenizer, splits, lambda line: None)
    twin = gpt_recipe.torch_run(recipe, tokenizer, splits, lambda line: None)
    assert [h["step"] for h in ours["history"]] == [0, 2, 4] == [h["step"] for h in twin["history"]]
    for a, b in zip(ours["history"], twin["history"]):
        assert a["train"] == pytest.approx(b["train"], rel=1e-5) and a["val"] == pytest.approx(b["val"], rel=1e-5)
    assert ours["val_loss"] == pytest.approx(twin["val_loss"], rel=1e-5)
    assert ours["val_loss"] < ours["history"][0]["val"]  # it learned something
    assert len(ours["sample"]) == 1 + gpt_recipe.SAMPLE_TOKENS


def _side(side, val_loss, **changes):
    res = {
        "side": side,
        "val_loss": val_loss,
        "train_s": 100.0,
        "eval_s": 10.0,
        "history": [{"step": 0, "train": 4.2, "val": 4.3, "lr": 1e-5}],
        "iters": 2000,
        "threads": 1,
        "seed": 1337,
        "val_tokens": 500,
        "machine": {"description": "a test machine"},
        "sample": "To be",
    }
    return {**res, **changes}


def test_combine_states_the_difference_and_refuses_runs_that_differ():
    res = gpt_recipe.combine(_side("numpy", 1.50), _side("torch", 1.47), "cmd")
    assert res["difference"] == pytest.approx(0.03) and res["met"] is False
    assert gpt_recipe.combine(_side("numpy", 1.48), _side("torch", 1.47), "cmd")["met"] is True
    with pytest.raises(ValueError, match="differ in iters: 2000 and 30"):
        gpt_recipe.combine(_side("numpy", 1.5), _side("torch", 1.5, iters=30), "cmd")


def test_the_recipe_section_is_rewritten_and_the_runs_keep_it(tmp_path):
    page = tmp_path / "RESULTS.md"
    run = {"command": "python -m benchmarks run", "threads": {}}
    results_page.write(run, str(page))
    res = gpt_recipe.combine(_side("numpy", 1.4821), _side("torch", 1.4790), "python -m benchmarks gpt-recipe")
    results_page.write_recipe(res, str(page))
    text = page.read_text()
    assert text.startswith("# Benchmark results") and "Command: `python -m benchmarks run`" in text
    assert "| validation loss, whole split | 1.4821 | 1.4790 | +3.1e-03 | within 0.02: met |" in text
    assert "```text\nTo be\n```" in text
    results_page.write_recipe({**res, "sample": "Not to be"}, str(page))  # the section replaced, not appended
    assert page.read_text().count(results_page.RECIPE_HEADING) == 1 and "Not to be" in page.read_text()
    results_page.write({**run, "command": "python -m benchmarks run --threads 2"}, str(page))  # a new run
    text = page.read_text()
    assert "--threads 2" in text and "Not to be" in text and text.count(results_page.RECIPE_HEADING) == 1
    json.dumps(res)  # recipe.json is JSON
