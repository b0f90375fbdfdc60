"""A transient progress bar on stderr while many files are analysed in a terminal."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # rich is imported only when a bar is shown
    from rich.console import Console
    from rich.progress import Progress, TaskID

# More files than this, and the bar appears (below it a run is too short for one to help).
MIN_FILES = 50
# Formats meant for a person reading a terminal; machine formats never get a bar.
HUMAN_FORMATS = frozenset({"full", "concise"})

ProgressCallback = Callable[[int, int], None]


class ProgressBar:
    """A `progress(done, total)` callback that starts a bar the first time `total` exceeds MIN_FILES."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.progress: Progress | None = None
        self.task: TaskID | None = None

    def __call__(self, done: int, total: int) -> None:
        if total <= MIN_FILES:
            return
        if self.progress is None or self.task is None:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.progress = Progress(
                TextColumn("Analysing"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("files"),
                TimeElapsedColumn(),
                console=self.console,
                transient=True,
            )
            self.progress.start()
            self.task = self.progress.add_task("analyse", total=total)
        self.progress.update(self.task, completed=done, total=total)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def wants_progress(output_format: str, quiet: bool) -> bool:
    """A bar only for human formats, not under --quiet, and only when stderr is a terminal."""
    return output_format in HUMAN_FORMATS and not quiet and sys.stderr.isatty()


@contextmanager
def progress_bar(output_format: str, quiet: bool, no_color: bool) -> Iterator[ProgressCallback | None]:
    """The callback to pass to `analyze`, or None when no bar should be shown; the bar is gone on exit.

    Rich leaves colour out by itself when NO_COLOR is set."""
    if not wants_progress(output_format, quiet):
        yield None
        return
    from rich.console import Console

    bar = ProgressBar(Console(file=sys.stderr, no_color=no_color or None, highlight=False))
    try:
        yield bar
    finally:
        bar.close()
