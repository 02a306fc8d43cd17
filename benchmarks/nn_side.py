"""The torch.nn.Transformer side of the benchmarks: the PyTorch model a user would write, timed beside the twin.

parity's twin (parity/model.py, the 'torch' side of benchmarks/workloads.py) mirrors transformer_np line for
line; this side runs the same configuration on torch.nn.Transformer (parity/nn_transformer.py) with the same
weights (parity/convert.py, np_to_nn_transformer), so the headline ratio can be taken against the faster
PyTorch (benchmarks/measure.py). It times forward, forward+backward and the training step
(workloads.NN_WORKLOADS): nn.Transformer has no incremental decoder. The masks are built from the tokens
inside the model, as nn.Transformer takes them (key-padding and causal masks, True = blocked).
"""

from __future__ import annotations

from benchmarks.workloads import CLIP, LABEL_SMOOTHING, Batch, BenchConfig, Side


def copy_to_nn_transformer(np_model, cfg: BenchConfig, device: str = "cpu"):
    """The torch.nn.Transformer-based model (parity/nn_transformer.py) holding np_model's weights."""
    import torch

    # the torch side only (parity imports torch): the numpy worker never loads torch
    from parity.convert import np_to_nn_transformer
    from parity.nn_transformer import NNTransformer

    nm = NNTransformer.from_config(cfg.model)
    np_to_nn_transformer(np_model, nm)  # asserts equal key sets, shapes and dtypes
    return nm.to(device=device, dtype=torch.float32)


def nn_torch_side(cfg: BenchConfig, model, batch: Batch, device: str = "cpu", lr: float = 1e-4) -> Side:
    """The torch.nn.Transformer side: forward, forward+backward and the training step as torch_side times them,
    the masks built from the tokens inside the model (as nn.Transformer takes them); no decoding."""
    import torch

    # the torch side only (parity imports torch): the numpy worker never loads torch
    from parity.loss import sequence_loss

    dev = torch.device(device)
    src, tgt_in = torch.from_numpy(batch.src).to(dev), torch.from_numpy(batch.tgt_in).to(dev)
    params = list(model.parameters())
    opt = torch.optim.Adam(params, lr=lr, betas=(0.9, 0.98), eps=1e-9)

    def loss_fn():
        return sequence_loss(model(src, tgt_in), batch.tgt_out, LABEL_SMOOTHING)

    def forward():
        model.eval()
        with torch.no_grad():
            return model(src, tgt_in)

    def fwd_bwd():
        model.train()
        model.zero_grad(set_to_none=True)
        loss = loss_fn()
        loss.backward()
        return loss

    def train():
        model.train()
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, CLIP)
        opt.step()
        return loss

    def eval_logits():
        return forward().detach().cpu().numpy()

    sync = torch.cuda.synchronize if dev.type == "cuda" else None
    return Side("torch-nn", forward, fwd_bwd, train, None, None, eval_logits, model, sync)
