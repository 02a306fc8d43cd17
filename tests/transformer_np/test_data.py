"""transformer_np/data.py: vocabulary, tasks, batching (NumPy only, no model needed)."""

import json

import numpy as np
import pytest

from transformer_np.data import (
    BOS_ID,
    EOS_ID,
    TASKS,
    UNK_ID,
    Vocab,
    batch_order,
    get_task,
    iterate_forever,
    make_batches,
    pad_batch,
    read_corpus,
    shift_targets,
)


def test_vocab_specials_round_trip_and_unk(tmp_path):
    v = Vocab(["the", "cat", "sleeps", "cat"])
    assert len(v) == 7 and v.itos[:4] == ["<pad>", "<bos>", "<eos>", "<unk>"]
    assert (v.pad_id, v.bos_id, v.eos_id, v.unk_id) == (0, 1, 2, 3)
    ids = v.encode("the cat sleeps", add_bos=True, add_eos=True)
    assert ids == [BOS_ID, 4, 5, 6, EOS_ID]
    assert v.decode(ids) == "the cat sleeps"
    assert v.decode(ids, strip_special=False) == "<bos> the cat sleeps <eos>"
    assert v.encode("the dog") == [4, UNK_ID]
    assert v.decode([4, 5, EOS_ID, 6]) == "the cat"  # stops at <eos>
    assert v.encode(["cat", "the"]) == [5, 4]
    path = tmp_path / "v.json"
    v.save(str(path))
    json.loads(path.read_text())  # plain JSON
    assert Vocab.load(str(path)) == v


def test_vocab_errors():
    v = Vocab(["a"])
    with pytest.raises(IndexError, match="out of range"):
        v.decode([99])
    with pytest.raises(TypeError, match="str or a list"):
        v.encode(3)
    with pytest.raises(TypeError, match="tokens must be str"):
        Vocab([1, 2])


def test_unknown_task_lists_known_ones():
    with pytest.raises(ValueError, match="copy-reverse"):
        get_task("translate-everything")


@pytest.mark.parametrize("name", sorted(TASKS))
def test_task_deterministic_and_well_formed(name):
    task = get_task(name)
    a_train, a_eval = task.splits(200, 50, seed=3)
    b_train, b_eval = get_task(name).splits(200, 50, seed=3)
    assert a_train == b_train and a_eval == b_eval
    for src, tgt in a_train + a_eval:
        assert tgt[0] == BOS_ID and tgt[-1] == EOS_ID
        assert all(4 <= t < len(task.tgt_vocab) for t in tgt[1:-1])
        body = src[1:-1] if task.source_specials else src
        assert all(4 <= t < len(task.src_vocab) for t in body)
        if task.source_specials:
            assert src[0] == BOS_ID and src[-1] == EOS_ID
        assert len(src) <= task.max_src_len and len(tgt) <= task.max_tgt_len
    if task.fixed_pairs is None:
        assert a_train != get_task(name).splits(200, 50, seed=4)[0]
        # held-out sources never appear in training
        assert not {tuple(s) for s, _ in a_eval} & {tuple(s) for s, _ in a_train}
        assert len(a_train) == 200 and len(a_eval) == 50


def test_task_formats_follow_the_seeds():
    copy = get_task("copy")
    assert len(copy.src_vocab) == 100
    src, tgt = copy.splits(5, 1, 0)[0][0]
    assert len(src) == 10 and tgt == [BOS_ID] + src + [EOS_ID]  # the copy task: a bare source

    cr = get_task("copy-reverse")
    assert len(cr.src_vocab) == 20 and len(cr.tgt_vocab) == 20  # the copy-reverse preset: vocabulary 20
    lengths = set()
    for src, tgt in cr.splits(500, 10, 0)[0]:
        s = src[1:-1]
        lengths.add(len(s))
        assert tgt == [BOS_ID] + s + s[::-1] + [EOS_ID]
    assert lengths == set(range(3, 11))
    assert cr.encode_source("3 4 5") == [BOS_ID, 7, 8, 9, EOS_ID]  # symbol k -> id k + 4
    assert cr.decode_target([BOS_ID, 7, 8, 9, 9, 8, 7, EOS_ID]) == "3 4 5 5 4 3"
    with pytest.raises(ValueError, match="unknown source tokens"):
        cr.encode_source("3 99")

    for src, tgt in get_task("reverse").splits(50, 5, 0)[0]:
        assert tgt[1:-1] == src[1:-1][::-1]
    for src, tgt in get_task("sort").splits(50, 5, 0)[0]:
        assert tgt[1:-1] == sorted(src[1:-1])

    add = get_task("addition")
    for src, tgt in add.splits(100, 5, 0)[0]:
        a, b = add.src_vocab.decode(src).replace(" ", "").split("+")
        assert add.decode_target(tgt) == str(int(a) + int(b))
    assert add.encode_source("12+34") == add.encode_source("1 2 + 3 4")
    with pytest.raises(ValueError, match="unknown characters"):
        add.encode_source("1*2")


