"""The command line: `python -m minitensor.compat run script.py [args]` runs a PyTorch script on minitensor.

The script runs as `__main__` with sys.argv = [script.py, args...], its `import torch` giving minitensor. An API that
minitensor lacks stops it with one line naming the API and the script's line (exit 1); any other error of the script
prints its traceback, as Python does (exit 1); the script's own sys.exit(n) exits n. Bad input (no script, a script
that is not a file, an unknown command) prints one line and exits 2; Ctrl-C prints one line and exits 130.
"""

from __future__ import annotations

import signal
import sys

from .proxy import NotInMinitensor
from .runner import run

PROG = "python -m minitensor.compat"
USAGE = f"usage: {PROG} run SCRIPT.py [ARGS...]"


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["-h"], ["--help"]):
        print(USAGE + "\n\n" + __doc__.split("\n\n", 1)[1].strip())
        return 0
    if not argv or argv[0] != "run":
        got = f"{argv[0]!r}" if argv else "nothing"
        print(f"{PROG}: error: expected the command 'run', got {got} ({USAGE})", file=sys.stderr)
        return 2
    if len(argv) < 2:
        print(f"{PROG} run: error: expected a script to run ({USAGE})", file=sys.stderr)
        return 2
    try:
        run(argv[1], argv[2:])
    except FileNotFoundError as e:
        if e.filename is not None:  # raised inside the script: the script's error, not the command line's
            raise
        print(f"{PROG} run: error: {e}", file=sys.stderr)
        return 2
    except NotInMinitensor as e:
        print(f"{PROG} run: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C while exiting is not a traceback
        print(f"{PROG} run: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
