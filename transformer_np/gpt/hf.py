"""Hugging Face checkpoints of GPT-2 (GPT2LMHeadModel, GPT2Model) and Llama (LlamaForCausalLM), both ways: a folder
of `config.json` and `model.safetensors`, as `save_pretrained` writes it, read into a GPTConfig and this package's
parameter names, and written back so that `transformers` loads it.

The layouts, each handled by name and checked before anything is copied:

    GPT-2   transformer.wte, transformer.wpe, transformer.h.i.{ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc,
            mlp.c_proj}, transformer.ln_f; `transformer.` is absent when the base model was saved; the attention's
            `attn.bias` / `attn.masked_bias` causal-mask buffers of older checkpoints are skipped; the weights are
            Conv1D's (in, out), the transpose of a Linear's; c_attn holds q, k, v side by side; a tied model saves no
            lm_head.weight (it is wte).
    Llama   model.embed_tokens, model.layers.i.{input_layernorm, self_attn.{q,k,v,o}_proj, post_attention_layernorm,
            mlp.{gate,up,down}_proj}, model.norm, lm_head (absent when tied); rotate-half rotary layout (the one
            F.rotary_embedding computes); the base is `rope_parameters.rope_theta` (current transformers) or
            `rope_theta` (older configs).

A config field this family does not support is refused, naming it. Deviations, flagged: transformers computes the
rotary angles and Llama's RMSNorm in float32 whatever the model's dtype (meant for half precision); these models
compute them in the model's dtype (the angles in float64, rounded). A Llama checkpoint's attention_dropout must be
0 (Llama drops only attention weights, this family embeddings and residual branches too), and a Llama-layout model
is saved with attention_dropout 0 whatever its dropout (a training setting, not a weight).
safetensors (the `hf` extra) is needed only here.
"""

from __future__ import annotations

import json
import os
import tempfile

import numpy as np

from transformer_np.gpt.config import GPTConfig


class CheckpointError(ValueError):
    """A checkpoint folder this family cannot read (or a model it cannot write): the message says what and why."""


def _safetensors():
    try:
        import safetensors.numpy as st  # third-party, optional: only the Hugging Face format needs it
    except ImportError:
        raise CheckpointError(
            "reading or writing Hugging Face checkpoints needs the safetensors package: pip install -e '.[hf]'"
        ) from None
    return st


# ----------------------------------------------------------------------------------------------
# config.json <-> GPTConfig
# ----------------------------------------------------------------------------------------------
def _need(cfg: dict, key: str, allowed, what: str) -> None:
    value = cfg.get(key, allowed[0])
    if value not in allowed:
        raise CheckpointError(f"unsupported config field {key}={value!r} ({what}); supported: {allowed}")


def gpt2_config(cfg: dict) -> GPTConfig:
    _need(cfg, "activation_function", ["gelu_new", "gelu_pytorch_tanh"], "GELU's tanh form only")
    _need(cfg, "scale_attn_weights", [True], "scores scaled by 1 / sqrt(Dh)")
    _need(cfg, "scale_attn_by_inverse_layer_idx", [False], "no per-layer scaling")
    _need(cfg, "reorder_and_upcast_attn", [False], "plain attention")
    _need(cfg, "add_cross_attention", [False], "decoder-only")
    drops = {cfg.get(k, 0.1) for k in ("resid_pdrop", "embd_pdrop", "attn_pdrop")}
    if len(drops) != 1:
        raise CheckpointError(
            f"unsupported config: resid_pdrop, embd_pdrop, attn_pdrop differ ({sorted(drops)}); one p"
        )
    return GPTConfig(
        vocab_size=cfg["vocab_size"],
        block_size=cfg["n_positions"],
        n_layer=cfg["n_layer"],
        n_head=cfg["n_head"],
        n_embd=cfg["n_embd"],
        d_ff=cfg.get("n_inner") or 4 * cfg["n_embd"],
        dropout=float(drops.pop()),
        norm_eps=cfg.get("layer_norm_epsilon", 1e-5),
        tie_weights=cfg.get("tie_word_embeddings", True),
    )


def rope_theta(cfg: dict) -> float:
    """The rotary base: rope_parameters.rope_theta (current transformers), else rope_theta (older configs)."""
    params = cfg.get("rope_parameters") or {}
    if params.get("rope_type", "default") != "default":
        raise CheckpointError(
            f"unsupported config field rope_parameters.rope_type={params['rope_type']!r}; supported: ['default']"
        )
    if cfg.get("rope_scaling"):
        raise CheckpointError(f"unsupported config field rope_scaling={cfg['rope_scaling']!r}; supported: [None]")
    return float(params.get("rope_theta", cfg.get("rope_theta", 10000.0)))


