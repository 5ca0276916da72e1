"""Writing the report: the standard output a command owns, ASCII fallbacks, JSON, errors."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from hwbackends._base.errors import HwBackendsError

if TYPE_CHECKING:
    pass


#: Version of the ``--json`` schema of every command; bumped on incompatible changes.
JSON_SCHEMA_VERSION = 1


class UsageError(HwBackendsError):
    """Bad command-line input (exit code 2)."""


class OutputError(HwBackendsError):
    """Standard output refused the report (a full disk, a closed file): exit code 2."""


#: ASCII stand-ins for the report's few non-ASCII characters, used only where the terminal's
#: encoding (PYTHONIOENCODING=ascii, a cp1252 console) cannot show them.
_ASCII = {
    "·": "-",
    "●": "*",
    "○": "o",
    "✗": "x",
    "→": "->",
    "—": "-",
    "–": "-",
    "×": "x",
    "…": "...",
    "§": "S",
    "≥": ">=",
    "≤": "<=",
    "²": "2",
}


def _ascii_fallback(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    bad = exc.object[exc.start : exc.end]
    return "".join(_ASCII.get(ch, "?") for ch in bad), exc.end


def prepare_stdout() -> None:
    """Let every write to stdout degrade to ASCII stand-ins instead of raising
    UnicodeEncodeError on a terminal that cannot show a character."""
    import codecs

    try:
        codecs.lookup_error("hwbackends-ascii")
    except LookupError:
        codecs.register_error("hwbackends-ascii", _ascii_fallback)
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is not None and getattr(sys.stdout, "errors", "strict") == "strict":
        reconfigure(errors="hwbackends-ascii")


#: Characters that reorder or break text on a terminal (bidi marks, embeddings, overrides and
#: isolates, the Unicode line and paragraph separators): the report never uses them, so any
#: in its text came from data and is shown as ``\\uNNNN``.
_INVISIBLE = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u2028\u2029"
)


def escape_controls(text: str, keep_sgr: bool = False) -> str:
    """``text`` with control characters (C0 but newline and tab, DEL, C1) shown as ``\\xNN``
    and bidi controls and line separators as ``\\uNNNN``: a device name or plugin message
    with ANSI escapes or a right-to-left override must not drive the terminal. With
    ``keep_sgr`` the colour sequences (``ESC [ digits ; m``) the report styles itself with
    stay (they only colour text)."""
    if all((" " <= c < "\x7f" or c > "\x9f" or c in "\n\t") and c not in _INVISIBLE for c in text):
        return text
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\x1b" and keep_sgr and text[i + 1 : i + 2] == "[":
            j = i + 2
            while j < n and ((text[j].isdigit() and text[j].isascii()) or text[j] == ";"):
                j += 1
            if j < n and text[j] == "m":
                out.append(text[i : j + 1])
                i = j + 1
                continue
        if (c < " " and c not in "\n\t") or "\x7f" <= c <= "\x9f":
            out.append(f"\\x{ord(c):02x}")
        elif c in _INVISIBLE:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(c)
        i += 1
    return "".join(out)


def emit(text: str) -> None:
    """Write one report to stdout, whatever the terminal's encoding; a stdout that refuses the
    bytes (``> /dev/full``, a closed pipe) is the user's setup, not an internal error.
    Control characters from the machine or plugins are escaped (``escape_controls``)."""
    out = sys.stdout
    from hwbackends.cli._render import KEEP, _Style

    text = escape_controls(text.replace(KEEP, ""), keep_sgr=_Style(out).on)
    encoding = getattr(out, "encoding", None) or "utf-8"
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        text = "".join(_safe_char(ch, encoding) for ch in text)
    try:
        out.write(text + "\n")
        out.flush()
    except BrokenPipeError:
        _silence_stdout()
        raise
    except OSError as exc:
        _silence_stdout()
        raise OutputError(
            f"could not write the report to standard output: {exc.strerror or exc}",
            "a standard output that accepts the report (a terminal, a file, a pipe)",
            "free space on the target device or redirect the output elsewhere",
        ) from None


def _safe_char(ch: str, encoding: str) -> str:
    try:
        ch.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return _ASCII.get(ch, "?")
    return ch


def _silence_stdout() -> None:
    # What stays buffered would fail again when the interpreter flushes stdout at exit.
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def _json(obj: Any) -> str:
    import json

    # allow_nan=False: NaN and Infinity are not JSON; the readers refuse them on the way in
    return json.dumps(obj, indent=2, sort_keys=False, allow_nan=False)
