"""benchmarks/ab.py: cases parsed or refused, the table, and one round end to end on the same tree twice."""

import subprocess
import sys

import pytest

from benchmarks import ab
from tests.support import ROOT


def test_cases_are_parsed_and_bad_ones_refused():
    assert ab.parse_case("train:copy:2") == ("train", "copy", 2)
    assert ab.parse_case("perop:1") == ("perop", "", 1)
    assert ab.parse_case("hvp:copy-reverse:1") == ("hvp", "copy-reverse", 1)
    for bad in ("train:copy", "perop", "decode::1", "grad:copy:1", "train:copy:x"):
        with pytest.raises(ValueError, match="a case is train:CONFIG:THREADS"):
            ab.parse_case(bad)


def test_the_per_op_figures_take_off_the_bare_calls():
    medians = {"recorded": 2e-3, "bare_forward": 1e-3, "fwd_bwd": 5e-3, "bare_fwd_bwd": 3e-3, "kept_objects": 1990}
    got = ab.figures(medians, "perop")
    assert got == pytest.approx({"recorded_us": 1e3 / 199, "fwd_bwd_us": 2e3 / 199, "kept_per_op": 10})


def test_the_table_gives_ratio_spread_and_both_medians():
    table = ab.markdown([("train:copy:1", "train", 0.98, 0.95, 1.01, 0.2, 0.196)], rounds=10)
    assert "| train:copy:1 | train | 0.980 [0.950-1.010] | 0.2 s | 0.196 s |" in table and "10 rounds" in table


def test_a_bad_tree_is_one_line_and_exit_2(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.ab", "--before", str(tmp_path), "--after", ROOT],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 2 and "is not a checkout of this project" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


@pytest.mark.full
def test_one_round_of_the_same_tree_against_itself():
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.ab", "--before", ROOT, "--after", ROOT, "--rounds", "1"]
        + ["--cases", "train:tiny:1,perop:1", "--calls", "2"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    assert "| train:tiny:1 | train |" in out.stdout and "| perop:1 | recorded_us |" in out.stdout


def test_an_environment_pair_must_be_key_equals_value():
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.ab", "--before", ROOT, "--after", ROOT, "--env-before", "MT_FAST_WITHOUT"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 2 and "--env-before: expected KEY=VALUE, got 'MT_FAST_WITHOUT'" in out.stderr


def test_a_device_name_no_tree_registers_is_refused():
    assert ab.unknown_devices("layer_norm, kv_cache") == []
    assert ab.unknown_devices("layer_nrom,quiet") == ["layer_nrom"]
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.ab", "--before", ROOT, "--after", ROOT]
        + ["--env-before", "MT_FAST_WITHOUT=layer_nrom"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 2 and "names no registered speed device: layer_nrom" in out.stderr