def llama_config(cfg: dict) -> GPTConfig:
    _need(cfg, "hidden_act", ["silu"], "SwiGLU's gate")
    _need(cfg, "pretraining_tp", [1, None], "no tensor-parallel slicing")
    heads, width = cfg["num_attention_heads"], cfg["hidden_size"]
    if cfg.get("head_dim") not in (None, width // heads):
        raise CheckpointError(f"unsupported config field head_dim={cfg['head_dim']}; supported: hidden_size / heads")
    if cfg.get("attention_dropout", 0.0):  # Llama drops only attention weights; this family drops in more places
        raise CheckpointError(
            f"unsupported config field attention_dropout={cfg['attention_dropout']}; supported: [0.0]"
        )
    if bool(cfg.get("attention_bias", False)) != bool(cfg.get("mlp_bias", False)):
        raise CheckpointError("unsupported config: attention_bias and mlp_bias differ (one bias switch here)")
    return GPTConfig(
        vocab_size=cfg["vocab_size"],
        block_size=cfg["max_position_embeddings"],
        n_layer=cfg["num_hidden_layers"],
        n_head=heads,
        n_kv_head=cfg.get("num_key_value_heads") or heads,
        n_embd=width,
        d_ff=cfg["intermediate_size"],
        bias=bool(cfg.get("attention_bias", False)),
        positions="rope",
        norm="rms",
        mlp="swiglu",
        tie_weights=bool(cfg.get("tie_word_embeddings", False)),
        norm_eps=cfg.get("rms_norm_eps", 1e-6),
        rope_theta=rope_theta(cfg),
    )


def family(config: GPTConfig) -> str:
    """'gpt2' or 'llama': the Hugging Face layout this config is, or a CheckpointError."""
    if (config.positions, config.norm, config.mlp, config.bias, config.kv_heads) == (
        "learned",
        "layer",
        "gelu",
        True,
        config.n_head,
    ):
        return "gpt2"
    if (config.positions, config.norm, config.mlp) == ("rope", "rms", "swiglu"):
        return "llama"
    raise CheckpointError(
        f"this model is neither GPT-2's layout nor Llama's (positions={config.positions}, norm={config.norm}, "
        f"mlp={config.mlp}, bias={config.bias}, n_kv_head={config.kv_heads}): no Hugging Face class loads it"
    )


def hf_config(config: GPTConfig, dtype: np.dtype) -> dict:
    """config.json for GPT2LMHeadModel or LlamaForCausalLM."""
    if family(config) == "gpt2":
        return {
            "architectures": ["GPT2LMHeadModel"],
            "model_type": "gpt2",
            "vocab_size": config.vocab_size,
            "n_positions": config.block_size,
            "n_embd": config.n_embd,
            "n_layer": config.n_layer,
            "n_head": config.n_head,
            "n_inner": config.ff_dim,
            "activation_function": "gelu_new",
            "resid_pdrop": config.dropout,
            "embd_pdrop": config.dropout,
            "attn_pdrop": config.dropout,
            "layer_norm_epsilon": config.norm_eps,
            "tie_word_embeddings": config.tie_weights,
            "dtype": str(np.dtype(dtype)),
        }
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": config.vocab_size,
        "hidden_size": config.n_embd,
        "intermediate_size": config.ff_dim,
        "num_hidden_layers": config.n_layer,
        "num_attention_heads": config.n_head,
        "num_key_value_heads": config.kv_heads,
        "hidden_act": "silu",
        "max_position_embeddings": config.block_size,
        "rms_norm_eps": config.norm_eps,
        "tie_word_embeddings": config.tie_weights,
        "attention_bias": config.bias,
        "mlp_bias": config.bias,
        "attention_dropout": 0.0,
        "head_dim": config.head_dim,
        "rope_parameters": {"rope_type": "default", "rope_theta": config.rope_theta},
        "rope_theta": config.rope_theta,
        "dtype": str(np.dtype(dtype)),
    }


