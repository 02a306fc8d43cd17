"""Tokenizers for the GPT models: characters, and GPT-2's byte-level byte-pair encoding (BPE), written out to read.

CharTokenizer   one id per distinct character of a corpus (nanoGPT's shakespeare_char), sorted
BPETokenizer    byte-level BPE (Sennrich et al., 2016; GPT-2, 2019):
    1. pre-tokenize: GPT-2's pattern cuts the text into words, numbers, punctuation runs and spaces (a space
       stays in front of the word after it, and there is no prefix space), so no merge crosses such a cut;
    2. every chunk becomes its UTF-8 bytes, ids 0..255: any text encodes, nothing is unknown;
    3. training: count adjacent pairs over the corpus's chunks (weighted by how often each chunk occurs), make the
       most frequent pair a new token, replace it everywhere, and repeat until the vocabulary has its size;
    4. encoding: in each chunk, merge the pair that was learnt first (the lowest rank), again and again;
    5. decoding: the ids' bytes, joined, read as UTF-8 (a cut inside a character shows as U+FFFD).
    save/load write GPT-2's files, vocab.json and merges.txt, in its byte-to-character alphabet
    (bytes_to_unicode), so Hugging Face's `tokenizers` reads them and encodes the same ids
    (tests/transformer_np/test_gpt_tokenizer.py).

GPT-2's pattern uses \\p{L} (letters) and \\p{N} (numbers), which Python's `re` lacks; `unicode_classes` builds them
from the standard library's Unicode tables, so the pattern is GPT-2's own and no third-party regex engine is needed.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
import unicodedata
from collections import Counter


class TokenizerError(ValueError):
    """Text or ids a tokenizer cannot take, or files it cannot read; the message says which and where."""


# ----------------------------------------------------------------------------------------------
# Characters
# ----------------------------------------------------------------------------------------------
class CharTokenizer:
    """id = the character's rank among the corpus's distinct characters (sorted by code point)."""

    def __init__(self, chars):
        self.chars = sorted(set(chars))
        if not self.chars:
            raise TokenizerError("CharTokenizer: the corpus has no characters")
        self.stoi = {c: i for i, c in enumerate(self.chars)}

    @classmethod
    def from_text(cls, text: str) -> CharTokenizer:
        return cls(text)

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> list[int]:
        unknown = [(i, c) for i, c in enumerate(text) if c not in self.stoi]
        if unknown:
            i, c = unknown[0]
            raise TokenizerError(
                f"CharTokenizer: character {c!r} (U+{ord(c):04X}) at position {i} is not in the vocabulary of "
                f"{self.vocab_size} characters"
            )
        return [self.stoi[c] for c in text]

    def decode(self, ids) -> str:
        ids = [int(i) for i in ids]
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise TokenizerError(f"CharTokenizer: id {bad[0]} is outside the vocabulary (0 .. {self.vocab_size - 1})")
        return "".join(self.chars[i] for i in ids)

    def state(self) -> dict:
        return {"kind": "char", "chars": "".join(self.chars)}


# ----------------------------------------------------------------------------------------------
# Bytes as characters, and GPT-2's pre-tokenizing pattern
# ----------------------------------------------------------------------------------------------
@functools.cache
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's map from the 256 byte values to printable characters: the printable Latin-1 bytes stand for
    themselves, the others (controls, space) are moved to 256 + n, so that every token is a visible string."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
    chars, n = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + n)
            n += 1
    return chars


def _ranges(code_points: list[int]) -> str:
    """A regex character class body for sorted code points, as ranges."""
    out, start = [], None
    for i, cp in enumerate(code_points):
        if start is None:
            start = cp
        if i + 1 == len(code_points) or code_points[i + 1] != cp + 1:
            out.append(re.escape(chr(start)) + ("" if cp == start else "-" + re.escape(chr(cp))))
            start = None
    return "".join(out)


@functools.cache
def unicode_classes() -> tuple[str, str]:
    """(L, N): regex classes for \\p{L} (Unicode letters) and \\p{N} (numbers: Nd, Nl, No), from unicodedata."""
    letters, numbers = [], []
    for cp in range(sys.maxunicode + 1):
        cat = unicodedata.category(chr(cp))
        if cat[0] == "L":
            letters.append(cp)
        elif cat[0] == "N":
            numbers.append(cp)
    return f"[{_ranges(letters)}]", f"[{_ranges(numbers)}]"


@functools.cache
def gpt2_pattern() -> re.Pattern:
    """GPT-2's pre-tokenizer: 's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"""
    L, N = unicode_classes()
    other = f"[^\\s{L[1:-1]}{N[1:-1]}]"
    return re.compile(rf"""'s|'t|'re|'ve|'m|'ll|'d| ?{L}+| ?{N}+| ?{other}+|\s+(?!\S)|\s+""")


