"""Keeping plugin output out of the command's report.

``hwbackends env --json | jq`` must parse even when a plugin prints at import or in a probe.
While a command runs, ``sys.stdout`` is a router: text written by plugin code (the guard's
worker threads, or a call the guard runs inline) goes to stderr, everything else to the real
standard output. File descriptor 1 itself is pointed at stderr for the duration, so C-level
``printf`` from a vendor SDK cannot reach the report either; the report is written through a
duplicate of the original descriptor.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator
from typing import Any, TextIO

from hwbackends._base.guard import running_plugin_code

__all__ = ["plugin_output_to_stderr"]


class _Router(io.TextIOBase):
    """A text stream that sends plugin code's writes to ``other``, the rest to ``report``."""

    def __init__(self, report: TextIO, other: TextIO) -> None:
        super().__init__()
        self._report = report
        self._other = other

    def _target(self) -> TextIO:
        return self._other if running_plugin_code() else self._report

    def write(self, s: str) -> int:
        return self._target().write(s)

    def flush(self) -> None:
        with contextlib.suppress(Exception):
            self._other.flush()
        # The io finalizer flushes the router when it is collected, after the block below has
        # closed the report's stream: nothing is left to write then, and Python 3.13 would
        # print the ValueError as "Exception ignored" (earlier releases only in -X dev).
        if self._report.closed:
            return
        # a report that cannot be written (> /dev/full) must surface: cli.emit reports it
        self._report.flush()

    def fileno(self) -> int:
        return self._report.fileno()

    def isatty(self) -> bool:
        return self._report.isatty()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._report, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self._report, "errors", None)

    def reconfigure(self, **kwargs: Any) -> None:
        getattr(self._report, "reconfigure", lambda **_: None)(**kwargs)


@contextlib.contextmanager
def plugin_output_to_stderr() -> Iterator[None]:
    """Within the block, only the command's own writes reach standard output."""
    original = sys.stdout
    report: TextIO = original
    saved: int | None = None
    try:
        if original.fileno() == 1 and sys.stderr.fileno() == 2:
            original.flush()
            saved = os.dup(1)
            report = open(  # noqa: SIM115 - closed in the finally below
                saved,
                "w",
                encoding=original.encoding or "utf-8",
                errors=original.errors or "strict",
                closefd=False,
            )
            os.dup2(2, 1)
    except (AttributeError, OSError, ValueError):  # no real descriptor (a captured stream)
        saved = None
        report = original
    sys.stdout = _Router(report, sys.stderr)
    try:
        yield
    finally:
        sys.stdout = original
        if saved is not None:
            with contextlib.suppress(Exception):
                report.flush()
            with contextlib.suppress(OSError):
                os.dup2(saved, 1)
            with contextlib.suppress(Exception):
                report.close()
            os.close(saved)
