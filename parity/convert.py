"""Weights between transformer_np (minitensor) and parity (PyTorch), and in from torch.nn.Transformer.

- `np_to_torch(np_model, torch_model)` / `torch_to_np(torch_model, np_model)`: copy every entry of
  the state dict by name. The key sets and every shape must be equal (the error lists the keys
  that differ); dtypes must be equal too (nothing is silently cast).
- `from_torch_transformer(nn_transformer, model)`: import PyTorch's own `torch.nn.Transformer`
  (batch_first or not) into the encoder and decoder stacks of a transformer_np or parity model.
  nn.Transformer has no embeddings, positional encoding or output projection, and always ends
  each stack with a LayerNorm, so the target model must have final_norm=True and only the keys
  under `encoder.` and `decoder.` are written. The packed `in_proj_weight` (3D, D) /
  `in_proj_bias` (3D,) of nn.MultiheadAttention split, in order, into W_q, W_k, W_v; `out_proj`
  becomes W_o; `multihead_attn` (the decoder's cross-attention) becomes `cross_attn`; `linear1`,
  `linear2` move under `feed_forward`.
  What is compared (tests/transformer_np/test_torch_import.py, float64, PARITY_RTOL): both sides get the same
  embedded inputs x_src (B, S, D) and x_tgt (B, T, D); the encoder stack's output (memory, after
  its final norm) and the decoder stack's output (after its final norm) must agree, and so must
  the gradients of both inputs and of every imported weight under a random upstream gradient.
  Masks: torch gets key-padding masks and a boolean causal mask (True = blocked); ours the same
  information as boolean "may attend" masks. nn.Transformer runs with grad enabled (its
  reference path; the fused inference fast path and nested tensors are not exercised).
- `mask_to_torch(mask, num_heads)`: our boolean "True = may attend" mask, broadcastable to
  (B, H, T_q, T_k), as nn.MultiheadAttention's `attn_mask` (B*H, T_q, T_k), True = blocked.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn

import minitensor as mt

from .placement import host


def _is_torch(model) -> bool:
    return isinstance(model, nn.Module)


def _to_numpy(value) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        return value
    return host(value)  # a minitensor Tensor (any device) or a CuPy / fake-device array


def state_arrays(model) -> dict[str, np.ndarray]:
    """A copy of the model's state dict (torch or minitensor) as NumPy arrays, by name."""
    return {k: _to_numpy(v).copy() for k, v in model.state_dict().items()}  # copies: state_dict() values share


def _resolve(model, key: str):
    """The live tensor behind a state-dict key: walk attributes, indexing into ModuleLists by position."""
    obj = model
    for part in key.split("."):
        if part.isdigit() and not hasattr(obj, part):
            obj = obj[int(part)]
        else:
            obj = getattr(obj, part)
    return obj


def check_keys(ours: dict, theirs: dict, what: str, ours_name: str = "source", theirs_name: str = "target") -> None:
    """ValueError listing the keys only on one side and the keys whose shapes differ."""
    only_ours = sorted(set(ours) - set(theirs))
    only_theirs = sorted(set(theirs) - set(ours))
    shapes = sorted(
        f"{k}: {tuple(np.shape(ours[k]))} vs {tuple(np.shape(theirs[k]))}"
        for k in set(ours) & set(theirs)
        if tuple(np.shape(ours[k])) != tuple(np.shape(theirs[k]))
    )
    if only_ours or only_theirs or shapes:
        raise ValueError(
            f"{what}: state dicts differ: only in {ours_name}: {only_ours}; "
            f"only in {theirs_name}: {only_theirs}; shape mismatches: {shapes}"
        )


