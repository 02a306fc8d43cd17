"""One framework in its own process, timing what the parent asks: the unit of the separate-process method.

Why a process per side: NumPy's OpenBLAS keeps its worker threads spinning for a while after its
last matrix product, and in one process they take the cores from PyTorch's OpenMP threads, so a
PyTorch step run right after a NumPy step takes much longer (the interference check measures it on every run;
measured: docs/decisions/007-a-process-per-side-alternating.md). The parent starts one worker per side,

    python -m benchmarks.worker --side numpy|torch|torch-nn|torch-cuda|both --threads N [--wait-policy P]

and alternates its requests between them A B A B (benchmarks/timing.py, `alternate`). A worker
reads one JSON request per line on stdin and answers one JSON line on stdout (library output is
sent to stderr). The numpy worker never imports torch; the torch worker builds transformer_np's
model only to copy its weights, so both hold the same weights; 'torch-nn' is the same on torch.nn.Transformer
(benchmarks/nn_side.py). 'both' hosts the NumPy side and the two CPU PyTorch sides in one process: the
interference check, the same-output checks, and the labelled `--in-process` mode.

Requests (each answered by a dict; a failure by {"error": "..."}):
    time     {side, config, workload, calls, warmup}  -> {samples_ms}: `calls` timed calls after `warmup`
    gemm     {side, shape: [M, K, N], calls}          -> {samples_ms}: float32 (M, K) @ (K, N)
    products {side, config, calls}                    -> {samples_ms}: every product of one training step, replayed
    phases   {side, config, rounds}                   -> {phase: median ms}
    profile  {side, config, steps}                    -> the profiler's dict (benchmarks/profiling.py)
    ops      {side, cases, target_ms}                 -> {case: {fwd_ms, fb_ms}}: one sample per op case
    check    {config, calls}                          -> same logits, decode agreement, interference ('both')
    ops_check {cases, sides?}                         -> {case: forward max rel err} (numpy against torch: 'both';
                                                         sides ['bare', 'numpy']: benchmarks/fused_floor.py)
    hvp_check {config}                                -> the two sides' H v compared ('both')
    facts    {}                                       -> machine facts of this process
"""

from __future__ import annotations

import sys

from benchmarks.env import WAIT_POLICIES, machine_facts, set_torch_threads, thread_env, thread_env_from_argv

if __name__ == "__main__":
    # Thread counts must be in the environment before numpy/torch load (benchmarks/env.py loads neither).
    thread_env_from_argv(sys.argv)

import argparse
import gc
import json
import os
import statistics
import subprocess
import tempfile
import time

import numpy as np

from benchmarks import flops, nn_side, profiling
from benchmarks import gpt_workloads as G
from benchmarks import workloads as W
from benchmarks.op_cases import case_runner
from benchmarks.timing import calibrate
from minitensor.allocator import reuse_freed_memory
from minitensor.testing import PARITY_RTOL, error_stats
from transformer_np.cli import OneLineParser
from transformer_np.cliutil import THREADS_MAX, integer

SIDES = ("numpy", "torch", "torch-nn", "torch-cuda", "both")


