"""The `cachelint` program (`python -m cachelint`, and the console script)."""

from __future__ import annotations

import atexit
import os
import sys
from typing import NoReturn

from cachelint import interrupts


def main() -> None:
    """The command line, with Ctrl-C ending it at any moment with exit 130 and no traceback: while
    modules load, while click reads the arguments, or in a command (where click alone would print
    "Aborted!" and exit 1)."""
    interrupts.install()
    try:
        with interrupts.raising():
            code = _run()
    except KeyboardInterrupt:
        interrupts.interrupted()
    if interrupts.received():  # an interrupt swallowed on its way up (e.g. raised in a finalizer)
        interrupts.interrupted()
    sys.exit(code)


def program() -> NoReturn:
    """The program (the console script, `python -m cachelint`): `main`, then `_exit`."""
    try:
        main()
    except SystemExit as done:
        code = done.code
    else:
        code = None
    if code is not None and not isinstance(code, (int, str)):
        sys.exit(code)
    _exit(code)


def _exit(code: int | str | None) -> NoReturn:
    """End as `sys.exit(code)` does, but without freeing every object one by one on the way out (tens
    of milliseconds after a large run): exit handlers run and output is flushed, then the process
    ends. Nothing of cachelint's is left to finish by then: files are written and closed, the cache's
    writes committed, the process pool stopped. If flushing fails, Python exits as usual and says why."""
    if isinstance(code, str):
        print(code, file=sys.stderr)
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        sys.exit(1 if isinstance(code, str) else code)
    os._exit(1 if isinstance(code, str) else code or 0)


def _run() -> int | str | None:
    """The exit code of the command the arguments ask for."""
    import click

    from cachelint.cli import main as command

    try:
        result = command.main(prog_name="cachelint", standalone_mode=False)
    except SystemExit as done:
        return done.code
    except click.ClickException as error:
        error.show()
        return error.exit_code
    except click.Abort:  # click's word for Ctrl-C (or end of input at a prompt, which cachelint never shows)
        raise KeyboardInterrupt from None
    return result if isinstance(result, int) else 0


if __name__ == "__main__":  # not when a spawned pool worker imports this module again
    program()
