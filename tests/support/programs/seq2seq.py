"""A GRU encoder-decoder that learns to reverse sequences, fed by a DataLoader, written against PyTorch's API."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

BOS = 0


class Seq2Seq(nn.Module):
    def __init__(self, vocab_size=10, emb=8, hidden=16):
        super().__init__()
        self.src_embed = nn.Embedding(vocab_size, emb)
        self.tgt_embed = nn.Embedding(vocab_size, emb)
        self.encoder = nn.GRU(emb, hidden, batch_first=True)
        self.decoder = nn.GRU(emb, hidden, batch_first=True)
        self.out = nn.Linear(hidden, vocab_size)

    def forward(self, src, tgt_in):
        _, h = self.encoder(self.src_embed(src))
        out, _ = self.decoder(self.tgt_embed(tgt_in), h)
        return self.out(out)

    @torch.no_grad()
    def greedy(self, src, steps):
        _, h = self.encoder(self.src_embed(src))
        token = torch.full((src.shape[0], 1), BOS, dtype=torch.long)
        tokens = []
        for _ in range(steps):
            out, h = self.decoder(self.tgt_embed(token), h)
            token = self.out(out).argmax(dim=-1)
            tokens.append(token)
        return torch.cat(tokens, dim=1)


def reversal_data(n=12, length=5, vocab_size=10, seed=0):
    """Pairs (src, BOS + reversed src) from NumPy, as a TensorDataset."""
    rng = np.random.default_rng(seed)
    src = rng.integers(1, vocab_size, (n, length))
    tgt = np.concatenate([np.full((n, 1), BOS), src[:, ::-1]], axis=1)
    return TensorDataset(torch.tensor(src), torch.tensor(tgt.copy()))


def train(model, dataset, epochs=2, batch_size=4, lr=0.01):
    """Adam over the DataLoader's batches (in order); returns each step's loss."""
    loader = DataLoader(dataset, batch_size=batch_size, shuffle=False, drop_last=False)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(epochs):
        for src, tgt in loader:
            logits = model(src, tgt[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt[:, 1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    return losses