# --------------------------------------------------------------------------------- worker side
class _Host:
    """The models of the config in use, one Side per framework this worker hosts."""

    def __init__(self, side: str, threads: int):
        self.hosted = ["numpy", "torch", "torch-nn"] if side == "both" else [side]
        self.threads = threads
        self.key = None
        self.cfg = self.batch = None
        self.sides: dict = {}
        self.op_runners: dict = {}  # (side, case index) -> the op's closures
        self.op_numbers: dict = {}  # (side, case index) -> calls per sample (forward, forward+backward)
        if any(s.startswith("torch") for s in self.hosted):
            set_torch_threads(threads)

    def load(self, spec: dict, fresh: bool = False):
        """Build (or keep) the models of `spec`; the previous config's models are dropped first. fresh=True
        rebuilds them even when kept: a training workload has moved each side's weights on its own."""
        key = json.dumps(spec, sort_keys=True)
        if key == self.key and not fresh:
            return self.sides
        self.sides, self.key = {}, None
        self.cfg = W.config_from_spec(spec)
        if W.is_gpt(self.cfg):
            return self._load_gpt(key)
        self.batch = W.make_batch(self.cfg)
        np_model = W.build_numpy_model(self.cfg)
        for s in self.hosted:
            if s == "numpy":
                self.sides[s] = W.numpy_side(self.cfg, np_model, self.batch)
            elif s == "torch-nn":
                nn_model = nn_side.copy_to_nn_transformer(np_model, self.cfg)
                self.sides[s] = nn_side.nn_torch_side(self.cfg, nn_model, self.batch)
            else:
                device = "cuda" if s == "torch-cuda" else "cpu"
                t_model = W.copy_to_torch(np_model, self.cfg, device)
                self.sides[s] = W.torch_side(self.cfg, t_model, self.batch, device=device)
        self.key = key
        return self.sides

    def _load_gpt(self, key: str):
        """The decoder-only config's sides (benchmarks/gpt_workloads.py): no torch.nn.Transformer side."""
        self.batch = G.make_batch(self.cfg)
        np_model = G.build_numpy_model(self.cfg)
        for s in self.hosted:
            if s == "numpy":
                self.sides[s] = W.gpt_side(G.numpy_parts(self.cfg, np_model, self.batch))
            elif s != "torch-nn":
                device = "cuda" if s == "torch-cuda" else "cpu"
                twin = G.copy_to_torch(np_model, device)
                self.sides[s] = W.gpt_side(G.torch_parts(self.cfg, twin, self.batch, device))
        self.key = key
        return self.sides

    def op_runner(self, side: str, index: int):
        """(forward, forward+backward, forward output) closures of op case `index` for `side`, built once."""
        if (side, index) not in self.op_runners:
            self.op_runners[side, index] = case_runner(side if side in ("numpy", "bare") else "torch", index)
        return self.op_runners[side, index]


def _timed(fn, sync=None) -> float:
    t0 = time.perf_counter()
    fn()
    if sync:
        sync()
    return (time.perf_counter() - t0) * 1e3


def _samples(fn, calls: int, warmup: int = 0, sync=None) -> list[float]:
    """`calls` timed calls (ms) after `warmup` untimed ones.

    After a warm-up, one full garbage collection: the setup's garbage is nobody's cost, while
    what a side's own calls leave for the collector is (none is forced between samples).
    """
    for _ in range(warmup):
        fn()
    if warmup:
        gc.collect()
    return [_timed(fn, sync) for _ in range(calls)]


def _gemm(shape, calls: int, side: str) -> list[float]:
    """float32 (M, K) @ (K, N) by `side`'s library: NumPy's BLAS (OpenBLAS) or torch's (CPU)."""
    M, K, N = shape
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    if side != "numpy":
        import torch

        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        return _samples(lambda: ta @ tb, calls, warmup=2)
    return _samples(lambda: a @ b, calls, warmup=2)


def _products(spec: dict, calls: int, side: str) -> list[float]:
    """The matrix products of one training step of `spec` (flops.step_products), float32, replayed by `side`'s
    library on random operands allocated beforehand, each into an output of its own: the products alone, at the
    rate the library reaches on each of the step's own shapes (benchmarks/budget.py)."""
    rng = np.random.default_rng(0)
    products = flops.step_products(W.config_from_spec(spec))
    made = {}  # one set of operands per distinct shape
    for b, M, K, N in dict.fromkeys(products):
        a, c = (rng.standard_normal(shape, dtype=np.float32) for shape in ((b, M, K), (b, K, N)))
        made[b, M, K, N] = [a, c, np.empty((b, M, N), np.float32)]
    run = [made[p] for p in products]
    if side != "numpy":
        import torch

        run = [[torch.from_numpy(x) for x in ops] for ops in run]
        mm = torch.matmul
    else:
        mm = np.matmul

    def step():
        for a, c, out in run:
            mm(a, c, out=out)

    return _samples(step, calls, warmup=1)


def _ops(host: _Host, side: str, cases: list[int], target_ms: float) -> dict:
    """One sample per case and pass: `number` calls (calibrated once to ~target_ms) timed together."""
    out = {}
    for i in cases:
        fwd, fb = host.op_runner(side, i)[:2]
        if (side, i) not in host.op_numbers:
            host.op_numbers[side, i] = (calibrate(fwd, target_ms), calibrate(fb, target_ms))
        numbers = host.op_numbers[side, i]
        row = {}
        for name, fn, k in (("fwd_ms", fwd, numbers[0]), ("fb_ms", fb, numbers[1])):
            t0 = time.perf_counter()
            for _ in range(k):
                fn()
            row[name] = (time.perf_counter() - t0) * 1e3 / k
        out[str(i)] = row
    return out


