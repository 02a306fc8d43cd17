"""The learner's path runs: every notebook in notebooks/ executes top to bottom at its tiny size, and the
README's first-look snippet runs and prints what it promises.

Notebooks are executed the way a reader runs them, through a Jupyter kernel (jupytext reads the percent
format, nbclient executes), when the `notebooks` extra is installed (`make test` installs it); without it,
each runs as a plain script, which every notebook also supports. Either way an error fails the test.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys

import pytest

from tests.support import ROOT

pytestmark = pytest.mark.full

NOTEBOOK_DIR = os.path.join(ROOT, "notebooks")
NOTEBOOKS = sorted(f for f in os.listdir(NOTEBOOK_DIR) if re.fullmatch(r"\d\d_\w+\.py", f))
TIMEOUT_S = 300  # per notebook, at the tiny size (each takes seconds on a quiet machine)


def _env() -> dict:
    env = dict(os.environ)
    env.update(MT_NOTEBOOK_TINY="1", MPLBACKEND="Agg", OMP_NUM_THREADS=env.get("OMP_NUM_THREADS", "1"))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)
    return env


def _have_jupyter() -> bool:
    try:
        import ipykernel  # noqa: F401  (only whether it imports matters)
        import jupytext  # noqa: F401  (only whether it imports matters)
        import nbclient  # noqa: F401  (only whether it imports matters)
    except ImportError:
        return False
    return True


def test_the_path_is_numbered_one_to_eleven():
    numbers = [n[:2] for n in NOTEBOOKS]
    assert numbers == [f"{i:02d}" for i in range(1, 12)], NOTEBOOKS


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_opens_with_what_the_reader_will_learn(name):
    with open(os.path.join(NOTEBOOK_DIR, name)) as f:
        text = f.read()
    first_markdown = text.split("# %% [markdown]", 2)[1]
    assert "What you will learn" in first_markdown, f"{name} must open with what the reader will learn"
    assert text.count("# %%") >= 5, f"{name}: a notebook in jupytext percent format has cells"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_top_to_bottom(name, monkeypatch):
    path = os.path.join(NOTEBOOK_DIR, name)
    env = _env()
    if not _have_jupyter():
        proc = subprocess.run(
            [sys.executable, path], cwd=NOTEBOOK_DIR, env=env, capture_output=True, text=True, timeout=TIMEOUT_S
        )
        assert proc.returncode == 0, f"{name} failed as a script:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        return
    import jupytext
    from nbclient import NotebookClient

    for key, value in env.items():  # the kernel inherits this process's environment
        monkeypatch.setenv(key, value)
    nb = jupytext.read(path)
    client = NotebookClient(
        nb, timeout=TIMEOUT_S, kernel_name="python3", resources={"metadata": {"path": NOTEBOOK_DIR}}
    )
    client.execute()  # raises CellExecutionError naming the cell on any error
    errors = [
        o
        for cell in nb.cells
        if cell.cell_type == "code"
        for o in cell.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    assert not errors


def _readme_first_look() -> str:
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    section = readme.split("## A first look at the engine", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1, "the first-look section holds one Python snippet"
    return blocks[0]


def test_readme_first_look_runs_and_prints_what_it_computes():
    proc = subprocess.run(
        [sys.executable, "-c", _readme_first_look()], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "digraph minitensor" in out  # the graph, as DOT text
    assert re.search(r"label=\"x\\n\(4, 8\)", out) and re.search(r"label=\"W\\n\(3, 8\)", out)  # leaves named
    assert "gradcheck: passed" in out
    worst = float(re.search(r"worst \|backward - finite difference\|: ([0-9.e+-]+)", out).group(1))
    assert worst < 1e-6
    assert "Linear" in out and "CrossEntropy" in out  # the profile table


def test_readme_links_the_glossary_and_the_notebooks():
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    assert "docs/glossary.md" in readme and "notebooks/" in readme
    assert os.path.isfile(os.path.join(ROOT, "docs", "glossary.md"))


GLOSSARY_TERMS = [
    "Exact match",
    "Token accuracy",
    "Free trajectory",
    "Lockstep trajectory",
    "max relative error",
    "floor",
    "Beam score",
    "GNMT length penalty",
    "Post-norm, pre-norm",
    "Preset",
    "Warmup",
    "Label smoothing",
    "Teacher forcing",
    "KV cache",
    "tok/s",
    "IQR",
    "Rule, value, limit",
    "Tolerance (rtol)",
]


def test_glossary_defines_the_terms_the_outputs_use():
    with open(os.path.join(ROOT, "docs", "glossary.md")) as f:
        glossary = f.read()
    defined = re.findall(r"\*\*(.+?)\*\*", glossary)
    missing = [t for t in GLOSSARY_TERMS if not any(t.lower() in d.lower() for d in defined)]
    assert not missing, f"docs/glossary.md does not define {missing}"
    for preset in ("copy", "copy-reverse", "toy-translation", "base", "long"):
        assert f"| `{preset}` |" in glossary, f"the presets table lacks {preset}"


# --- the committed renderings (notebooks/rendered/, `make notebooks`) ------------------------------------------
RENDER_KEY = "minitensor_render"  # notebooks/render.py's metadata entry


def _source_sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_the_committed_rendering_was_made_from_the_current_source(name):
    """The hash of the source, not the outputs (they hold timings): a stale or missing rendering fails here."""
    rendered = os.path.join(NOTEBOOK_DIR, "rendered", name[:-3] + ".ipynb")
    assert os.path.exists(rendered), f"{name} has no rendering: run `make notebooks NB={name[:-3]}` and commit it"
    with open(rendered) as f:
        meta = json.load(f)["metadata"].get(RENDER_KEY, {})
    assert meta.get("source") == name
    assert meta.get("source_sha256") == _source_sha256(os.path.join(NOTEBOOK_DIR, name)), (
        f"notebooks/rendered/{name[:-3]}.ipynb was rendered from another version of {name}: "
        f"run `make notebooks NB={name[:-3]}` and commit it"
    )


def test_a_source_edit_makes_its_rendering_stale(tmp_path):
    name = NOTEBOOKS[0]
    with open(os.path.join(NOTEBOOK_DIR, "rendered", name[:-3] + ".ipynb")) as f:
        stored = json.load(f)["metadata"][RENDER_KEY]["source_sha256"]
    edited = tmp_path / name
    edited.write_bytes(open(os.path.join(NOTEBOOK_DIR, name), "rb").read() + b"# one more line\n")
    assert _source_sha256(str(edited)) != stored
    proc = subprocess.run(
        [sys.executable, os.path.join(NOTEBOOK_DIR, "render.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --- numbers in prose ---------------------------------------------------------------------------------------------
# The notebooks of the learner's path state the results of their own runs only through nbutil.say, whose markers
# are filled from the variables the run computed. A number left in a markdown cell is a definition or a constant
# the text sets, listed here with why; any other is a result written by hand, which the run may not show.
PROSE_NUMBERS = {
    "01_engine_from_zero.py": {"1e-6"},  # gradcheck's eps, a setting
    "02_fused_ops.py": set(),
    "03_attention.py": {"10000", "64", "800"},  # the paper's constant; the stored model's width and training length
    "04_training.py": {
        "400",  # the full size's step count, a setting
        "20",  # the tiny size's step count, a setting
        "128",  # the preset's width
        "32",  # the tiny width
        "2000",  # `make demo`'s step count, a setting
        "100",  # the step count from which plot_loss draws a running mean, a setting of the plot
        "0.1",  # label smoothing, a setting
        "0.5",  # the schedule's exponents
        "1.5",
    },
    "05_decoding.py": {"64", "0.6"},  # the stored model's width; the length penalty's common setting
    "06_parity.py": {
        "1e-16",  # float64's epsilon, the scale of round-off
        "1.2e-7",  # float32's epsilon
        "1e-10",  # the tolerances of minitensor/testing.py, settings
        "1e-5",
        "1e-9",
        "1e-4",
        "100",  # the order of the number of ops in the model, a count that sets the tolerance
    },
    "07_higher_order.py": {"128", "200", "1000"},  # the preset's width; this run's and the full study's step counts
    "08_forward_mode.py": set(),
    "09_memory.py": {"2048", "32"},  # the sequence length, a setting, and its score matrix's size, 2048^2 * 8 B
    "10_data_parallel.py": {"25"},  # a setting the reader is asked to try
    "11_gpt.py": {"11", "10000", "0.9", "0.99"},  # its number; the rotary base (Llama's); AdamW's betas
}
NUMBER = re.compile(r"(?<![\w.^])\d+(?:\.\d+)?(?:e-?\d+)?%?")


def _markdown_numbers(name: str) -> set:
    with open(os.path.join(NOTEBOOK_DIR, name)) as f:
        cells = f.read().split("# %%")
    numbers = set()
    for cell in cells:
        if cell.startswith(" [markdown]"):
            cell = re.sub(r"(exercises?|check|section)\s+(#\s*)?\d+(\.\d+)?", "", cell)  # numbers that name, not state
            for s in NUMBER.findall(cell):
                if "." in s or "e" in s or "%" in s or int(s) > 10:  # small counts (2 heads, 3 ways) are words
                    numbers.add(s)
    return numbers


@pytest.mark.parametrize("name", sorted(PROSE_NUMBERS))
def test_prose_states_no_result_by_hand(name):
    stray = _markdown_numbers(name) - PROSE_NUMBERS[name]
    assert not stray, f"{name}: markdown states {sorted(stray)}; print results with nbutil.say from computed values"


def test_say_fills_every_marker_or_refuses(capsys, monkeypatch):
    sys.path.insert(0, NOTEBOOK_DIR)
    try:
        import nbutil
    finally:
        sys.path.remove(NOTEBOOK_DIR)
    monkeypatch.setattr(nbutil, "in_jupyter", lambda: False)  # as a script (a notebook run earlier loads ipykernel)
    assert nbutil.say("{n} steps: {x:.2f}", n=3, x=1.234) == "3 steps: 1.23"
    assert "3 steps: 1.23" in capsys.readouterr().out
    with pytest.raises(KeyError):
        nbutil.say("{n} steps, loss {x:.2f}", n=3)
    with pytest.raises(ValueError, match="unfilled"):
        nbutil.say("{n} steps {{x}}", n=3)


def test_a_traceback_is_trimmed_to_the_readers_frames():
    sys.path.insert(0, NOTEBOOK_DIR)
    try:
        import nbutil
    finally:
        sys.path.remove(NOTEBOOK_DIR)
    message = (
        "Function 'MulBackward' returned nan values. Traceback of forward call that caused the error:\n"
        '  File "<frozen runpy>", line 198, in _run_module_as_main\n'
        '  File "/venv/lib/python3.11/site-packages/ipykernel/kernelapp.py", line 768, in start\n'
        "    self.io_loop.start()\n"
        '  File "/tmp/ipykernel_77/1234.py", line 5, in <module>\n'
        "    loss = distances(a, b).sum()\n"
    )
    trimmed = nbutil.trim_traceback(message)
    assert "ipykernel/kernelapp.py" not in trimmed and "io_loop" not in trimmed and "<frozen" not in trimmed
    assert "/tmp/ipykernel_77/1234.py" in trimmed and "loss = distances(a, b).sum()" in trimmed
    assert "(2 frames of Python, Jupyter and the packages trimmed)" in trimmed
