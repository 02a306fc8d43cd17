"""benchmarks: transformer_np and minitensor timed beside PyTorch under the same dtype and thread count."""
