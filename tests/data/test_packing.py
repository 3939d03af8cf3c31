"""Packing: EOS between documents, exact row layout, deterministic resumable batches."""

from __future__ import annotations

import pytest
import torch

from arcforge.data.packing import PackedDataset, pack, tokenize_docs
from arcforge.model.tokenizer import train_tokenizer


@pytest.fixture(scope="module")
def tok():
    return train_tokenizer(["the cat sat on the mat", "a dog ran"] * 20, vocab_size=300)


def test_tokenize_docs_appends_eos(tok):
    stream = tokenize_docs(["the cat", "a dog"], tok)
    a = tok.encode("the cat", add_special_tokens=False)
    b = tok.encode("a dog", add_special_tokens=False)
    assert stream == a + [tok.eos_token_id] + b + [tok.eos_token_id]
    assert tokenize_docs(["x"], tok, eos_id=99)[-1] == 99


def test_pack_layout_by_hand():
    # stream 0..10 (11 tokens), T=3 -> N = (11-1)//3 = 3 rows, overlapping by one token.
    rows = pack(list(range(11)), seq_len=3)
    assert rows.tolist() == [[0, 1, 2, 3], [3, 4, 5, 6], [6, 7, 8, 9]]
    # Every token after the first is a target exactly once across rows.
    targets = rows[:, 1:].reshape(-1).tolist()
    assert targets == list(range(1, 10))
    assert pack([1, 2], seq_len=3).shape == (0, 4)
    with pytest.raises(ValueError):
        pack([1, 2, 3], seq_len=0)


def test_batches_deterministic_and_cover_epoch():
    ds = PackedDataset(pack(list(range(10 * 4 + 1)), seq_len=4))  # 10 rows
    assert len(ds) == 10 and ds.seq_len == 4 and ds.n_tokens == 40
    # batch 3 -> 3 full batches per epoch (row left over each epoch).
    assert ds.batches_per_epoch(3) == 3
    epoch0 = torch.cat([ds.batch(s, 3, seed=7) for s in range(3)])  # (9, 5)
    firsts = epoch0[:, 0].tolist()
    assert len(set(firsts)) == 9  # no row twice within an epoch
    # A fresh object (a resumed run) yields identical batches for any step.
    resumed = PackedDataset(ds.data.clone())
    for s in (0, 2, 3, 5, 11):
        assert torch.equal(resumed.batch(s, 3, seed=7), ds.batch(s, 3, seed=7))
    # Epochs are reshuffled; seeds differ.
    epoch1 = torch.cat([ds.batch(s, 3, seed=7) for s in range(3, 6)])
    assert not torch.equal(epoch0, epoch1)
    assert not torch.equal(ds.batch(0, 3, seed=8), ds.batch(0, 3, seed=7))


def test_batch_errors():
    ds = PackedDataset(pack(list(range(9)), seq_len=4))  # 2 rows
    with pytest.raises(ValueError, match="cannot fill"):
        ds.batch(0, 3, seed=0)
    with pytest.raises(ValueError):
        ds.batch(-1, 1, seed=0)
    with pytest.raises(ValueError):
        PackedDataset(torch.zeros(3, dtype=torch.long))


def test_from_texts_and_save_load(tok, tmp_path):
    texts = ["the cat sat on the mat"] * 30
    ds = PackedDataset.from_texts(texts, tok, seq_len=8)
    n_stream = len(tokenize_docs(texts, tok))
    assert len(ds) == (n_stream - 1) // 8
    assert (ds.data == tok.eos_token_id).any()
    ds.save(tmp_path / "p.pt")
    back = PackedDataset.load(tmp_path / "p.pt")
    assert torch.equal(back.batch(4, 2, seed=1), ds.batch(4, 2, seed=1))
