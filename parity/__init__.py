"""parity: the same Transformer in PyTorch, file for file, and the checks of transformer_np against it.

    model.py     parity/model.py mirrors transformer_np/model.py class for class, attribute for
                 attribute (same parameter names and shapes), plus Dropout with the `mask_fn` hook
    masks.py     transformer_np/masks.py in torch (bool, True = may attend)
    loss.py      transformer_np/loss.py in torch: the training loss, and the teacher-forced forward
    decode.py    transformer_np/decode.py in torch: greedy (with/without KV cache) and beam search
    convert.py   weights both ways by name (key sets and shapes asserted equal), and the import of
                 torch.nn.Transformer / TransformerEncoderLayer / TransformerDecoderLayer /
                 MultiheadAttention (packed in_proj split into W_q, W_k, W_v)
    the layer-by-layer report, split by concern:
      report.py    ReportConfig and run_report: build both models, feed both, compare (the orchestration)
      sides.py     the training step on each side (NpSide, TorchSide)
      hooks.py     what the report records on the models, and its two adjustments of the reference
      results.py   Row, Report and the rules that judge each row ('rel', 'zero', 'drift')
      render.py    the terminal table, Markdown and JSON
    view/        `python -m parity view`: one step's backward graph as a web page, each module output's and
                 parameter's gradient against the twin, the first module where they part (docs/parity-view.md)
    __main__.py  `python -m parity report ...` and `python -m parity summary --checkpoint runs/demo`

Tolerances come from minitensor/testing.py (PARITY_RTOL, error_stats, sum_roundoff_limit) only.
parity needs PyTorch: install the `torch` extra (pip install '.[torch]').
"""

try:
    import torch  # noqa: F401  (imported for its error only: parity is PyTorch code)
except ImportError:
    raise ImportError("parity needs PyTorch: install the torch extra, pip install '.[torch]'") from None
