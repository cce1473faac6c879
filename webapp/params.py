"""URL query parameters: parsing and formatting.

Every view is a link: the page layouts take the query string (``layout(**query)``) and the pages
write their state back to the address bar. Values arrive as strings (or lists when a key is
repeated); anything unusable raises :class:`~webapp.errors.BadParameter`, shown inline.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlencode

from . import lang
from .errors import BadParameter
from .labels import t

MAX_RANK_ID = 1 << 20


def single(name: str, value: Any) -> str | None:
    """The one string value of a parameter (None when absent or empty)."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        distinct = {str(v) for v in value}
        if len(distinct) > 1:
            raise BadParameter(name, list(value), t("err.twice"))
        value = next(iter(distinct), None)
        if value is None:
            return None
    text = str(value).strip()
    return text or None


def parse_int(name: str, value: Any, minimum: int | None = None, maximum: int | None = None) -> int | None:
    text = single(name, value)
    if text is None:
        return None
    try:
        number = int(text)
    except ValueError:
        raise BadParameter(name, text, t("err.not_int")) from None
    if minimum is not None and number < minimum:
        raise BadParameter(name, text, t("err.at_least", n=minimum))
    if maximum is not None and number > maximum:
        raise BadParameter(name, text, t("err.at_most", n=maximum))
    return number


def parse_choice(name: str, value: Any, choices: Iterable[str], default: str) -> str:
    text = single(name, value)
    if text is None:
        return default
    allowed = list(choices)
    if text not in allowed:
        raise BadParameter(name, text, t("err.one_of", choices=", ".join(allowed)))
    return text


def parse_ranks(name: str, value: Any) -> list[int] | None:
    """``"0,1,4-7"`` → ``[0, 1, 4, 5, 6, 7]``; ``"all"`` or absent → None (all ranks)."""
    if isinstance(value, (list, tuple)) and all(str(v).strip().lstrip("-").isdigit() for v in value):
        value = ",".join(str(v) for v in value)
    text = single(name, value)
    if text is None or text.lower() == "all":
        return None
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            a = int(lo)
            b = int(hi) if sep else a
        except ValueError:
            raise BadParameter(name, text, t("err.rank_numbers")) from None
        if a < 0 or b < a or b > MAX_RANK_ID:
            raise BadParameter(name, text, t("err.bad_range", part=repr(part)))
        if b - a > 65536:
            raise BadParameter(name, text, t("err.long_range", part=repr(part)))
        out.update(range(a, b + 1))
    if not out:
        raise BadParameter(name, text, t("err.no_rank"))
    return sorted(out)


def format_ranks(ranks: Iterable[int] | None) -> str | None:
    """``[0, 1, 2, 3, 7]`` → ``"0-3,7"`` (None for all ranks)."""
    if ranks is None:
        return None
    rs = sorted({int(r) for r in ranks})
    if not rs:
        return None
    parts: list[str] = []
    start = prev = rs[0]
    for r in rs[1:] + [None]:  # type: ignore[list-item]
        if r is not None and r == prev + 1:
            prev = r
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if r is not None:
            start = prev = r
    return ",".join(parts)


def query_string(params: Mapping[str, Any]) -> str:
    """``?a=1&b=x`` from the non-empty values (empty string when nothing is set), with the
    language the request's URL chose (``lang=zh``) unless ``params`` say: every link the app
    writes keeps it."""
    clean = {k: v for k, v in params.items() if v is not None and v != "" and v != []}
    if lang.PARAM not in params and lang.chosen() is not None:
        clean[lang.PARAM] = lang.chosen()
    return "?" + urlencode(clean, safe=",:") if clean else ""
