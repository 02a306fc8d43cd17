"""`python -m benchmarks run [...]`: see benchmarks/run.py (parses arguments, sets threads, then loads numpy/torch)."""
from benchmarks.run import main

if __name__ == "__main__":
    main()
