"""Data-parallel training in transformer_np: which rows of a global batch a rank takes, its loss, its dropout stream.

The rule (docs/distributed.md): the global batch of B rows is drawn from the one seeded stream, the same whatever
the number of ranks N; rank r takes rows [r * B/N, (r + 1) * B/N). Its loss is `shard_loss` (loss.py): the sum over
its non-PAD target tokens times N / n_global, where n_global counts the whole global batch's non-PAD targets
(one all-reduce of an integer, or computed from the global batch that every rank holds). DistributedDataParallel
then averages the gradients, and the mean of the N shard gradients is the full-batch mean's gradient.

Dropout streams: rank r draws its dropout masks from the generator state the one-process run would use, advanced
by r jumps of PCG64 (`np.random.PCG64.jumped(r)`, 2^127 draws each: streams that never overlap); rank 0's stream is
the one-process stream itself. `DataParallel(world_size=N)` without a communicator computes the N shards one after
the other in one process, each with its rank's stream: it reproduces the N ranks' masks and their step (up to the
all-reduce's summation order), which is how the tests show one process equal to `mpiexec -n N`.

Resume: a checkpoint holds every rank's stream (`rank_rngs`) and the world size. Resumed with the same N, rank r
takes its own stream back (exact resume). With another N, the streams restart by the rule above from the saved
rank 0 stream: rank r's is rank 0's saved state advanced by r jumps.
"""

from __future__ import annotations

import contextlib
import os

import numpy as np

import minitensor as mt
from minitensor.nn.parallel import OtherRankFailed, failure_channel, require_mpi
from minitensor.random import get_rng_state, set_rng_state

from .data import PAD_ID, shift_targets
from .loss import shard_loss
from .masks import padding_mask, target_mask

__all__ = [
    "DataParallel",
    "OtherRankFailed",
    "compute_shard_loss",
    "count_targets",
    "jumped_state",
    "launched_world_size",
    "shard_rows",
    "split_rows",
]


def shard_rows(global_batch: int, world_size: int, rank: int) -> slice:
    """The rows of a global batch that `rank` of `world_size` ranks takes; a batch N does not divide is refused."""
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"shard_rows: expected 0 <= rank < world_size, got rank={rank}, world_size={world_size}")
    if global_batch < world_size:
        raise ValueError(
            f"data parallelism: the global batch has {global_batch} rows, fewer than the {world_size} ranks: "
            f"every rank needs at least one row (use at most {global_batch} ranks or a larger --batch-size)"
        )
    if global_batch % world_size:
        raise ValueError(
            f"data parallelism: the global batch of {global_batch} rows does not divide into {world_size} equal "
            f"shards: use a batch size that is a multiple of {world_size}"
        )
    per = global_batch // world_size
    return slice(rank * per, (rank + 1) * per)


def count_targets(tgt) -> int:
    """The number of non-PAD labels of a (B, T) target batch (the teacher-forced labels tgt[:, 1:])."""
    return int(np.count_nonzero(shift_targets(tgt)[1] != PAD_ID))


def compute_shard_loss(model, src, tgt, n_global: int, world_size: int, label_smoothing: float = 0.0):
    """Teacher-forced forward of one rank's shard and its `shard_loss`; returns (loss, logits, labels)."""
    tgt_in, labels = shift_targets(tgt)  # (b, T-1) each
    src_t, tgt_t = mt.tensor(src), mt.tensor(tgt_in)
    logits = model(src_t, tgt_t, padding_mask(src_t, PAD_ID), target_mask(tgt_t, PAD_ID))  # (b, T-1, V)
    return shard_loss(logits, labels, n_global, world_size, label_smoothing), logits, labels


