"""A small convolutional classifier and a script that trains it, written against PyTorch's API.

python convnet.py [STEPS]     prints each step's loss (the compat tests run it on torch and on minitensor)
"""

import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class ConvNet(nn.Module):
    def __init__(self, channels=4, classes=5):
        super().__init__()
        self.conv1 = nn.Conv2d(1, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, 2 * channels, 3, stride=1, padding=1)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(2 * channels * 2 * 2, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), kernel_size=2, stride=2)
        return self.fc(self.flatten(x))


def data(n=8, seed=0):
    """Images (n, 1, 8, 8) and labels from NumPy, so both libraries see the same numbers."""
    rng = np.random.default_rng(seed)
    return torch.tensor(rng.standard_normal((n, 1, 8, 8))), torch.tensor(rng.integers(0, 5, n))


def main(steps):
    torch.set_default_dtype(torch.float64)
    torch.manual_seed(0)
    model = ConvNet()
    with torch.no_grad():  # weights from NumPy: the two libraries' initialisers draw different numbers
        rng = np.random.default_rng(1)
        for p in model.parameters():
            p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape)) * 0.3))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = data()
    for step in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        print(f"step {step} loss {loss.item():.17g}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