def load_arrays(model, arrays: dict[str, np.ndarray], what: str = "load_arrays", prefixes=None) -> None:
    """Write `arrays` into the model's tensors by name, in place, after checking keys, shapes and dtypes.

    With `prefixes`, only the model's keys starting with one of them must match (the rest are left alone).
    """
    target = state_arrays(model)
    if prefixes is not None:
        target = {k: v for k, v in target.items() if k.startswith(tuple(prefixes))}
    check_keys(arrays, target, what)
    bad = sorted(
        f"{k}: {np.asarray(arrays[k]).dtype} vs {target[k].dtype}"
        for k in arrays
        if np.asarray(arrays[k]).dtype != target[k].dtype
    )
    if bad:
        raise TypeError(f"{what}: dtypes differ (convert one model first, nothing is cast silently): {bad}")
    if _is_torch(model):
        with torch.no_grad():
            for k, v in arrays.items():
                t = _resolve(model, k)
                t.copy_(torch.as_tensor(np.asarray(v), device=t.device))
    else:
        with mt.no_grad():
            for k, v in arrays.items():
                _resolve(model, k).copy_(v)  # (onto the model's device)


def np_to_torch(np_model, torch_model):
    """Copy every transformer_np weight into the parity model (same names, shapes, dtypes); returns torch_model."""
    load_arrays(torch_model, state_arrays(np_model), what="np_to_torch")
    return torch_model


def torch_to_np(torch_model, np_model):
    """Copy every parity weight into the transformer_np model (same names, shapes, dtypes); returns np_model."""
    load_arrays(np_model, state_arrays(torch_model), what="torch_to_np")
    return np_model


# --- torch.nn.Transformer import ------------------------------------------------------------


def from_torch_multihead_attention(mha: nn.MultiheadAttention, prefix: str = "") -> dict[str, np.ndarray]:
    """nn.MultiheadAttention -> {prefix + 'W_q.weight', ...}: the packed in-projection splits into q, k, v."""
    if not mha._qkv_same_embed_dim or mha.in_proj_weight is None:
        raise ValueError(
            "from_torch_multihead_attention: only kdim == vdim == embed_dim (packed in_proj_weight) is supported"
        )
    if mha.in_proj_bias is None or mha.out_proj.bias is None or mha.bias_k is not None:
        raise ValueError(
            "from_torch_multihead_attention: expected bias=True and add_bias_kv=False "
            "(our Linear layers always carry a bias and no extra key/value rows)"
        )
    w_q, w_k, w_v = _to_numpy(mha.in_proj_weight).reshape(3, mha.embed_dim, mha.embed_dim)
    b_q, b_k, b_v = _to_numpy(mha.in_proj_bias).reshape(3, mha.embed_dim)
    out = {
        "W_q.weight": w_q,
        "W_q.bias": b_q,
        "W_k.weight": w_k,
        "W_k.bias": b_k,
        "W_v.weight": w_v,
        "W_v.bias": b_v,
        "W_o.weight": _to_numpy(mha.out_proj.weight),
        "W_o.bias": _to_numpy(mha.out_proj.bias),
    }
    return {prefix + k: v.copy() for k, v in out.items()}


def _activation_name(layer) -> str:
    act = layer.activation
    if act is torch.nn.functional.relu or isinstance(act, nn.ReLU):
        return "relu"
    if act is torch.nn.functional.gelu or (isinstance(act, nn.GELU) and act.approximate == "none"):
        return "gelu"
    raise ValueError(f"from_torch_transformer: activation {act!r} is not supported (expected relu or gelu)")


def _norm(prefix: str, ln: nn.LayerNorm) -> dict[str, np.ndarray]:
    if ln.eps != 1e-5 or ln.weight is None or ln.bias is None:
        raise ValueError(
            f"from_torch_transformer: {prefix}: expected an affine LayerNorm with eps 1e-5, "
            f"got eps={ln.eps}, affine={ln.weight is not None}"
        )
    return {prefix + "weight": _to_numpy(ln.weight).copy(), prefix + "bias": _to_numpy(ln.bias).copy()}


def _ffn(prefix: str, layer) -> dict[str, np.ndarray]:
    return {
        prefix + "feed_forward.linear1.weight": _to_numpy(layer.linear1.weight).copy(),
        prefix + "feed_forward.linear1.bias": _to_numpy(layer.linear1.bias).copy(),
        prefix + "feed_forward.linear2.weight": _to_numpy(layer.linear2.weight).copy(),
        prefix + "feed_forward.linear2.bias": _to_numpy(layer.linear2.bias).copy(),
    }


