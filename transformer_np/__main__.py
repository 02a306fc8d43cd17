"""`python -m transformer_np ...`: see transformer_np/cli.py for the commands."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
