"""The character tokenizer and the byte-level BPE of transformer_np.gpt.tokenizer: round trips, the merges' effect,
GPT-2's pre-tokenizing pattern, bad input refused, and the encoding equal to Hugging Face `tokenizers` given the
same vocab.json and merges.txt (skipped where `tokenizers` is not installed: it comes with the `hf` extra)."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from transformer_np.gpt.tokenizer import (
    BPETokenizer,
    CharTokenizer,
    TokenizerError,
    pre_tokenize,
    tokenizer_from_state,
)

CORPUS = (
    "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n"
    "You are all resolved rather to die than to famish? 1599, 1600 and 42 apples. Café, naïve, Straße; "
    "they're, we've, I'll, it's, he'd, I'm. 日本語のテキスト, Ελληνικά!   \t spaces  end  "
) * 3
TEXTS = [
    "Hello, world! It's 2024... we'll see   them\n\ntomorrow.",
    "naïve café — «quotes» and ½ a ² and Ⅻ, 3.14159 42nd",
    "日本語 mixed with English; emoji 🙂🙂 and tabs\tand\r\nlines",
    "  leading spaces and trailing   ",
    "'s 's 'S 'll've",
]


def test_char_tokenizer_round_trip_and_refusals():
    tok = CharTokenizer.from_text("hello world")
    assert tok.vocab_size == 8 and tok.chars == sorted(set("hello world"))
    assert tok.decode(tok.encode("low hell")) == "low hell"
    with pytest.raises(TokenizerError, match=r"character 'z' \(U\+007A\) at position 2 is not in the vocabulary"):
        tok.encode("hez")
    with pytest.raises(TokenizerError, match="id 8 is outside the vocabulary"):
        tok.decode([0, 8])
    assert tokenizer_from_state(tok.state()).chars == tok.chars


def test_gpt2_pattern_cuts_as_gpt2_does():
    assert pre_tokenize("Hello world's 123 café  x!!") == ["Hello", " world", "'s", " 123", " café", " ", " x", "!!"]
    for text in TEXTS:
        assert "".join(pre_tokenize(text)) == text


def test_bpe_training_learns_the_frequent_pairs_and_round_trips():
    tok = BPETokenizer.train(CORPUS, 300)
    assert tok.vocab_size == 300
    counts = Counter(pair for chunk in pre_tokenize(CORPUS) for pair in zip(chunk.encode(), chunk.encode()[1:]))
    assert counts[tok.merges[0]] == max(counts.values())  # the first merge is a most frequent pair
    for text in TEXTS + [CORPUS]:
        ids = tok.encode(text)
        assert tok.decode(ids) == text
    assert len(tok.encode(CORPUS)) < len(CORPUS.encode("utf-8")) * 0.7  # the merges compress the corpus
    assert tokenizer_from_state(tok.state()).encode(TEXTS[0]) == tok.encode(TEXTS[0])


def test_bpe_refusals():
    with pytest.raises(TokenizerError, match="vocab_size must be an int >= 256"):
        BPETokenizer.train("abc", 100)
    tok = BPETokenizer.train("abcabc", 258)
    with pytest.raises(TokenizerError, match="id 258 is outside the vocabulary"):
        tok.decode([258])
    with pytest.raises(TokenizerError, match="merge 0 joins ids 0 and 300"):
        BPETokenizer([(0, 300)])


def test_save_and_load_give_the_same_tokenizer(tmp_path):
    tok = BPETokenizer.train(CORPUS, 320)
    tok.save(tmp_path)
    again = BPETokenizer.load(tmp_path)
    assert again.merges == tok.merges
    with pytest.raises(TokenizerError, match="cannot read vocab.json and merges.txt"):
        BPETokenizer.load(tmp_path / "missing")


def test_encoding_equals_hugging_face_tokenizers(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    tok = BPETokenizer.train(CORPUS, 400)
    tok.save(tmp_path)
    hf = tokenizers.Tokenizer(
        tokenizers.models.BPE.from_file(str(tmp_path / "vocab.json"), str(tmp_path / "merges.txt"))
    )
    hf.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = tokenizers.decoders.ByteLevel()
    for text in TEXTS + [CORPUS]:
        ours = tok.encode(text)
        assert ours == hf.encode(text).ids, text
        assert hf.decode(ours) == tok.decode(ours)


def test_gpt2_files_with_their_own_numbering_load_and_encode_as_hugging_face(tmp_path):
    """GPT-2's own files number the bytes in another order and hold <|endoftext|>: ids are the file's."""
    trained = BPETokenizer.train(CORPUS, 330)
    perm = np.random.default_rng(0).permutation(trained.vocab_size)
    vocab = {trained.token_string(i): int(perm[i]) for i in range(trained.vocab_size)}
    vocab["<|endoftext|>"] = trained.vocab_size
    (tmp_path / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    merges = [f"{trained.token_string(a)} {trained.token_string(b)}" for a, b in trained.merges]
    (tmp_path / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n", encoding="utf-8")
    tok = BPETokenizer.load(tmp_path)
    assert tok.vocab_size == 331 and tok.decode([330]) == "<|endoftext|>"
    for text in TEXTS:
        ids = tok.encode(text)
        assert ids == [int(perm[i]) for i in trained.encode(text)] and tok.decode(ids) == text
    assert tokenizer_from_state(tok.state()).encode(TEXTS[0]) == tok.encode(TEXTS[0])
    tokenizers = pytest.importorskip("tokenizers")
    hf = tokenizers.Tokenizer(
        tokenizers.models.BPE.from_file(str(tmp_path / "vocab.json"), str(tmp_path / "merges.txt"))
    )
    hf.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    for text in TEXTS + [CORPUS]:
        assert tok.encode(text) == hf.encode(text).ids, text


def test_gpt2_files_that_do_not_fit_are_refused(tmp_path):
    trained = BPETokenizer.train(CORPUS, 260)
    trained.save(tmp_path)
    vocab = json.loads((tmp_path / "vocab.json").read_text(encoding="utf-8"))
    del vocab["A"]
    (tmp_path / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    with pytest.raises(TokenizerError, match="the ids are not 0 .. 259, each once"):
        BPETokenizer.load(tmp_path)
    vocab["<|endoftext|>"] = 65  # the ids whole again, byte 65 ('A') without its token
    (tmp_path / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    with pytest.raises(TokenizerError, match=r"no token for byte 65 \('A'\)"):
        BPETokenizer.load(tmp_path)
    vocab["A"] = vocab.pop("<|endoftext|>")
    (tmp_path / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    with open(tmp_path / "merges.txt", "a", encoding="utf-8") as f:
        f.write("q Q\n")
    with pytest.raises(TokenizerError, match="merge 4 \\('q' 'Q'\\) names a token that is not in the vocabulary"):
        BPETokenizer.load(tmp_path)