def from_torch_encoder_layer(layer: nn.TransformerEncoderLayer, prefix: str = "") -> dict[str, np.ndarray]:
    """nn.TransformerEncoderLayer -> our EncoderLayer's keys (self_attn, feed_forward, norm1, norm2)."""
    out = from_torch_multihead_attention(layer.self_attn, prefix + "self_attn.")
    out.update(_ffn(prefix, layer))
    out.update(_norm(prefix + "norm1.", layer.norm1))
    out.update(_norm(prefix + "norm2.", layer.norm2))
    return out


def from_torch_decoder_layer(layer: nn.TransformerDecoderLayer, prefix: str = "") -> dict[str, np.ndarray]:
    """nn.TransformerDecoderLayer -> our DecoderLayer's keys; its `multihead_attn` is our `cross_attn`."""
    out = from_torch_multihead_attention(layer.self_attn, prefix + "self_attn.")
    out.update(from_torch_multihead_attention(layer.multihead_attn, prefix + "cross_attn."))
    out.update(_ffn(prefix, layer))
    for i in (1, 2, 3):
        out.update(_norm(f"{prefix}norm{i}.", getattr(layer, f"norm{i}")))
    return out


def torch_transformer_config(nn_transformer: nn.Transformer) -> dict:
    """The ModelConfig fields an nn.Transformer fixes (the rest, vocabularies and positions, are ours to choose)."""
    enc = nn_transformer.encoder.layers[0]
    dec = nn_transformer.decoder.layers[0]
    if nn_transformer.encoder.norm is None or nn_transformer.decoder.norm is None:
        raise ValueError("from_torch_transformer: expected the final encoder and decoder norms nn.Transformer builds")
    return dict(
        d_model=enc.self_attn.embed_dim,
        num_heads=enc.self_attn.num_heads,
        num_encoder_layers=len(nn_transformer.encoder.layers),
        num_decoder_layers=len(nn_transformer.decoder.layers),
        d_ff=enc.linear1.out_features,
        norm_first=bool(enc.norm_first),
        final_norm=True,
        activation=_activation_name(enc),
        dec_activation=_activation_name(dec),
        dec_norm_first=bool(dec.norm_first),
    )


def torch_transformer_arrays(nn_transformer: nn.Transformer) -> dict[str, np.ndarray]:
    """Every weight of an nn.Transformer under our names ('encoder.layers.0.self_attn.W_q.weight', ...)."""
    out = {}
    for i, layer in enumerate(nn_transformer.encoder.layers):
        out.update(from_torch_encoder_layer(layer, f"encoder.layers.{i}."))
    out.update(_norm("encoder.norm.", nn_transformer.encoder.norm))
    for i, layer in enumerate(nn_transformer.decoder.layers):
        out.update(from_torch_decoder_layer(layer, f"decoder.layers.{i}."))
    out.update(_norm("decoder.norm.", nn_transformer.decoder.norm))
    return out


def from_torch_transformer(nn_transformer: nn.Transformer, model):
    """Import nn.Transformer's encoder and decoder into `model` (transformer_np or parity); returns model.

    The model must match nn.Transformer's structure: same width, heads, layer counts, d_ff,
    activation and norm placement, and final_norm=True. Its embeddings, positional encoding and
    generator are left untouched (nn.Transformer has none).
    """
    cfg = torch_transformer_config(nn_transformer)
    ours = model.config if hasattr(model, "config") else None
    if ours is not None:
        wanted = {
            k: cfg[k]
            for k in (
                "d_model",
                "num_heads",
                "num_encoder_layers",
                "num_decoder_layers",
                "d_ff",
                "norm_first",
                "final_norm",
                "activation",
            )
        }
        have = {k: getattr(ours, k) for k in wanted}
        if wanted != have or cfg["dec_activation"] != cfg["activation"] or cfg["dec_norm_first"] != cfg["norm_first"]:
            diff = {k: (have[k], wanted[k]) for k in wanted if have[k] != wanted[k]}
            raise ValueError(
                f"from_torch_transformer: model config does not match nn.Transformer "
                f"(field: (ours, nn.Transformer)): {diff}"
            )
    arrays = torch_transformer_arrays(nn_transformer)
    load_arrays(model, arrays, what="from_torch_transformer", prefixes=("encoder.", "decoder."))
    return model


