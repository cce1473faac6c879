"""docs/formats.md is ours: every reference to it in the code names a section that exists."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "formats.md"
# "docs/formats.md §1.13, §2.1, §3.4" or "docs/formats.md §7.2-7.3": every § number after the name
_REF = re.compile(r"docs/formats\.md((?:[\s,]*(?:and\s+)?§\d+(?:\.\d+)*(?:-\d+(?:\.\d+)*)?)+)")
_NUM = re.compile(r"§(\d+(?:\.\d+)*)(?:-(\d+(?:\.\d+)*))?")


def _sections() -> set[str]:
    """Section numbers of the doc's headings: '## 3. msprof' -> '3', '### 3.4 ...' -> '3.4'."""
    out = set()
    for line in DOC.read_text().splitlines():
        m = re.match(r"^#{2,4} (\d+(?:\.\d+)*)\.? ", line)
        if m:
            out.add(m.group(1))
    return out


def _references() -> list[tuple[str, str]]:
    refs = []
    for path in sorted((REPO / "analyzer").rglob("*.py")) + [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = path.read_text()
        for m in _REF.finditer(text):
            for n in _NUM.finditer(m.group(1)):
                refs.extend((str(path.relative_to(REPO)), num) for num in n.groups() if num)
    return refs


def test_every_formats_reference_resolves() -> None:
    sections = _sections()
    refs = _references()
    assert len(refs) > 20, "the code cites docs/formats.md: the pattern finds no reference"
    missing = sorted({f"{where}: §{num}" for where, num in refs if num not in sections})
    assert not missing, "references to sections docs/formats.md does not have:\n" + "\n".join(missing)


def test_no_reference_to_a_formats_doc_outside_the_repository() -> None:
    """'formats.md §N' without the docs/ path pointed to a research note outside the repository."""
    bare = []
    for path in sorted((REPO / "analyzer").rglob("*.py")):
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"(?<!docs/)formats\.md", line):
                bare.append(f"{path.relative_to(REPO)}:{i}: {line.strip()}")
    assert not bare, "\n".join(bare)
