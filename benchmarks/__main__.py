"""`python -m benchmarks run [...]`: see benchmarks/run.py (parses arguments, then starts a worker process per side)."""

from benchmarks.run import main

if __name__ == "__main__":
    main()
