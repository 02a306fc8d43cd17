"""transformer_np: the encoder-decoder Transformer of "Attention Is All You Need" in pure NumPy, on minitensor."""