def mask_to_torch(mask, num_heads: int, batch_size: int, q_len: int, k_len: int) -> torch.Tensor | None:
    """Our bool mask (True = may attend), broadcastable to (B, H, T_q, T_k) -> torch attn_mask (B*H, T_q, T_k),
    True = blocked."""
    if mask is None:
        return None
    m = mask if isinstance(mask, torch.Tensor) else torch.as_tensor(_to_numpy(mask))
    if m.dtype != torch.bool:
        raise TypeError(f"mask_to_torch: expected a bool mask, got {m.dtype}")
    m = m.expand(batch_size, num_heads, q_len, k_len)
    return ~m.reshape(batch_size * num_heads, q_len, k_len)


# --- into the torch.nn.Transformer-based model (parity/nn_transformer.py) ----------------------


def to_torch_multihead_attention(ours: dict[str, np.ndarray], prefix: str, theirs: str) -> dict[str, np.ndarray]:
    """Our W_q, W_k, W_v, W_o under `prefix` -> nn.MultiheadAttention's keys under `theirs`: the three
    in-projections packed, in order, into in_proj_weight (3D, D) / in_proj_bias (3D,); W_o -> out_proj."""
    packed = {kind: np.concatenate([ours[f"{prefix}W_{x}.{kind}"] for x in "qkv"]) for kind in ("weight", "bias")}
    return {
        theirs + "in_proj_weight": packed["weight"],  # (3D, D)
        theirs + "in_proj_bias": packed["bias"],  # (3D,)
        theirs + "out_proj.weight": ours[prefix + "W_o.weight"],
        theirs + "out_proj.bias": ours[prefix + "W_o.bias"],
    }


def nn_transformer_arrays(ours: dict[str, np.ndarray], config) -> dict[str, np.ndarray]:
    """transformer_np's (or parity's) state, by our names, under NNTransformer's names: the inverse of
    torch_transformer_arrays for the stacks, the embeddings, positions and generator unchanged."""
    out = {k: v for k, v in ours.items() if not k.startswith(("encoder.", "decoder."))}
    stacks = (("encoder", config.num_encoder_layers, 2), ("decoder", config.num_decoder_layers, 3))
    for stack, n_layers, n_norms in stacks:
        for i in range(n_layers):
            p, q = f"{stack}.layers.{i}.", f"transformer.{stack}.layers.{i}."
            out.update(to_torch_multihead_attention(ours, p + "self_attn.", q + "self_attn."))
            if stack == "decoder":
                out.update(to_torch_multihead_attention(ours, p + "cross_attn.", q + "multihead_attn."))
            for lin in ("linear1", "linear2"):
                for kind in ("weight", "bias"):
                    out[f"{q}{lin}.{kind}"] = ours[f"{p}feed_forward.{lin}.{kind}"]
            for j in range(1, n_norms + 1):
                for kind in ("weight", "bias"):
                    out[f"{q}norm{j}.{kind}"] = ours[f"{p}norm{j}.{kind}"]
        if config.final_norm:
            for kind in ("weight", "bias"):
                out[f"transformer.{stack}.norm.{kind}"] = ours[f"{stack}.norm.{kind}"]
    return out


def np_to_nn_transformer(model, nn_model):
    """Copy every weight of a transformer_np (or parity) model into an NNTransformer of the same ModelConfig;
    returns nn_model. Key sets, shapes and dtypes are checked as by np_to_torch (load_arrays)."""
    if model.config != nn_model.config:
        raise ValueError(f"np_to_nn_transformer: configs differ: {model.config} vs {nn_model.config}")
    load_arrays(nn_model, nn_transformer_arrays(state_arrays(model), model.config), what="np_to_nn_transformer")
    return nn_model
