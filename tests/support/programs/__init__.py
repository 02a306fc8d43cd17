"""PyTorch programs written for the compat tests: each runs unchanged on torch and, through minitensor.compat, on
minitensor (tests/minitensor/compat/test_programs.py compares every stage). They import torch, never minitensor."""