# ----------------------------------------------------------------------------------------------
# tensor names
# ----------------------------------------------------------------------------------------------
def _gpt2_names(config: GPTConfig, prefix: str) -> dict[str, tuple[str, str]]:
    """{hf name: (our name or names joined by ',', how)}: how is 'copy', 'transpose' or 'qkv' (c_attn, split)."""
    out = {f"{prefix}wte.weight": ("tok_emb.weight", "copy"), f"{prefix}wpe.weight": ("pos_emb.weight", "copy")}
    for i in range(config.n_layer):
        h, b = f"{prefix}h.{i}.", f"blocks.{i}."
        for ours, theirs in (("norm1", "ln_1"), ("norm2", "ln_2")):
            out[f"{h}{theirs}.weight"] = (f"{b}{ours}.weight", "copy")
            out[f"{h}{theirs}.bias"] = (f"{b}{ours}.bias", "copy")
        qkv = ",".join(f"{b}attn.{p}_proj" for p in "qkv")
        out[f"{h}attn.c_attn.weight"] = (qkv, "qkv")
        out[f"{h}attn.c_attn.bias"] = (qkv, "qkv")
        for ours, theirs in (("attn.o_proj", "attn.c_proj"), ("mlp.fc", "mlp.c_fc"), ("mlp.proj", "mlp.c_proj")):
            out[f"{h}{theirs}.weight"] = (f"{b}{ours}.weight", "transpose")
            out[f"{h}{theirs}.bias"] = (f"{b}{ours}.bias", "copy")
    out[f"{prefix}ln_f.weight"] = ("norm_f.weight", "copy")
    out[f"{prefix}ln_f.bias"] = ("norm_f.bias", "copy")
    if not config.tie_weights:
        out["lm_head.weight"] = ("lm_head.weight", "copy")
    return out


def _llama_names(config: GPTConfig) -> dict[str, tuple[str, str]]:
    out = {"model.embed_tokens.weight": ("tok_emb.weight", "copy"), "model.norm.weight": ("norm_f.weight", "copy")}
    pairs = [("input_layernorm", "norm1"), ("post_attention_layernorm", "norm2")]
    linears = [(f"self_attn.{p}_proj", f"attn.{p}_proj") for p in "qkvo"]
    linears += [("mlp.gate_proj", "mlp.gate"), ("mlp.up_proj", "mlp.up"), ("mlp.down_proj", "mlp.down")]
    for i in range(config.n_layer):
        for theirs, ours in pairs:
            out[f"model.layers.{i}.{theirs}.weight"] = (f"blocks.{i}.{ours}.weight", "copy")
        for theirs, ours in linears:
            out[f"model.layers.{i}.{theirs}.weight"] = (f"blocks.{i}.{ours}.weight", "copy")
            if config.bias:
                out[f"model.layers.{i}.{theirs}.bias"] = (f"blocks.{i}.{ours}.bias", "copy")
    if not config.tie_weights:
        out["lm_head.weight"] = ("lm_head.weight", "copy")
    return out


def _skipped(name: str) -> bool:
    """GPT-2's causal-mask buffers that older checkpoints carry: not weights."""
    return name.endswith((".attn.bias", ".attn.masked_bias")) and (name.startswith("h.") or ".h." in name)


# ----------------------------------------------------------------------------------------------
# reading and writing
# ----------------------------------------------------------------------------------------------
def read_checkpoint(path: str) -> tuple[GPTConfig, dict[str, np.ndarray]]:
    """(config, {our parameter name: array}) from a save_pretrained folder, every name and shape checked."""
    config_file, weights_file = os.path.join(path, "config.json"), os.path.join(path, "model.safetensors")
    if not os.path.isdir(path):
        raise CheckpointError(f"{path}: no such checkpoint folder")
    for f in (config_file, weights_file):
        if not os.path.isfile(f):
            raise CheckpointError(f"{path}: missing {os.path.basename(f)} (a save_pretrained folder has both)")
    try:
        with open(config_file, encoding="utf-8") as f:
            cfg = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{config_file}: not a readable JSON config ({e})") from None
    kind = cfg.get("model_type")
    if kind not in ("gpt2", "llama"):
        raise CheckpointError(
            f"{path}: a checkpoint of architecture {kind!r} ({cfg.get('architectures')}); expected 'gpt2' or 'llama'"
        )
    try:
        config = gpt2_config(cfg) if kind == "gpt2" else llama_config(cfg)
    except KeyError as e:
        raise CheckpointError(f"{config_file}: missing config field {e.args[0]}") from None
    except (TypeError, ValueError) as e:
        if isinstance(e, CheckpointError):
            raise
        raise CheckpointError(f"{config_file}: {e}") from None
    try:
        tensors = _safetensors().load_file(weights_file)
    except CheckpointError:
        raise
    except Exception as e:  # safetensors raises its own SafetensorError (and others) on a damaged file
        raise CheckpointError(f"{weights_file}: not a readable safetensors file ({type(e).__name__}: {e})") from None
    arrays = hf_to_ours(tensors, config, kind, weights_file)
    dtypes = {a.dtype for a in arrays.values()}
    if len(dtypes) != 1 or next(iter(dtypes)).kind != "f":
        raise CheckpointError(f"{weights_file}: expected floating tensors of one dtype, got {sorted(map(str, dtypes))}")
    return config, arrays


