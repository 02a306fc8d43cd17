"""Vocabularies, the toy tasks, and padded batches for teacher forcing.

What this file owns:
- `Vocab`: token <-> id with the four specials every part of the project agrees on
  (PAD=0, BOS=1, EOS=2, UNK=3); ordinary tokens start at id 4.
- `TASKS`: a registry of sequence-to-sequence tasks. Each builds deterministic
  (src_ids, tgt_ids) pairs from a seed, and train / held-out splits that are disjoint
  wherever the space of examples allows it.
- `make_batches`: right-padded int64 batches (B, S), (B, T); `shift_targets` splits a
  target batch into decoder input tgt[:, :-1] and labels tgt[:, 1:] (teacher forcing).

Id mapping of the numeric tasks: symbol k (written "k" in text) has id k + 4, so no symbol
ever collides with a special. Vocabulary sizes, specials included: copy 100 (symbols 0..95),
copy-reverse, reverse and sort 20 (symbols 0..15). Id 3 is <unk>, never an ordinary token, so
each symbol alphabet is one smaller than a vocabulary without <unk> of the same size.

Sequence conventions: a target is always <bos> ... <eos>. The copy source is the bare
sequence; every other source is wrapped in <bos> ... <eos>.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from minitensor.serialization import atomic_write

PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>")

CORPUS_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "toy_translation.tsv")


# ----------------------------------------------------------------------------------------------
# Vocabulary
# ----------------------------------------------------------------------------------------------
class Vocab:
    """Token <-> id map. Specials first (ids 0..3), then `tokens` in the order given, duplicates dropped."""

    def __init__(self, tokens: Iterable[str], specials: Sequence[str] = SPECIALS):
        specials = tuple(specials)
        if len(specials) != 4:
            raise ValueError(f"Vocab: expected 4 specials (pad, bos, eos, unk), got {len(specials)}: {specials!r}")
        self.specials = specials
        self.itos: list[str] = list(specials)
        self.stoi: dict[str, int] = {t: i for i, t in enumerate(specials)}
        for tok in tokens:
            if not isinstance(tok, str):
                raise TypeError(f"Vocab: tokens must be str, got {type(tok).__name__} ({tok!r})")
            if tok not in self.stoi:
                self.stoi[tok] = len(self.itos)
                self.itos.append(tok)
        self.pad_id, self.bos_id, self.eos_id, self.unk_id = PAD_ID, BOS_ID, EOS_ID, UNK_ID

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: str) -> bool:
        return token in self.stoi

    def __eq__(self, other) -> bool:
        return isinstance(other, Vocab) and self.itos == other.itos

    def __repr__(self) -> str:
        return f"Vocab(size={len(self)}, first={self.itos[4:9]!r})"

    def encode(self, text, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        """Whitespace-split `text` (or take a list of tokens) to ids; unknown tokens become <unk> (3)."""
        if isinstance(text, str):
            tokens = text.split()
        elif isinstance(text, (list, tuple)):
            tokens = list(text)
        else:
            raise TypeError(f"Vocab.encode: expected a str or a list of str, got {type(text).__name__}")
        ids = [self.stoi.get(t, UNK_ID) for t in tokens]
        if add_bos:
            ids.insert(0, BOS_ID)
        if add_eos:
            ids.append(EOS_ID)
        return ids

    def decode(self, ids, strip_special: bool = True) -> str:
        """Ids to a space-joined string. With strip_special, stop at the first <eos> and drop <pad>/<bos>."""
        out = []
        for i in np.asarray(ids).reshape(-1).tolist():
            i = int(i)
            if not 0 <= i < len(self.itos):
                raise IndexError(f"Vocab.decode: id {i} out of range for a vocabulary of size {len(self)}")
            if strip_special:
                if i == EOS_ID:
                    break
                if i in (PAD_ID, BOS_ID):
                    continue
            out.append(self.itos[i])
        return " ".join(out)

    def to_dict(self) -> dict:
        return {"specials": list(self.specials), "tokens": self.itos[4:]}

    @classmethod
    def from_dict(cls, d: dict) -> Vocab:
        return cls(d["tokens"], specials=tuple(d["specials"]))

    def save(self, path: str) -> None:
        with atomic_write(path, encoding="utf-8") as f:
            json.dump(self.to_dict(), f, ensure_ascii=False, indent=1)

    @classmethod
    def load(cls, path: str) -> Vocab:
        with open(path, encoding="utf-8") as f:
            return cls.from_dict(json.load(f))


def symbol_vocab(num_symbols: int) -> Vocab:
    """The numeric tasks' vocabulary: symbol k is the token str(k), id k + 4."""
    return Vocab([str(k) for k in range(num_symbols)])


