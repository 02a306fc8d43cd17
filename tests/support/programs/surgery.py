"""State-dict surgery as pretrained-weight loaders do it, written against PyTorch's API: copy weights into
state_dict() values under no_grad, rename and filter keys, load with strict=False."""

import torch
import torch.nn as nn


class Source(nn.Module):
    """The 'pretrained' model: its names are not the target's, and its second layer is stored transposed."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 6)
        self.fc2 = nn.Linear(6, 3)


class Target(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 6), nn.Tanh())
        self.head = nn.Linear(3, 6)  # its weight (6, 3) is the source's fc2.weight (3, 6) transposed
        self.extra = nn.Linear(6, 2)

    def forward(self, x):
        h = self.body(x)
        return self.extra(h + self.head(h[:, :3]))


RENAME = {"fc1.weight": "body.0.weight", "fc1.bias": "body.0.bias", "fc2.weight": "head.weight"}
TRANSPOSED = {"head.weight"}


def copy_pretrained(source, target):
    """Copy source's weights into target's state_dict() values, renamed, transposing where stored so; returns the
    keys of target that were not written."""
    sd_src = source.state_dict()
    sd = target.state_dict()
    written = set()
    with torch.no_grad():
        for k, w in sd_src.items():
            if k not in RENAME:
                continue
            name = RENAME[k]
            if name in TRANSPOSED:
                assert sd[name].shape[::-1] == w.shape
                sd[name].copy_(w.t())
            else:
                assert sd[name].shape == w.shape
                sd[name].copy_(w)
            written.add(name)
    return sorted(set(sd) - written)


def partial_load(source_sd, target):
    """Load a filtered, renamed state dict with strict=False; returns (missing keys, unexpected keys)."""
    filtered = {k.replace("fc1.", "body.0."): v for k, v in source_sd.items() if not k.startswith("fc2.")}
    filtered["stale.weight"] = torch.zeros(2, 2)
    result = target.load_state_dict(filtered, strict=False)
    return sorted(result.missing_keys), sorted(result.unexpected_keys)
