# ruff: noqa: E501, RUF100  (one refusal a line: the sample and its reason, as the sweep prints them; RUF100: the list may be empty)
"""The OpInfo samples minitensor refuses (tests/test_opinfo.py), each with its reason: (op_db entry, spelling,
sample) -> the error. Checked exactly, so the list only shrinks: remove an entry once its sample agrees with torch.
Regenerate the text with `python -m tests.test_opinfo --refusals` (and review the diff: it must only lose lines)."""

# fmt: off
REFUSALS = {
    ('nn.functional.embedding', 'fn', 'T(5, 5):float64, args=(T(2, 2):int64,), kwargs={sparse=True} (no grad)'): 'NotImplementedError: embedding: sparse=True asks for a sparse gradient, and minitensor has no sparse tensors; use sparse=False (the same values, the gradient as a dense array)',
    ('nn.functional.embedding', 'fn', 'T(5, 5):float64, args=(T(3, 3):int64,), kwargs={sparse=True, scale_grad_by_freq=True, padding_idx=0, max_norm=1.0} (no grad)'): 'NotImplementedError: embedding: sparse=True asks for a sparse gradient, and minitensor has no sparse tensors; use sparse=False (the same values, the gradient as a dense array)',
}

# The same for forward mode (a tangent on every floating argument that requires grad, against torch.autograd.forward_ad)
FORWARD_REFUSALS = {
}
# fmt: on
