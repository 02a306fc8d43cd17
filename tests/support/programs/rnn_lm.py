"""Recurrent language models (a plain RNN and an LSTM) and their training loop, written against PyTorch's API."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class RNNLM(nn.Module):
    """Embedding, a stack of tanh RNN layers, a linear read-out."""

    def __init__(self, vocab_size=13, emb=8, hidden=12, num_layers=2):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, emb)
        self.rnn = nn.RNN(emb, hidden, num_layers=num_layers, batch_first=True, nonlinearity="tanh")
        self.head = nn.Linear(hidden, vocab_size)

    def forward(self, x, targets=None, h0=None):
        out, h = self.rnn(self.embed(x), h0)
        logits = self.head(out)
        if targets is None:
            return logits, h
        return logits, F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


class LSTMLM(nn.Module):
    """Embedding, a stack of LSTM layers (dropout between them), a linear read-out."""

    def __init__(self, vocab_size=13, emb=8, hidden=12, num_layers=2, dropout=0.2):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, emb)
        self.lstm = nn.LSTM(emb, hidden, num_layers=num_layers, batch_first=True, dropout=dropout)
        self.drop = nn.Dropout(dropout)
        self.head = nn.Linear(hidden, vocab_size)

    def forward(self, x, targets=None, state=None):
        out, (h, c) = self.lstm(self.drop(self.embed(x)), state)
        logits = self.head(self.drop(out))
        if targets is None:
            return logits, (h, c)
        return logits, F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def train(model, batches, lr=0.5, clip=1.0):
    """Plain SGD with gradient clipping over (x, y) batches; returns each step's loss and gradient norm."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    model.train()
    history = []
    for x, y in batches:
        opt.zero_grad()
        _, loss = model(x, y)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        history.append((loss.item(), float(norm)))
    return history