def _check(host: _Host, spec: dict, calls: int) -> dict:
    """Both sides in this one process: same logits, same greedy tokens, and the interference check.

    Interference: PyTorch's training step timed `calls` times back to back (alone), then `calls`
    times each right after a NumPy training step. Logits and decoding come first, before any
    optimizer step moves the two models apart.
    """
    sides = host.load(spec)
    a, b = sides["numpy"], sides["torch"]
    # The EOS column is left out: its -1e4 bias would set the error measure's floor (relative to
    # max |logit|) so high that any real disagreement elsewhere would pass unnoticed. A decoder-only model has none.
    if W.is_gpt(host.cfg):
        keep = list(range(host.cfg.model.vocab_size))
    else:
        keep = [v for v in range(host.cfg.model.tgt_vocab_size) if v != W.EOS]
    ours = a.eval_logits()[..., keep]
    _, max_rel = error_stats(ours, b.eval_logits()[..., keep])
    out = {"parity": {"max_rel": max_rel, "ok": bool(max_rel <= PARITY_RTOL["float32"])}}
    if "torch-nn" in sides:  # the nn.Transformer side computes the same logits too
        _, nn_rel = error_stats(ours, sides["torch-nn"].eval_logits()[..., keep])
        out["parity_nn"] = {"max_rel": nn_rel, "ok": bool(nn_rel <= PARITY_RTOL["float32"])}
    if a.greedy_nocache is not None and b.greedy_nocache is not None:
        out["decode_agreement"] = W.decode_agreement(a.greedy_nocache(), b.greedy_nocache())
    elif a.greedy_cache is not None and b.greedy_cache is not None:  # a decoder-only config: the cached tokens
        out["decode_agreement"] = W.decode_agreement(a.greedy_cache(), b.greedy_cache())
    for _ in range(2):  # warm-up of both steps
        a.train()
        b.train()
    alone = _samples(b.train, calls)
    after = []
    for _ in range(calls):
        a.train()
        after.append(_timed(b.train))
    out["interference"] = {"torch_alone_ms": alone, "torch_after_numpy_ms": after}
    return out


def _ops_check(host: _Host, cases: list[int], sides) -> dict:
    """{case: max rel error} of the first side's forward output against the second's."""
    ours, ref = sides
    return {str(i): error_stats(host.op_runner(ours, i)[2](), host.op_runner(ref, i)[2]())[1] for i in cases}


def _hvp_check(host: _Host, spec: dict) -> dict:
    """Both sides' H v (double-backward form) in this one process: max rel error over all parameters, float32.

    As in the parity report (parity/hooks.py, ReluBranchAligner), a ReLU input within round-off of 0 whose sign
    differs between the two sides takes transformer_np's side on the torch side: otherwise one such entry (measured:
    docs/decisions/006-hvp-cost.md) makes a whole row of H v differ, although both sides are right to
    float32 precision. How many were aligned is returned with the error."""
    # torch only (a 'both' worker): the numpy worker never loads torch, which parity.hooks imports
    from parity.hooks import ReluBranchAligner

    sides = host.load(spec, fresh=True)  # equal weights again (the interference check trained both)
    relu = host.cfg.model.activation == "relu"
    aligner = ReluBranchAligner(sides["numpy"].model, sides["torch"].model, "float32") if relu else None
    try:  # one forward per side, numpy first: the aligner replays what it recorded
        ours = np.concatenate([h.detach().numpy().ravel() for h in sides["numpy"].hvp()])
        ref = np.concatenate([h.detach().cpu().numpy().ravel() for h in sides["torch"].hvp()])
    finally:
        if aligner is not None:
            aligner.remove()
    _, max_rel = error_stats(ours, ref, scale_free=True)
    aligned = None if aligner is None else {"aligned": aligner.aligned, "seen": aligner.seen}
    return {"max_rel": max_rel, "ok": bool(max_rel <= PARITY_RTOL["float32"]), "relu_branches": aligned}


