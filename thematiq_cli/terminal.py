"""What the CLI's human views may print of data: nothing that acts on the terminal.

Survey answers, ids, labels, metadata and error messages come from whoever wrote them. Printed as they are, an
ESC starts a control sequence (clear the screen, retitle the window, write the clipboard with OSC 52, a forged
OSC 8 hyperlink), BEL and the C1 controls (8-bit CSI) likewise, a backspace overwrites what came before, and
bidi overrides reorder what is shown. Each such character prints as U+FFFD: one character for one, so the
tables' column widths stay right. The JSON, JSONL and CSV views keep the data exactly as it is when piped or
written to a file; on a terminal they go through :class:`VisibleWriter` (or :func:`visible`) as well.
"""

from __future__ import annotations

import unicodedata
from typing import TextIO

_REPLACEMENT = "\ufffd"
#: Bidi embeddings, overrides, isolates and marks: invisible, and they reorder what a reader sees.
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")


def visible(text: str) -> str:
    """``text`` with every control character but the newline (C0, DEL, C1) and every bidi control as U+FFFD."""
    if text.isprintable():
        return text  # the common case: nothing to look at character by character
    return "".join(
        _REPLACEMENT if ch in _BIDI or (ch != "\n" and unicodedata.category(ch) == "Cc") else ch for ch in text
    )


class VisibleWriter:
    """Writes to a terminal what :func:`visible` leaves of the text: for the data views (JSON, JSONL, CSV) when they
    go to a terminal, where a reader, not a program, takes them. Piped or to a file, they stay as they are."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def write(self, text: str) -> int:
        return self.out.write(visible(text))

    def flush(self) -> None:
        self.out.flush()