def pre_tokenize(text: str) -> list[str]:
    """The chunks GPT-2's pattern cuts `text` into (their concatenation is the text)."""
    return gpt2_pattern().findall(text)


# ----------------------------------------------------------------------------------------------
# Byte-level BPE
# ----------------------------------------------------------------------------------------------
def _merge(word: tuple, pair: tuple, new: int) -> tuple:
    """word with every non-overlapping occurrence of `pair`, left to right, replaced by the id `new`."""
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and word[i] == pair[0] and word[i + 1] == pair[1]:
            out.append(new)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


class BPETokenizer:
    """Byte-level BPE. Trained here, ids 0..255 are the bytes and id 256 + r is the r-th merge; loaded from GPT-2's
    files, the ids are the file's (GPT-2's own vocabulary numbers its bytes in bytes_to_unicode's order, and holds
    <|endoftext|>, which is decoded but never produced from text: special tokens are not matched in the text).

    token_bytes[i]   the bytes token i stands for
    byte_ids[b]      the id of the one-byte token b
    merges           [(left id, right id)] in rank order; merged[(left, right)] = (rank, id of the joined token)"""

    def __init__(self, merges: list[tuple[int, int]] | None = None):
        """The tokenizer whose ids 0..255 are the bytes and 256 + r the r-th of `merges` (as train makes it)."""
        merges = [tuple(int(i) for i in m) for m in (merges or [])]
        token_bytes = [bytes([b]) for b in range(256)]
        for r, (a, b) in enumerate(merges):
            if not (0 <= a < 256 + r and 0 <= b < 256 + r):
                raise TokenizerError(f"BPETokenizer: merge {r} joins ids {a} and {b}, not both defined before it")
            token_bytes.append(token_bytes[a] + token_bytes[b])
        self._build(token_bytes, list(range(256)), [(a, b, 256 + r) for r, (a, b) in enumerate(merges)])

    def _build(self, token_bytes: list, byte_ids: list, merges: list) -> None:
        """token_bytes by id, the one-byte tokens' ids, and the merges as (left, right, joined) ids in rank order."""
        self.token_bytes, self.byte_ids = token_bytes, byte_ids
        self.merges = [(a, b) for a, b, _ in merges]
        self.merged = {(a, b): (r, new) for r, (a, b, new) in enumerate(merges)}
        self._cache: dict[str, list[int]] = {}

    @classmethod
    def from_vocab(cls, vocab: dict[str, int], merges: list[tuple[str, str]], where: str = "vocab") -> BPETokenizer:
        """GPT-2's vocabulary ({token string in bytes_to_unicode's alphabet: id}) and merges (pairs of such strings,
        in rank order): every byte must have its one-character token, and each merge's two tokens and their join
        must be in the vocabulary."""
        table = bytes_to_unicode()
        decode = {c: b for b, c in table.items()}
        size = max(vocab.values(), default=-1) + 1
        if sorted(vocab.values()) != list(range(size)):
            raise TokenizerError(f"{where}: the ids are not 0 .. {size - 1}, each once")
        token_bytes = [b""] * size
        for token, i in vocab.items():
            # a token outside the byte alphabet (<|endoftext|>) is special: decoded as its own text
            token_bytes[i] = bytes(decode[c] for c in token) if all(c in decode for c in token) else token.encode()
        missing = [b for b in range(256) if table[b] not in vocab]
        if missing:
            raise TokenizerError(f"{where}: no token for byte {missing[0]} ({table[missing[0]]!r})")
        triples = []
        for n, (a, b) in enumerate(merges):
            if a not in vocab or b not in vocab or a + b not in vocab:
                raise TokenizerError(f"{where}: merge {n} ({a!r} {b!r}) names a token that is not in the vocabulary")
            triples.append((vocab[a], vocab[b], vocab[a + b]))
        tok = cls.__new__(cls)
        tok._build(token_bytes, [vocab[table[b]] for b in range(256)], triples)
        return tok

    @property
    def vocab_size(self) -> int:
        return len(self.token_bytes)

    @classmethod
    def train(cls, text: str, vocab_size: int) -> BPETokenizer:
        """Learn vocab_size - 256 merges on `text`: the most frequent adjacent pair each time (ties: the pair first
        met in the corpus). Stops early when no pair is left."""
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 256:
            raise TokenizerError(
                f"BPETokenizer.train: vocab_size must be an int >= 256 (the bytes), got {vocab_size!r}"
            )
        words = Counter(tuple(chunk.encode("utf-8")) for chunk in pre_tokenize(text))  # chunk -> how often
        merges = []
        while 256 + len(merges) < vocab_size:
            pairs = Counter()
            for word, n in words.items():
                for pair in zip(word, word[1:]):
                    pairs[pair] += n
            if not pairs:
                break
            best = max(pairs, key=pairs.__getitem__)  # max keeps the first of equal counts: insertion order
            new = 256 + len(merges)
            merges.append(best)
            words = Counter({_merge(w, best, new): n for w, n in words.items()})
        return cls(merges)

    def _encode_chunk(self, chunk: str) -> list[int]:
        if chunk in self._cache:
            return self._cache[chunk]
        word = tuple(self.byte_ids[b] for b in chunk.encode("utf-8"))
        never = (float("inf"), None)
        while len(word) > 1:
            rank, new = min((self.merged.get(pair, never) for pair in zip(word, word[1:])), key=lambda m: m[0])
            if new is None:
                break
            word = _merge(word, self.merges[rank], new)
        self._cache[chunk] = list(word)
        return list(word)

    def encode(self, text: str) -> list[int]:
        if not isinstance(text, str):
            raise TokenizerError(f"BPETokenizer.encode: expected a str, got {type(text).__name__}")
        return [i for chunk in pre_tokenize(text) for i in self._encode_chunk(chunk)]

    def decode(self, ids) -> str:
        ids = [int(i) for i in ids]
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise TokenizerError(f"BPETokenizer: id {bad[0]} is outside the vocabulary (0 .. {self.vocab_size - 1})")
        return b"".join(self.token_bytes[i] for i in ids).decode("utf-8", errors="replace")

    # -- GPT-2's files -------------------------------------------------------------------------
    def token_string(self, i: int) -> str:
        """Token i in GPT-2's alphabet (each byte as bytes_to_unicode's character)."""
        table = bytes_to_unicode()
        return "".join(table[b] for b in self.token_bytes[i])

    def save(self, folder: str) -> None:
        """vocab.json ({token string: id}) and merges.txt (one "left right" per line, in rank order)."""
        os.makedirs(folder, exist_ok=True)
        vocab = {self.token_string(i): i for i in range(self.vocab_size)}
        with open(os.path.join(folder, "vocab.json"), "w", encoding="utf-8") as f:
            json.dump(vocab, f, ensure_ascii=False)
        with open(os.path.join(folder, "merges.txt"), "w", encoding="utf-8") as f:
            f.write("#version: 0.2\n")
            for a, b in self.merges:
                f.write(f"{self.token_string(a)} {self.token_string(b)}\n")

    @classmethod
    def load(cls, folder: str) -> BPETokenizer:
        """Read GPT-2's vocab.json and merges.txt (written by save, or GPT-2's own)."""
        try:
            with open(os.path.join(folder, "vocab.json"), encoding="utf-8") as f:
                vocab = json.load(f)
            with open(os.path.join(folder, "merges.txt"), encoding="utf-8") as f:
                lines = [line.rstrip("\n") for line in f if line.strip() and not line.startswith("#version")]
        except (OSError, json.JSONDecodeError) as e:
            raise TokenizerError(f"BPETokenizer.load: cannot read vocab.json and merges.txt in {folder}: {e}") from None
        merges = []
        for n, line in enumerate(lines):
            parts = line.split(" ")
            if len(parts) != 2:
                raise TokenizerError(f"BPETokenizer.load: merges.txt line {n + 2} is not two tokens: {line!r}")
            merges.append((parts[0], parts[1]))
        return cls.from_vocab(vocab, merges, where=folder)

    def state(self) -> dict:
        return {
            "kind": "bpe",
            "vocab": {self.token_string(i): i for i in range(self.vocab_size)},
            "merges": [[self.token_string(a), self.token_string(b)] for a, b in self.merges],
        }


def tokenizer_from_state(state: dict):
    """The tokenizer a checkpoint saved with .state()."""
    if state.get("kind") == "char":
        return CharTokenizer(state["chars"])
    if state.get("kind") == "bpe":
        return BPETokenizer.from_vocab(state["vocab"], [tuple(m) for m in state["merges"]], where="checkpoint")
    raise TokenizerError(f"unknown tokenizer kind {state.get('kind')!r}: expected 'char' or 'bpe'")
