"""`make coverage`: the line coverage of minitensor/ and transformer_np/ by each tier of the suite, and by both.

Each tier runs as `make test` and `make test-full` run it (pytest-xdist on every core) under coverage.py, whose
configuration (pyproject.toml, [tool.coverage]) also measures the processes a test starts: the xdist workers, the
command lines run as subprocesses, the MPI ranks and the course runner's forked children. The fast tier must stay
within MAX_GAP points of the whole suite on each package: the command exits 1 when it does not, or when a test
failed.

    python -m tests.support.coverage_report            # both tiers, then the table
    python -m tests.support.coverage_report --report   # only the table, from the data the last run left
"""

from __future__ import annotations

import os
import subprocess
import sys

import coverage

from tests.support import ROOT

TIERS = {"fast": "not full", "full": "full"}  # name: the -m expression of `make test` and `make test-full`
PACKAGES = ("minitensor", "transformer_np")
MAX_GAP = 5.0  # points of line coverage the fast tier may lose against the whole suite
DATA = os.path.join(ROOT, ".coverage-tiers")


def data_file(tier: str) -> str:
    return os.path.join(DATA, tier, ".coverage")


def run_tier(tier: str) -> int:
    """The tier's tests under coverage; its data combined into data_file(tier). Returns pytest's exit status."""
    os.makedirs(os.path.dirname(data_file(tier)), exist_ok=True)
    for name in os.listdir(os.path.dirname(data_file(tier))):
        os.remove(os.path.join(os.path.dirname(data_file(tier)), name))
    env = {**os.environ, "COVERAGE_FILE": data_file(tier)}  # absolute: a test's process may run in a temporary folder
    pytest = ["-m", "pytest", "-n", "auto", "--dist", "loadgroup", "-q", "-p", "no:cacheprovider", "-m", TIERS[tier]]
    status = subprocess.call([sys.executable, "-m", "coverage", "run", *pytest], cwd=ROOT, env=env)
    subprocess.run([sys.executable, "-m", "coverage", "combine", "-q"], cwd=ROOT, env=env, check=True)
    return status


def percent(data: list[str], package: str) -> float:
    """Line coverage of one package, in percent, from one or more combined data files."""
    cov = coverage.Coverage(data_file=None)
    for path in data:
        part = coverage.CoverageData(basename=path)
        part.read()
        cov.get_data().update(part)
    with open(os.devnull, "w") as sink:
        return cov.report(include=[os.path.join(ROOT, package, "*")], file=sink)


def table() -> list[str]:
    """The table's lines, and the problems (a fast tier too far behind) after them."""
    columns = {
        "fast tier": [data_file("fast")],
        "full tier": [data_file("full")],
        "both": [data_file(t) for t in TIERS],
    }
    lines = [f"{'line coverage':<16}" + "".join(f"{name:>12}" for name in columns)]
    problems = []
    for package in PACKAGES:
        figures = {name: percent(files, package) for name, files in columns.items()}
        lines.append(f"{package + '/':<16}" + "".join(f"{v:11.1f}%" for v in figures.values()))
        gap = figures["both"] - figures["fast tier"]
        if gap > MAX_GAP:
            problems.append(f"{package}/: the fast tier covers {gap:.1f} points less than both (at most {MAX_GAP})")
    return lines, problems


def main(argv: list[str]) -> int:
    if argv not in ([], ["--report"]):
        print("usage: python -m tests.support.coverage_report [--report]", file=sys.stderr)
        return 2
    statuses = {} if argv else {tier: run_tier(tier) for tier in TIERS}
    missing = [tier for tier in TIERS if not os.path.exists(data_file(tier))]
    if missing:
        print(f"no coverage data for the {' and '.join(missing)} tier: run without --report first", file=sys.stderr)
        return 2
    lines, problems = table()
    print("\n".join(lines))
    failed = [f"the {tier} tier's tests failed (pytest exit status {s})" for tier, s in statuses.items() if s != 0]
    for problem in problems + failed:
        print(problem, file=sys.stderr)
    return 1 if problems or failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