def _write_text(file: str, text: str) -> None:
    with open(file, "w", encoding="utf-8") as f:
        f.write(text)


def hf_to_ours(tensors: dict, config: GPTConfig, kind: str, weights_file: str = "checkpoint") -> dict[str, np.ndarray]:
    """{our parameter name: array} from Hugging Face's {name: array} of a `kind` ('gpt2' or 'llama') model, the
    key sets checked first (`weights_file` names the source in the errors)."""
    tensors = {k: v for k, v in tensors.items() if not _skipped(k)}
    if kind == "gpt2":
        prefix = "transformer." if any(k.startswith("transformer.") for k in tensors) else ""
        names = _gpt2_names(config, prefix)
    else:
        names = _llama_names(config)
    if config.tie_weights and "lm_head.weight" in tensors:  # written by some savers beside its tie: the same matrix
        embed = tensors.get(
            "transformer.wte.weight", tensors.get("wte.weight", tensors.get("model.embed_tokens.weight"))
        )
        if embed is None or not np.array_equal(tensors.pop("lm_head.weight"), embed):
            raise CheckpointError(
                f"{weights_file}: tie_word_embeddings is true but lm_head.weight differs from the token embedding"
            )
    missing, unexpected = sorted(set(names) - set(tensors)), sorted(set(tensors) - set(names))
    if missing or unexpected:
        raise CheckpointError(
            f"{weights_file}: tensors do not match the config: missing {missing}; unexpected {unexpected}"
        )
    arrays = {}
    for theirs, (ours, how) in names.items():
        a = tensors[theirs]
        if how == "copy":
            arrays[ours] = a
        elif how == "transpose":  # Conv1D (in, out) -> Linear (out, in)
            arrays[ours] = np.ascontiguousarray(a.T)
        else:  # c_attn: (D, 3D) weight or (3D,) bias, q | k | v along its last dim
            for name, part in zip(ours.split(","), np.split(a, 3, axis=-1)):
                key = f"{name}.{'weight' if a.ndim == 2 else 'bias'}"
                arrays[key] = np.ascontiguousarray(part.T if a.ndim == 2 else part)
    return arrays


def ours_to_hf(arrays: dict, config: GPTConfig) -> dict[str, np.ndarray]:
    """Hugging Face's {name: array} (GPT2LMHeadModel or LlamaForCausalLM) from {our parameter name: array}."""
    tensors = {}
    names = _gpt2_names(config, "transformer.") if family(config) == "gpt2" else _llama_names(config)
    for theirs, (ours, how) in names.items():
        if how == "copy":
            tensors[theirs] = arrays[ours]
        elif how == "transpose":
            tensors[theirs] = arrays[ours].T
        else:
            which = "weight" if theirs.endswith("weight") else "bias"
            parts = [arrays[f"{name}.{which}"] for name in ours.split(",")]
            tensors[theirs] = (
                np.concatenate([p.T for p in parts], axis=1) if which == "weight" else np.concatenate(parts)
            )
    return {k: np.ascontiguousarray(v) for k, v in tensors.items()}


def write_checkpoint(path: str, config: GPTConfig, arrays: dict[str, np.ndarray]) -> None:
    """config.json and model.safetensors in `path`, as save_pretrained writes them; each file is written beside
    and then moved into place, so a failed write leaves what was there."""
    family(config)  # refuses a layout no Hugging Face class loads, before any file is touched
    dtype = next(iter(arrays.values())).dtype
    tensors = ours_to_hf(arrays, config)
    os.makedirs(path, exist_ok=True)
    st = _safetensors()
    for name, write in (
        ("model.safetensors", lambda f: st.save_file(tensors, f, metadata={"format": "pt"})),
        ("config.json", lambda f: _write_text(f, json.dumps(hf_config(config, dtype), indent=2))),
    ):
        fd, tmp = tempfile.mkstemp(dir=path, prefix=f".{name}.")
        os.close(fd)
        try:
            write(tmp)
            os.replace(tmp, os.path.join(path, name))
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
