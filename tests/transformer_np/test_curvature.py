"""The curvature experiment: power iteration, the tiny run end to end, its refusals, and PyTorch's eigenvalue."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from minitensor.testing import PARITY_RTOL
from tests.transformer_np.test_cli import user_error
from transformer_np import plots
from transformer_np.cli import main
from transformer_np.experiments import CURVATURE_SIZES, power_iteration, top_eigenvalue


def test_power_iteration_finds_the_largest_magnitude_eigenvalue(rng):
    """A symmetric matrix with known spectrum, H v given as lists of arrays (two blocks, as a model's parameters)."""
    q, _ = np.linalg.qr(rng.standard_normal((7, 7)))
    eigenvalues = np.array([5.0, -2.0, 1.5, 1.0, 0.5, 0.1, 0.0])
    h = q @ np.diag(eigenvalues) @ q.T

    def hvp(vs):
        y = h @ np.concatenate([vs[0].reshape(-1), vs[1]])
        return [y[:4].reshape(2, 2), y[4:]]

    top = power_iteration(hvp, [rng.standard_normal((2, 2)), rng.standard_normal(3)], iterations=200, tol=1e-12)
    assert top["eigenvalue"] == pytest.approx(5.0, rel=1e-10)
    assert top["residual"] < 1e-5 and top["iterations"] < 200  # stopped by the tolerance
    assert [h["eigenvalue"] for h in top["history"]][-1] == top["eigenvalue"]
    # the residual of an exact eigenvector is 0 at the first iteration
    exact = q[:, 0]
    top = power_iteration(hvp, [exact[:4].reshape(2, 2), exact[4:]], iterations=5, tol=1e-12)
    assert top["history"][0]["residual"] < 1e-12 and top["iterations"] == 2


def test_top_eigenvalue_is_the_most_positive_even_when_a_negative_one_dominates(rng):
    """Spectrum {5, -8, 1, 0.5, 0}: power iteration alone finds -8; the shifted second phase finds 5."""
    q, _ = np.linalg.qr(rng.standard_normal((5, 5)))
    h = q @ np.diag([5.0, -8.0, 1.0, 0.5, 0.0]) @ q.T
    hvp = lambda vs: [h @ vs[0]]
    v0 = [rng.standard_normal(5)]
    top = top_eigenvalue(hvp, v0, iterations=500, tol=1e-12)
    assert top["negative"] == pytest.approx(-8.0, rel=1e-9) and top["eigenvalue"] == pytest.approx(5.0, rel=1e-9)
    assert top["iterations"] == sum(top["phases"]) and len(top["phases"]) == 2 and top["residual"] < 1e-5
    again = top_eigenvalue(hvp, v0, iterations=500, counts=top["phases"])  # a reference run repeats it
    assert again["eigenvalue"] == top["eigenvalue"] and again["phases"] == top["phases"]
    positive = top_eigenvalue(lambda vs: [-h @ vs[0] + 0.0], v0, iterations=500, tol=1e-12)  # spectrum negated
    assert positive["negative"] is None and positive["eigenvalue"] == pytest.approx(8.0, rel=1e-9)


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def test_curvature_runs_tiny_from_the_command_line_and_refuses_to_overwrite(tmp_path, capsys):
    out = str(tmp_path / "curv")
    assert main(["experiment", "curvature", "--tiny", "--out", out, "--no-progress"]) == 0
    assert sorted(os.listdir(out)) == ["curvature.json", "curvature.md", "curvature.png"]
    with open(os.path.join(out, "curvature.json")) as f:
        res = json.load(f)
    assert res["experiment"] == "curvature" and res["tiny"] and res["steps"] == CURVATURE_SIZES["tiny"]["steps"]
    assert [r["step"] for r in res["rows"]] == res["measured_at"] == [0, 2, 4]
    for label in ("post-norm", "pre-norm"):
        run = res["runs"][label]
        assert len(run["lr"]) == len(run["grad_norm"]) == len(run["loss"]) == 4
        for row, point in zip(res["rows"], run["points"]):
            assert np.isfinite(row[f"{label} top eig"]) and row[f"{label} top eig"] == point["eigenvalue"]
            most = CURVATURE_SIZES["tiny"]["iterations"]
            assert 1 <= len(point["history"]) <= row[f"{label} iters"] <= (2 if point["negative"] else 1) * most
            assert row[f"{label} residual"] >= 0 and row[f"{label} grad norm"] > 0
    assert res["model"]["d_model"] == 16 and res["placements"] == {"post-norm": False, "pre-norm": True}
    assert res["rows"][0]["post-norm top eig"] != res["rows"][0]["pre-norm top eig"]
    assert os.path.getsize(os.path.join(out, "curvature.png")) > 10000
    md = _read(os.path.join(out, "curvature.md"))
    assert "| step | lr | post-norm top eig | post-norm iters | post-norm residual | post-norm neg eig |" in md
    assert "power iteration" in md
    before = _read(os.path.join(out, "curvature.json"))
    err = user_error(["experiment", "curvature", "--tiny", "--out", out, "--no-progress"], capsys)
    assert "already holds a result" in err and _read(os.path.join(out, "curvature.json")) == before
    err = user_error(["experiment", "heads", "--tiny", "--out", str(tmp_path / "h"), "--no-progress"], capsys)
    assert "--tiny is only for the curvature and memory experiments" in err


def test_top_eigenvalue_equals_pytorchs_on_the_same_weights(tmp_path, capsys):
    """`python -m parity.curvature --tiny`: each measurement repeated on the PyTorch twin (same iterations, same
    start), float32; a second run into the same folder is refused in one line."""
    from parity.curvature import main as parity_curvature

    out = str(tmp_path / "curv")
    assert parity_curvature(["--tiny", "--out", out, "--no-progress"]) == 0
    res = json.loads(_read(os.path.join(out, "curvature.json")))
    for row in res["rows"]:
        for label in ("post-norm", "pre-norm"):
            ours, ref = row[f"{label} top eig"], row[f"{label} torch eig"]
            assert abs(ours - ref) <= PARITY_RTOL["float32"] * abs(ref), (row["step"], label, ours, ref)
    assert "torch eig" in _read(os.path.join(out, "curvature.md"))
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        parity_curvature(["--tiny", "--out", out, "--no-progress"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "already holds a result" in err and "Traceback" not in err


def test_plot_curvature_checks_its_series(tmp_path):
    good = dict(
        eigenvalues={"post-norm": [3.0, 5.0]},
        lrs={"post-norm": [1e-3, 2e-3]},
        grad_norms={"post-norm": [1.0, 0.5]},
        residuals={"post-norm": [0.5, 0.1, 0.01]},
    )
    assert os.path.getsize(plots.plot_curvature([0, 2], path=str(tmp_path / "c.png"), **good)) > 1000
    with pytest.raises(ValueError, match="1 eigenvalues for 2 steps"):
        plots.plot_curvature([0, 2], path=str(tmp_path / "d.png"), **{**good, "eigenvalues": {"post-norm": [3.0]}})