def test_toy_translation_corpus():
    pairs = read_corpus()
    assert 40 <= len(pairs) <= 80
    task = get_task("toy-translation")
    train, held = task.splits(10, 10, 0)
    assert len(train) == len(pairs) and held == train  # memorisation check
    src, tgt = train[0]
    assert task.src_vocab.decode(src) == pairs[0][0] and task.decode_target(tgt) == pairs[0][1]
    assert UNK_ID not in {t for s, g in train for t in s + g}


def test_read_corpus_rejects_malformed(tmp_path):
    p = tmp_path / "bad.tsv"
    p.write_text("only one column\n")
    with pytest.raises(ValueError, match="source<TAB>target"):
        read_corpus(str(p))
    p.write_text("# nothing\n")
    with pytest.raises(ValueError, match="empty"):
        read_corpus(str(p))


def test_make_batches_pads_right_and_shifts():
    pairs = [([1, 5, 6, 2], [1, 7, 2]), ([1, 5, 2], [1, 7, 8, 9, 2]), ([1, 9, 9, 9, 9, 2], [1, 2])]
    ((src, tgt),) = make_batches(pairs, batch_size=3, shuffle=False)
    assert src.dtype == np.int64 and tgt.dtype == np.int64
    np.testing.assert_array_equal(src, [[1, 5, 6, 2, 0, 0], [1, 5, 2, 0, 0, 0], [1, 9, 9, 9, 9, 2]])
    np.testing.assert_array_equal(tgt, [[1, 7, 2, 0, 0], [1, 7, 8, 9, 2], [1, 2, 0, 0, 0]])
    dec_in, labels = shift_targets(tgt)
    np.testing.assert_array_equal(dec_in, tgt[:, :-1])
    np.testing.assert_array_equal(labels, tgt[:, 1:])
    assert (dec_in[:, 0] == BOS_ID).all()
    batches = make_batches(pairs, batch_size=2)
    assert [b[0].shape[0] for b in batches] == [2, 1]  # last batch smaller


def test_make_batches_shuffle_is_seeded_and_covers_everything():
    pairs = [([1, 4 + i, 2], [1, 4 + i, 2]) for i in range(10)]
    a = make_batches(pairs, 3, shuffle=True, seed=1)
    b = make_batches(pairs, 3, shuffle=True, seed=1)
    c = make_batches(pairs, 3, shuffle=True, seed=2)
    assert all(np.array_equal(x[0], y[0]) for x, y in zip(a, b))
    assert not all(np.array_equal(x[0], y[0]) for x, y in zip(a, c))
    assert sorted(int(s[1]) for batch in a for s in batch[0]) == list(range(4, 14))
    # the endless iterator restarts exactly where a (epoch, index) pair says
    it = iterate_forever(pairs, 3, seed=1)
    seq = [next(it) for _ in range(9)]  # 4 batches per epoch
    it2 = iterate_forever(pairs, 3, seed=1, epoch=seq[5][0], start=seq[5][1])
    for want in seq[5:]:
        got = next(it2)
        assert got[:2] == want[:2] and np.array_equal(got[2][0], want[2][0])
    assert len(batch_order(10, 3, True, 1, 0)) == 4


def test_batching_errors():
    with pytest.raises(ValueError, match="empty"):
        make_batches([], 4)
    with pytest.raises(ValueError, match="batch_size"):
        make_batches([([1, 2], [1, 2])], 0)
    with pytest.raises(ValueError, match="max_len=3"):
        make_batches([([1, 4, 5, 2], [1, 2])], 4, max_len=3)
    with pytest.raises(ValueError, match="empty batch"):
        pad_batch([])
    with pytest.raises(ValueError, match="T >= 2"):
        shift_targets(np.array([[1], [1]]))
    with pytest.raises(ValueError, match="train_size"):
        get_task("copy").splits(0, 5, 0)


def test_batch_order_covers_each_example_once_and_depends_on_seed_and_epoch_only():
    order = batch_order(100, 32, True, 0, 0)
    assert [len(b) for b in order] == [32, 32, 32, 4]
    assert sorted(np.concatenate(order).tolist()) == list(range(100))
    assert all(np.array_equal(a, b) for a, b in zip(order, batch_order(100, 32, True, 0, 0)))
    assert not np.array_equal(np.concatenate(order), np.concatenate(batch_order(100, 32, True, 0, 1)))
    assert np.array_equal(np.concatenate(batch_order(100, 32, False, 0, 0)), np.arange(100))
