"""Tests: every op, module, optimizer and the whole model against PyTorch."""
