"""parity: the same Transformer in PyTorch, file for file, and the checks of transformer_np against it.

    model.py     parity/model.py mirrors transformer_np/model.py class for class, attribute for
                 attribute (same parameter names and shapes), plus Dropout with the `mask_fn` hook
    masks.py     transformer_np/masks.py in torch (bool, True = may attend)
    decode.py    transformer_np/decode.py in torch: greedy (with/without KV cache) and beam search
    convert.py   weights both ways by name (key sets and shapes asserted equal), and the import of
                 torch.nn.Transformer / TransformerEncoderLayer / TransformerDecoderLayer /
                 MultiheadAttention (packed in_proj split into W_q, W_k, W_v)
    report.py    the layer-by-layer report: every submodule's output, attention weights, loss,
                 every gradient, parameters after N optimizer steps, with identical dropout masks
    __main__.py  `python -m parity report ...` and `python -m parity summary --checkpoint runs/demo`

Tolerances come from minitensor/testing.py (PARITY_RTOL, error_stats) only.
"""
