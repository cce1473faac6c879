"""Small JSON files (metadata, ``communication*.json``, sidecars) and msgspec pieces of big ones.

- ``load_json``: a file that must be read (it is reported on the collection): ``InputError`` that
  names the problem when it is empty, unreadable or not JSON (or not an object, when asked);
- ``peek_json``: a file looked at to decide something (discovery's rank, a clock, a layout): None
  when it cannot be used;
- ``decode_or_none``: one raw JSON value of a trace (an event's ``args``) through a typed msgspec
  decoder, None when absent or not of that shape;
- ``json_value``: JSON text (bytes or str) to Python objects, ``ValueError`` for anything that is not
  JSON — nesting too deep for the decoder included (``DECODE_ERRORS``: what a msgspec decode raises
  on bad input, for the decoders of big files).

Both file loaders skip a UTF-8 byte-order mark and replace bytes that are not UTF-8.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec

from ...errors import InputError
from ...messages import problem

# what a msgspec decode raises on bad input: its own error, UnicodeDecodeError for bytes that are not
# UTF-8 inside a string, RecursionError for nesting deeper than the interpreter's recursion limit
# (``[[[[...`` in a stray file must not stop an ingest)
DECODE_ERRORS = (msgspec.DecodeError, UnicodeDecodeError, RecursionError)


def json_value(data: bytes | str) -> Any:
    """JSON text as Python objects; ``ValueError`` when it is not JSON (or nests too deep)."""
    try:
        return json.loads(data)
    except RecursionError as exc:
        raise ValueError("nested too deeply") from exc


def _text(data: bytes) -> str:
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    return data.decode("utf-8", errors="replace")


def load_json(path: Path, kind: str, obj: bool = False) -> Any:
    """A small JSON file as Python objects; ``InputError`` when it is empty, unreadable, not JSON,
    or (``obj=True``) not a JSON object. ``kind`` names the file in the messages."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(str(path), problem("cannot_read_kind", kind=kind, detail=exc.strerror or exc)) from exc
    if not data.strip():
        raise InputError(str(path), problem("empty_kind", kind=kind))
    try:
        out = json_value(_text(data))
    except ValueError as exc:
        raise InputError(str(path), problem("not_json_kind", kind=kind, detail=exc)) from exc
    if obj and not isinstance(out, dict):
        raise InputError(str(path), problem("not_object", kind=kind))
    return out


def peek_json(path: Path) -> Any:
    """A small JSON file as Python objects, or None when it cannot be read or is not JSON."""
    try:
        return json_or_none(path.read_bytes())
    except OSError:
        return None


def json_or_none(data: bytes) -> Any:
    """The bytes of a small JSON file as Python objects, or None when they are not JSON."""
    try:
        return json_value(_text(data))
    except ValueError:
        return None


def decode_or_none(decoder: msgspec.json.Decoder, raw: msgspec.Raw | bytes) -> Any:
    """``raw`` decoded by ``decoder``; None when it is empty (absent) or does not decode."""
    if not len(raw):
        return None
    try:
        return decoder.decode(raw)
    except DECODE_ERRORS:
        return None