# ----------------------------------------------------------------------------------------------
# Tasks
# ----------------------------------------------------------------------------------------------
Pair = tuple  # (src_ids: list[int], tgt_ids: list[int])


@dataclass
class Task:
    """A sequence-to-sequence task: vocabularies, a pair generator, and the text conventions.

    `sample(rng)` draws one (src_ids, tgt_ids) pair; `splits` deduplicates so that no held-out
    source appears in training. `fixed_pairs`, when set, replaces sampling (the toy corpus).
    """

    name: str
    description: str
    src_vocab: Vocab
    tgt_vocab: Vocab
    source_specials: bool  # wrap sources in <bos> ... <eos>
    sample: Callable[[np.random.Generator], Pair] | None = None
    fixed_pairs: list | None = None
    preset: str = "copy-reverse"  # the config preset this task trains with by default
    max_src_len: int = 0  # longest source (specials included)
    max_tgt_len: int = 0  # longest target (specials included)

    def encode_source(self, text) -> list[int]:
        """Text as a user types it (e.g. "3 4 5") to source ids, with this task's specials.

        Refused with a ValueError: an empty input, special tokens typed by hand (<unk>, <bos>, ...)
        and, in the generated tasks, unknown tokens. In the toy corpus an unknown word becomes <unk>,
        as in any translation system.
        """
        tokens = text.split() if isinstance(text, str) else list(text)
        expected = f"expected tokens from {self.src_vocab.itos[4:8]}...{self.src_vocab.itos[-1:]}"
        if not tokens:
            raise ValueError(f"task {self.name!r}: the input is empty; {expected}")
        bad = [t for t in tokens if t in self.src_vocab.specials]
        if bad:
            raise ValueError(f"task {self.name!r}: special tokens {bad} cannot be typed in an input; {expected}")
        bad = [t for t in tokens if t not in self.src_vocab]
        if bad and self.sample is not None:
            raise ValueError(f"task {self.name!r}: unknown source tokens {bad}; {expected}")
        return self.src_vocab.encode(tokens, add_bos=self.source_specials, add_eos=self.source_specials)

    def decode_target(self, ids) -> str:
        return self.tgt_vocab.decode(ids, strip_special=True)

    def splits(self, train_size: int, eval_size: int, seed: int) -> tuple[list, list]:
        """(train, held_out) lists of pairs, deterministic in `seed`.

        Sampled tasks: held-out pairs are drawn first and deduplicated, then training pairs are
        drawn excluding every held-out source, so the splits are disjoint. When the space of
        sources is too small to fill both, we stop after a bounded number of draws and return
        what we have (never an overlap). The fixed corpus is too small to hold sentences out:
        its held-out split is the training set itself (a memorisation check).
        """
        if train_size < 1:
            raise ValueError(f"task {self.name!r}: train_size must be >= 1, got {train_size}")
        if eval_size < 0:
            raise ValueError(f"task {self.name!r}: eval_size must be >= 0, got {eval_size}")
        if self.fixed_pairs is not None:
            pairs = list(self.fixed_pairs)
            return pairs, list(pairs)
        rng = np.random.default_rng(seed)
        held, seen = [], set()
        tries = 0
        while len(held) < eval_size and tries < 20 * (eval_size + 10):
            tries += 1
            src, tgt = self.sample(rng)
            key = tuple(src)
            if key not in seen:
                seen.add(key)
                held.append((src, tgt))
        train, train_seen = [], set()
        tries = 0
        while len(train) < train_size and tries < 20 * (train_size + 10):
            tries += 1
            src, tgt = self.sample(rng)
            key = tuple(src)
            if key in seen:
                continue
            # training may repeat a pair only once the space is nearly exhausted
            if key in train_seen and tries < 4 * (train_size + 10):
                continue
            train_seen.add(key)
            train.append((src, tgt))
        if not train:
            raise ValueError(
                f"task {self.name!r}: could not draw any training pair disjoint from "
                f"{len(held)} held-out pairs; lower eval_size"
            )
        return train, held


def _wrap(ids: list[int], specials: bool) -> list[int]:
    return [BOS_ID] + ids + [EOS_ID] if specials else list(ids)


def _symbols(rng: np.random.Generator, num_symbols: int, min_len: int, max_len: int) -> list[int]:
    n = int(rng.integers(min_len, max_len + 1))
    return (rng.integers(0, num_symbols, size=n) + 4).tolist()


def _copy_task() -> Task:
    # vocabulary 100, sequences of exactly 10 symbols, bare source
    vocab = symbol_vocab(96)

    def sample(rng):
        s = _symbols(rng, 96, 10, 10)
        return s, _wrap(s, True)

    return Task(
        "copy",
        "copy 10 symbols from a vocabulary of 100",
        vocab,
        vocab,
        False,
        sample,
        preset="copy",
        max_src_len=10,
        max_tgt_len=12,
    )


def _seq_task(name: str, description: str, fn: Callable[[list[int]], list[int]], max_out: int) -> Task:
    # the copy-reverse alphabet: vocabulary 20 (16 symbols), lengths 3..10, <bos>/<eos> around the source
    vocab = symbol_vocab(16)

    def sample(rng):
        s = _symbols(rng, 16, 3, 10)
        return _wrap(s, True), _wrap(fn(s), True)

    return Task(
        name, description, vocab, vocab, True, sample, preset="copy-reverse", max_src_len=12, max_tgt_len=max_out + 2
    )


def _addition_task() -> Task:
    # character-level addition: "12+34" -> "46"
    vocab = Vocab([str(d) for d in range(10)] + ["+"])

    def sample(rng):
        a, b = (int(x) for x in rng.integers(0, 1000, size=2))
        src = vocab.encode(list(f"{a}+{b}"), add_bos=True, add_eos=True)
        tgt = vocab.encode(list(str(a + b)), add_bos=True, add_eos=True)
        return src, tgt

    task = Task(
        "addition",
        "add two numbers of 1-3 digits, character level: '12+34' -> '46'",
        vocab,
        vocab,
        True,
        sample,
        preset="copy-reverse",
        max_src_len=9,
        max_tgt_len=6,
    )

    # sources are typed either "12+34" or "1 2 + 3 4": split into characters
    def encode_source(text):
        chars = list(text.replace(" ", "")) if isinstance(text, str) else list(text)
        if not chars:
            raise ValueError("task 'addition': the input is empty; expected digits and '+', e.g. '12+34'")
        bad = [c for c in chars if c not in vocab]
        if bad:
            raise ValueError(f"task 'addition': unknown characters {bad}; expected digits and '+', e.g. '12+34'")
        return vocab.encode(chars, add_bos=True, add_eos=True)

    task.encode_source = encode_source  # type: ignore[method-assign]
    task.decode_target = lambda ids: vocab.decode(ids).replace(" ", "")  # type: ignore[method-assign]
    return task


def read_corpus(path: str = CORPUS_PATH) -> list[tuple[str, str]]:
    """The tab-separated corpus: (source sentence, target sentence) per non-comment line."""
    pairs = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            parts = line.split("\t")
            if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
                raise ValueError(f"{path}:{lineno}: expected 'source<TAB>target', got {line!r}")
            pairs.append((parts[0].strip().lower(), parts[1].strip().lower()))
    if not pairs:
        raise ValueError(f"{path}: the corpus is empty")
    return pairs


def _translation_task() -> Task:
    sentences = read_corpus()
    src_vocab = Vocab(t for s, _ in sentences for t in s.split())
    tgt_vocab = Vocab(t for _, s in sentences for t in s.split())
    pairs = [(src_vocab.encode(s, True, True), tgt_vocab.encode(t, True, True)) for s, t in sentences]
    return Task(
        "toy-translation",
        f"{len(pairs)} short English -> German sentence pairs",
        src_vocab,
        tgt_vocab,
        True,
        None,
        fixed_pairs=pairs,
        preset="toy-translation",
        max_src_len=max(len(s) for s, _ in pairs),
        max_tgt_len=max(len(t) for _, t in pairs),
    )


TASKS: dict[str, Callable[[], Task]] = {
    "copy": _copy_task,
    "copy-reverse": lambda: _seq_task(
        "copy-reverse", "target = input + reversed input, vocabulary 20, lengths 3-10", lambda s: s + s[::-1], 20
    ),
    "reverse": lambda: _seq_task(
        "reverse", "target = reversed input, vocabulary 20, lengths 3-10", lambda s: s[::-1], 10
    ),
    "sort": lambda: _seq_task("sort", "target = input sorted ascending, vocabulary 20, lengths 3-10", sorted, 10),
    "addition": _addition_task,
    "toy-translation": _translation_task,
}


def get_task(name: str) -> Task:
    """Build the task called `name`; an unknown name is a ValueError listing the known ones."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}: expected one of {sorted(TASKS)}")
    return TASKS[name]()


# ----------------------------------------------------------------------------------------------
# Batching
# ----------------------------------------------------------------------------------------------
def pad_batch(seqs: Sequence[Sequence[int]], pad_id: int = PAD_ID) -> np.ndarray:
    """Right-pad lists of ids into one int64 array (B, L), L the longest sequence."""
    if len(seqs) == 0:
        raise ValueError("pad_batch: got an empty batch (0 sequences)")
    lengths = [len(s) for s in seqs]
    if min(lengths) == 0:
        raise ValueError(f"pad_batch: sequence {lengths.index(0)} is empty")
    out = np.full((len(seqs), max(lengths)), pad_id, dtype=np.int64)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = s
    return out


def check_lengths(pairs: Sequence[Pair], max_len: int, what: str = "make_batches") -> None:
    """Raise ValueError when a source or target is longer than the model's positional table covers."""
    for i, (src, tgt) in enumerate(pairs):
        if len(src) > max_len or len(tgt) > max_len:
            raise ValueError(
                f"{what}: pair {i} has source length {len(src)} and target length {len(tgt)}, "
                f"longer than the model's max_len={max_len}"
            )


def batch_order(num_pairs: int, batch_size: int, shuffle: bool, seed: int, epoch: int = 0) -> list[np.ndarray]:
    """Index arrays of each batch of one epoch. The order depends only on (seed, epoch), so a
    resumed run rebuilds it from those two numbers and a batch index."""
    idx = np.arange(num_pairs)
    if shuffle:
        idx = np.random.default_rng([seed, epoch]).permutation(num_pairs)
    return [idx[i : i + batch_size] for i in range(0, num_pairs, batch_size)]


def collate(pairs: Sequence[Pair], indices=None) -> tuple[np.ndarray, np.ndarray]:
    """One padded batch: src (B, S) and tgt (B, T), both int64."""
    chosen = pairs if indices is None else [pairs[i] for i in indices]
    return pad_batch([p[0] for p in chosen]), pad_batch([p[1] for p in chosen])


def make_batches(
    pairs: Sequence[Pair],
    batch_size: int,
    shuffle: bool = False,
    seed: int = 0,
    max_len: int | None = None,
    epoch: int = 0,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """All batches of one epoch: a list of (src (B, S) int64, tgt (B, T) int64), right-padded with PAD=0.

    The last batch may be smaller. With `max_len`, sequences longer than it are an error.
    """
    if len(pairs) == 0:
        raise ValueError("make_batches: the dataset is empty (0 pairs)")
    if not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ValueError(f"make_batches: batch_size must be a positive int, got {batch_size!r}")
    if max_len is not None:
        check_lengths(pairs, max_len)
    return [collate(pairs, b) for b in batch_order(len(pairs), batch_size, shuffle, seed, epoch)]


def shift_targets(tgt) -> tuple[np.ndarray, np.ndarray]:
    """Teacher forcing: decoder input tgt[:, :-1] (starts with <bos>), labels tgt[:, 1:] (ends with <eos>/pad)."""
    tgt = np.asarray(tgt)
    if tgt.ndim != 2 or tgt.shape[1] < 2:
        raise ValueError(f"shift_targets: expected a (B, T) target batch with T >= 2, got shape {tgt.shape}")
    return tgt[:, :-1], tgt[:, 1:]


def iterate_forever(
    pairs: Sequence[Pair], batch_size: int, seed: int, epoch: int = 0, start: int = 0
) -> Iterator[tuple[int, int, tuple[np.ndarray, np.ndarray]]]:
    """Endless shuffled batches as (epoch, index within epoch, batch), starting at (epoch, start)."""
    while True:
        order = batch_order(len(pairs), batch_size, True, seed, epoch)
        for i in range(start, len(order)):
            yield epoch, i, collate(pairs, order[i])
        epoch, start = epoch + 1, 0