def split_rows(rows: int, world_size: int) -> list[slice]:
    """Each rank's rows of a batch of `rows`: equal shards when N divides it (the global batches always: their size
    is checked up front), else the first rows%N ranks one row more (an epoch's last, shorter batch)."""
    bounds = np.cumsum([0] + [rows // world_size + (r < rows % world_size) for r in range(world_size)])
    return [slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]


def jumped_state(state: dict, jumps: int) -> dict:
    """A PCG64 generator state advanced by `jumps` jumps of 2^127 draws (rank r's stream from rank 0's)."""
    bit_generator = np.random.PCG64()
    bit_generator.state = state
    return bit_generator.jumped(jumps).state if jumps else bit_generator.state


def launched_world_size() -> int:
    """How many ranks the launcher started, from its environment (MPICH/hydra's PMI_SIZE, Open MPI's
    OMPI_COMM_WORLD_SIZE), read without importing mpi4py: 1 for a plain `python`."""
    for name in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE"):
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return 1


class DataParallel:
    """This process's share of data-parallel training over `world_size` ranks.

    With `comm` (an mpi4py communicator, under mpiexec) this process is rank comm.rank: it computes its shard and
    DistributedDataParallel averages the gradients. Without it, this one process computes all N shards in turn,
    each with its rank's dropout stream, and accumulates their gradients (shard losses weighted 1/n_global each,
    so the sum is the global mean): the same step, the N ranks emulated."""

    def __init__(self, world_size: int | None = None, comm=None):
        self.comm = comm
        self.world_size = world_size if comm is None else comm.Get_size()
        self.rank = 0 if comm is None else comm.Get_rank()
        self.local_ranks = list(range(self.world_size)) if comm is None else [self.rank]
        self.streams = {}  # local rank -> its dropout generator's state between steps
        # where a rank that fails alone tells the others (every wait of a step watches it): made here, on every rank
        self.channel = None if comm is None else failure_channel(comm)

    @property
    def failed(self) -> bool:
        """A failure was announced or heard: the collectives in flight are abandoned (end the process)."""
        return self.channel is not None and self.channel.failed

    def announce(self, error: BaseException, where: str) -> None:
        """This rank failed alone (`where`: " in step 3"): tell every other rank, so that none waits for it in a
        collective (they raise OtherRankFailed with this error)."""
        if self.channel is not None:
            self.channel.announce(f"{type(error).__name__}: {error}", where)

    def finish(self) -> None:
        """After a failure, once this rank's report is out: wait (seconds at most) until every rank's is, so that
        no rank's exit lets mpiexec kill rank 0 before it printed the failing rank's error."""
        if self.channel is not None:
            self.channel.finish()

    def _allreduce(self, array: np.ndarray) -> np.ndarray:
        """Sum over the ranks, waiting while watching for another rank's failure."""
        self.channel.wait([self.comm.Iallreduce(self.MPI.IN_PLACE, array, op=self.MPI.SUM)])
        return array

    @property
    def MPI(self):
        return require_mpi()  # mpi4py's MPI, imported when first needed (under mpiexec only)

    @property
    def writes(self) -> bool:
        """Rank 0 alone writes files and prints."""
        return self.rank == 0

    # ---- agreement between ranks ------------------------------------------------------------
    def check_same_everywhere(self, what: str, mine: dict) -> None:
        """Refuse a rank started differently from rank 0 (every rank raises the same error)."""
        if self.comm is None:
            return
        everyone = self.comm.allgather(mine)
        for r, theirs in enumerate(everyone):
            diffs = [f"{k}: rank 0 {everyone[0].get(k)!r} vs rank {r} {theirs.get(k)!r}" for k in sorted(
                set(theirs) | set(everyone[0])) if theirs.get(k) != everyone[0].get(k)]  # fmt: skip
            if diffs:
                raise ValueError(f"data parallelism: rank {r} was started with another {what}: " + "; ".join(diffs))

    def all_succeed(self, fn):
        """fn() on every rank; if it raises ValueError/TypeError/OSError on any rank, every rank raises ValueError
        with the first failing rank's message (no rank is left waiting in a collective)."""
        error, result = None, None
        try:
            result = fn()
        except (ValueError, TypeError, OSError) as e:
            error = e
        if self.comm is None:
            if error is not None:
                raise error
            return result
        messages = self.comm.allgather(None if error is None else str(error))
        failed = next((m for m in messages if m is not None), None)
        if failed is not None:
            raise (error if error is not None else ValueError(failed))
        return result

    def stop_together(self, pending: bool, failure: Exception | None, step: int) -> bool:
        """The agreement at each step's end: True on every rank if `pending` (a Ctrl-C seen) is on one, so that all
        stop after this same step. If one rank failed on its own (`failure`: its checkpoint write, its callback),
        every rank raises: that rank its error, the others OtherRankFailed naming it. Without this a rank that
        raised alone left the others waiting in the next step's all-reduce for ever."""
        if self.comm is None:
            if failure is not None:
                raise failure
            return bool(pending)
        if failure is not None:  # told on the failure channel: the others, waiting below, raise OtherRankFailed
            self.announce(failure, f" after step {step}")
            raise failure
        return bool(self._allreduce(np.array([int(bool(pending))], dtype=np.int64))[0])

    def bcast(self, obj):
        return obj if self.comm is None else self.comm.bcast(obj, root=0)

    # ---- dropout streams ----------------------------------------------------------------------
    def start_streams(self, base: dict, saved: list | None = None) -> bool:
        """Each local rank's stream: its own from `saved` (a checkpoint's rank_rngs) when that has one per rank,
        else rank 0's `base` state advanced r jumps. Returns whether the saved streams were taken."""
        same = saved is not None and len(saved) == self.world_size
        for r in self.local_ranks:
            self.streams[r] = dict(saved[r]) if same else jumped_state(base, r)
        set_rng_state(self.streams[self.local_ranks[0]])
        return same

    @contextlib.contextmanager
    def stream(self, rank: int):
        """Dropout inside draws from `rank`'s stream."""
        set_rng_state(self.streams[rank])
        try:
            yield
        finally:
            self.streams[rank] = get_rng_state()

    def all_streams(self) -> list | None:
        """Every rank's stream, in rank order, on rank 0 (None on the others)."""
        if self.comm is None:
            return [self.streams[r] for r in range(self.world_size)]
        return self.comm.gather(self.streams[self.rank], root=0)

    # ---- one step's gradient ------------------------------------------------------------------
    def backward(self, model, src, tgt, label_smoothing: float) -> tuple[float, np.ndarray]:
        """Forward and backward of this process's shards of the global batch (src, tgt); .grad then holds the
        global batch's mean-loss gradient on every rank. Returns (the global mean loss, the global labels)."""
        n_global = count_targets(tgt)
        # emulated ranks accumulate: each shard's loss carries 1/n_global, not N/n_global (no 1/N to undo)
        factor = self.world_size if self.comm is not None else 1
        value = 0.0
        for r, rows in enumerate(split_rows(len(src), self.world_size)):
            if r not in self.local_ranks:
                continue
            s, t = (src[rows], tgt[rows]) if rows.stop > rows.start else _pad_only_shard(src, tgt)
            with self.stream(r):
                loss = compute_shard_loss(model, s, t, n_global, factor, label_smoothing)[0]
                loss.backward()
            value += loss.item() / factor
        if self.comm is not None:
            if getattr(model, "expect_hooks", False):  # DistributedDataParallel: a bucket never started here
                raise RuntimeError(
                    f"data parallelism: on rank {self.rank} {model.missing_gradients()} got no gradient in this "
                    "step's backward (a parameter the forward did not use); every parameter must take part"
                )
            value = float(self._allreduce(np.array([value], dtype=np.float64))[0])
        return value, shift_targets(tgt)[1]


def _pad_only_shard(src, tgt) -> tuple[np.ndarray, np.ndarray]:
    """A one-row shard whose labels are all PAD, for a rank that an epoch's short last batch leaves without a row:
    it runs the same forward and backward as the others (the collectives stay in step) and contributes zero."""
    t = np.array(tgt[:1])
    t[:, 1:] = PAD_ID
    return src[:1], t