def handle(host: _Host, req: dict) -> dict:
    op = req["op"]
    if op == "facts":
        return machine_facts(host.threads)
    if op == "gemm":
        return {"samples_ms": _gemm(req["shape"], req["calls"], req["side"])}
    if op == "products":
        return {"samples_ms": _products(req["config"], req["calls"], req["side"])}
    if op == "ops":
        return _ops(host, req["side"], req["cases"], req["target_ms"])
    if op == "ops_check":
        return _ops_check(host, req["cases"], req.get("sides", ("numpy", "torch")))
    if op == "check":
        return _check(host, req["config"], req["calls"])
    if op == "hvp_check":
        return _hvp_check(host, req["config"])
    side = host.load(req["config"])[req["side"]]
    if op == "time":
        fn = W.workload_of(side, req["workload"])
        if fn is None:
            return {"error": f"{req['workload']}: side {req['side']} has no such workload"}
        return {"samples_ms": _samples(fn, req["calls"], req.get("warmup", 0), side.sync)}
    if op == "phases":
        side.model.train()
        rows = [side.train_phases() for _ in range(req["rounds"])]
        return {ph: statistics.median(r[ph] for r in rows) for ph in rows[0]}
    if op == "profile":
        prof = profiling.profile_numpy if req["side"] == "numpy" else profiling.profile_torch
        return prof(side.train, steps=req["steps"])
    return {"error": f"unknown request {op!r}"}


def serve(side: str, threads: int) -> None:
    """Answer requests until stdin closes; replies go to the real stdout, everything else to stderr."""
    reply = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    sys.stdout = sys.stderr
    host = _Host(side, threads)
    for line in sys.stdin:
        req = json.loads(line)
        try:
            out = handle(host, req)
        except Exception as exc:  # sent back whole: the parent stops the run with this message
            import traceback

            traceback.print_exc()
            out = {"error": f"{type(exc).__name__}: {exc}"}
        if host.hosted == ["numpy"] and "torch" in sys.modules:
            # A NumPy-side figure taken with torch's thread pool in the process is not a NumPy-alone figure.
            out = {
                "error": f"the numpy worker imported torch while serving {req['op']}: its timings would not "
                "be NumPy's alone"
            }
        reply.write(json.dumps(out, default=float) + "\n")
        reply.flush()


def build_parser() -> argparse.ArgumentParser:
    ap = OneLineParser(
        prog="python -m benchmarks.worker", description="a benchmark worker (started by `python -m benchmarks run`)"
    )
    ap.add_argument("--side", required=True, choices=SIDES, help="which framework(s) this process hosts")
    ap.add_argument(
        "--threads", type=integer(1, THREADS_MAX), default=2, help="threads for BLAS/OpenMP/torch (default: 2)"
    )
    ap.add_argument(
        "--wait-policy",
        default="default",
        choices=sorted(WAIT_POLICIES),
        help="idle BLAS/OpenMP workers: spin (library default) or sleep (default: default)",
    )
    return ap


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    # Both sides, as transformer_np's training command line does: the memory a step frees is reused by the
    # next (minitensor/allocator.py); the torch side gets the same malloc, so the two are timed alike.
    reuse_freed_memory()
    serve(args.side, args.threads)


# --------------------------------------------------------------------------------- parent side
class WorkerError(RuntimeError):
    pass


class Worker:
    """The parent's handle on one worker process: `request(dict) -> dict`, `close()`."""

    def __init__(self, side: str, threads: int, wait_policy: str = "default"):
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ, **thread_env(threads, wait_policy))
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.side = side
        self.log = tempfile.TemporaryFile(mode="w+")
        cmd = [
            sys.executable,
            "-m",
            "benchmarks.worker",
            "--side",
            side,
            "--threads",
            str(threads),
            "--wait-policy",
            wait_policy,
        ]
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True, cwd=root, env=env
        )

    def request(self, req: dict) -> dict:
        try:
            self.proc.stdin.write(json.dumps(req) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except BrokenPipeError:
            line = ""
        if not line:
            self.log.seek(0)
            tail = self.log.read().strip().splitlines()[-5:]
            raise WorkerError(f"benchmark worker '{self.side}' died during {req['op']}: " + " | ".join(tail))
        out = json.loads(line)
        if isinstance(out, dict) and "error" in out:
            raise WorkerError(f"benchmark worker '{self.side}', {req['op']} {req.get('workload', '')}: {out['error']}")
        return out

    def close(self, kill: bool = False) -> None:
        """End the worker: close its stdin and wait for it, or with `kill` (Ctrl-C, a failure) stop it at once."""
        if kill and self.proc.poll() is None:
            self.proc.kill()
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


if __name__ == "__main__":
    main()
