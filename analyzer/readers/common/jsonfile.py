"""Small JSON files (metadata, ``communication*.json``, sidecars) and msgspec pieces of big ones.

- ``load_json``: a file that must be read (it is reported on the collection): ``InputError`` that
  names the problem when it is empty, unreadable or not JSON (or not an object, when asked);
- ``peek_json``: a file looked at to decide something (discovery's rank, a clock, a layout): None
  when it cannot be used;
- ``decode_or_none``: one raw JSON value of a trace (an event's ``args``) through a typed msgspec
  decoder, None when absent or not of that shape.

Both file loaders skip a UTF-8 byte-order mark and replace bytes that are not UTF-8.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec

from ...errors import InputError
from ...format import a_or_an


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
        raise InputError(str(path), f"cannot read {kind}: {exc.strerror or exc}") from exc
    if not data.strip():
        raise InputError(str(path), f"empty file: no {kind} data")
    try:
        out = json.loads(_text(data))
    except ValueError as exc:
        raise InputError(str(path), f"not valid JSON ({kind}): {exc}") from exc
    if obj and not isinstance(out, dict):
        raise InputError(str(path), f"not {a_or_an(kind)} file: the JSON is not an object")
    return out


def peek_json(path: Path) -> Any:
    """A small JSON file as Python objects, or None when it cannot be read or is not JSON."""
    try:
        return json.loads(_text(path.read_bytes()))
    except (OSError, ValueError):
        return None


def decode_or_none(decoder: msgspec.json.Decoder, raw: msgspec.Raw | bytes) -> Any:
    """``raw`` decoded by ``decoder``; None when it is empty (absent) or does not decode."""
    if not len(raw):
        return None
    try:
        return decoder.decode(raw)
    except msgspec.DecodeError:
        return None
