"""Build it yourself: a course of exercises whose checks run the project's own tools on the learner's code.

Seven rungs, from one scalar to the whole Transformer (course/README.md):

    1 the chain rule on scalars     a micrograd-sized Value engine       finite differences, torch
    2 tensor ops                    Mul, Exp, Sum, Tanh, MatMul backward gradcheck, torch (OP_RTOL)
    3 fused ops                     Softmax, LayerNorm, cross-entropy    gradcheck, torch (OP_RTOL)
    4 layers                        attention with masks, MHA, FFN       parity/'s torch twin
    5 the model                     positions, the layers, Transformer   parity/, layer by layer
    6 the optimizer                 SGD and Adam                         torch.optim, several steps
    7 training                      a step, a short curve                the project's step; the curve

The learner edits course/exercises/rungN.py; `python -m course check N` imports those files as they are
on disk and runs course/checks/rungN.py on them. course/solutions/ holds the answers, apart; the checker
reads them only when told (`--from solutions`), as the CI tests do.
"""
