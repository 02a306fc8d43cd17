"""Build it yourself: a course of exercises whose checks run the project's own tools on the learner's code.

Ten rungs, from one scalar to a Transformer the learner built and trained, then a GPT (course/README.md):

    1 the chain rule on scalars     a micrograd-sized Value engine       finite differences, torch
    2 the engine on tensors         sum_to, accumulation, the walk       torch, order and depth of the walk
    3 tensor ops                    Mul, Exp, Sum, Tanh, MatMul backward gradcheck, torch, through rung 2 too
    4 fused ops                     Softmax, LayerNorm, cross-entropy    gradcheck, torch, through rung 2 too
    5 layers                        attention with masks, MHA, FFN       parity/'s torch twin
    6 the model                     positions, the layers, Transformer   parity/, layer by layer
    7 the optimizer                 SGD and Adam                         torch.optim, several steps
    8 training                      a step, a short curve                the project's step; the curve
    9 the capstone                  rungs 6-8 together; greedy decoding  the project's model, step by step
    10 a decoder-only model (GPT)   causal mask, RoPE, GPT, sampling     transformer_np.gpt, module by module

The learner edits course/exercises/rungN.py; `python -m course check N` imports those files as they are
on disk and runs course/checks/rungN.py on them. course/solutions/ holds the answers, apart; the checker
reads them only when told (`--from solutions`), as the CI tests do.
"""
