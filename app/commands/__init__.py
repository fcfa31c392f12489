"""Commands: the modules behind `oakwatch`'s subcommands (app.cli parses and dispatches), and the
exit statuses and bad-input line they share.
"""

from __future__ import annotations

import sys

EXIT_OK, EXIT_PROBLEMS, EXIT_BAD_INPUT = 0, 1, 2


def fail(message: str) -> int:
    """Bad input: one line on standard error, exit status 2."""
    print(f"oakwatch: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT
