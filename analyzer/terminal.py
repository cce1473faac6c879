"""Printing to a terminal, where every name from outside is shown as literal text.

Run, folder, file, operator and kernel names, query results and messages quoting them were written
by someone else. Printed as they are, ``rich`` would read markup in them (``[bold]`` vanishes,
``[/data]`` raises an error) and the terminal would obey escape sequences (a run named
``"\\x1b[2J"`` clears the screen). :func:`lit` is the one way such a value reaches the screen: rich
markup escaped, control and bidirectional-format characters shown as Python escapes (``\\x1b``,
``\\u202e``). Use it for every value put into a markup template and for every table cell; the
consoles of the CLI never turn ``:x:`` into an emoji.
"""

from __future__ import annotations

import os
import sys
import unicodedata
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # rich is imported by the first console or markup escape (`analyze --help` needs neither)
    from rich.console import Console


def _width(fallback: int = 160) -> int:
    """The terminal's columns as ``shutil.get_terminal_size`` tells them ($COLUMNS, else the terminal
    of stdout, else ``fallback``), without importing shutil (and its archive modules) at start."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or fallback


WIDTH = _width()


def console(stderr: bool = False) -> Console:
    """A console that reads markup only in our own templates: no emoji codes, no highlighting."""
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, emoji=False, soft_wrap=True, width=WIDTH)


_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _shown(ch: str, lines: bool) -> str:
    if lines and ch == "\n":
        return ch
    if ch in _SHORT:
        return _SHORT[ch]
    if 0xDC80 <= ord(ch) <= 0xDCFF:  # a file name's byte that is not UTF-8 (surrogate escape): as \xNN
        return f"\\x{ord(ch) - 0xDC00:02x}"
    if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Cs"):  # controls, DEL, bidi / zero-width marks
        o = ord(ch)
        return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}"
    return ch


def visible(value: Any, lines: bool = False) -> str:
    """``value`` as text whose control characters are shown as escapes (newlines kept with ``lines``)."""
    text = "" if value is None else str(value)
    if text.isprintable():  # the common case: no control, format or separator character but " "
        return text
    return "".join(_shown(c, lines) for c in text)


def lit(value: Any, lines: bool = False) -> str:
    """``value`` for a rich markup template or a table cell: printed literally, escapes visible."""
    from rich.markup import escape

    return escape(visible(value, lines))
