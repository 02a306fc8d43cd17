"""The acceptance trainings of the toy tasks (minutes each on 2 cores: the full tier, `make test-full`).

    copy             the copy preset (D 128, 4 heads, 2+2 layers, d_ff 512): 100% exact match by
                     greedy decoding on 200 held-out sequences
    copy-reverse     the copy-reverse preset (D 128, 8 heads, 3+3 layers, d_ff 512): >= 98% exact match on
                     500 held-out sequences
    toy-translation  the shipped corpus: every training pair translated exactly

The architectures are the presets'; the recipes (steps, lr, warmup, dropout, label smoothing, batch)
are tuned for a short run and are what RECIPES says. The thresholds above are fixed, never loosened.
Each test prints its wall time and accuracy (run with -s to see them).
"""

import time

import pytest

from transformer_np.training import default_configs, train

pytestmark = pytest.mark.full

# Recipe changes from each preset (transformer_np/config.py); the model architecture is untouched
# except dropout. What the tuning runs showed (seed 0, 2 cores):
# - dropout and label smoothing off: on a noiseless task they only slow convergence;
# - a large training set (fresh sequences, drawn anew as the copy task's generator does) instead of 5000:
#   with 5000 the copy model memorises (held-out exact match stalls near 88-92%);
# - StepLR from 1e-3, halved every few hundred steps, instead of the
#   paper's warmup: the 1/sqrt(step) decay leaves the lr high enough for loss spikes near zero
#   loss, so exact match wobbled (copy: 100% at step 1500, 97.5% at 2000); halving the lr
#   settles the model (copy: 100% from step 1500 on, held-out loss 2e-5; copy-reverse: 96.0%
#   after 2500 warmup steps, 99.8% after 2000 StepLR steps).
RECIPES = {
    "copy": (
        dict(dropout=0.0),
        dict(
            steps=2000,
            schedule="step",
            lr=1e-3,
            step_size=400,
            gamma=0.5,
            label_smoothing=0.0,
            train_size=100_000,
            eval_size=200,
        ),
    ),
    "copy-reverse": (
        dict(dropout=0.0),
        dict(
            steps=2000,
            schedule="step",
            lr=1e-3,
            step_size=400,
            gamma=0.5,
            label_smoothing=0.0,
            train_size=50_000,
            eval_size=500,
        ),
    ),
    # 1200 steps: at 800 the run ended at 100% on two threads but 85% on one (the threads' round-off takes
    # another trajectory); from 1000 steps on both reach 100% (held-out loss 8e-5 and below).
    "toy-translation": (dict(dropout=0.0), dict(steps=1200)),
}
THRESHOLDS = {"copy": 1.0, "copy-reverse": 0.98, "toy-translation": 1.0}


def _run(task, tmp_path):
    model_changes, train_changes = RECIPES[task]
    model_cfg, train_cfg = default_configs(task)
    model_cfg = model_cfg.replace(**model_changes)
    # no periodic evaluation or checkpoints: one evaluation and one checkpoint at the end
    train_cfg = train_cfg.replace(**train_changes, eval_every=0, checkpoint_every=0)
    t0 = time.perf_counter()
    res = train(model_cfg, train_cfg, str(tmp_path), progress=False)
    wall = time.perf_counter() - t0
    m = res.metrics
    print(
        f"\n[acceptance] {task}: {train_cfg.steps} steps, wall {wall:.1f} s, exact match {m['exact_acc']:.4f} "
        f"on {m['num_examples']} sequences, token accuracy {m['token_acc']:.4f}, loss {m['loss']:.4f}"
    )
    return m


@pytest.mark.parametrize("task", ["copy", "copy-reverse", "toy-translation"])
def test_acceptance_training(task, tmp_path):
    m = _run(task, tmp_path)
    assert m["num_examples"] == {"copy": 200, "copy-reverse": 500, "toy-translation": 60}[task]
    assert m["exact_acc"] >= THRESHOLDS[task], f"{task}: exact match {m['exact_acc']:.4f} < {THRESHOLDS[task]}"
