"""parity: the same Transformer in PyTorch, file for file, and the reports that check transformer_np against it."""
