# ruff: noqa: E501, RUF100  (one refusal a line: the sample and its reason, as the sweep prints them; RUF100: the list may be empty)
"""The OpInfo samples minitensor refuses (tests/test_opinfo.py), each with its reason: (op_db entry, spelling,
sample) -> the error. Checked exactly, so the list only shrinks: remove an entry once its sample agrees with torch.
Regenerate the text with `python -m tests.test_opinfo --refusals` (and review the diff: it must only lose lines)."""

# fmt: off
REFUSALS = {
}
# fmt: on
