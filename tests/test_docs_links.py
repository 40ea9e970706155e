"""Every relative link of README.md and docs/*.md points to a file that exists and, with
a ``#fragment``, to a heading (or an explicit ``id``) of that file, as GitHub names it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md")])

#: ``[text](target)`` outside code: the target up to a space or the closing parenthesis.
_LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
_CODE_SPAN = re.compile(r"`[^`\n]*`")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, markup and punctuation dropped (``-``
    and ``_`` kept), each space a ``-``."""
    text = re.sub(r"[`*]|<[^>]*>", "", heading.strip()).lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link's text stays
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The fragments a link into ``path`` may name: its headings' slugs (the n-th repeat
    of one slug gets ``-n``) and the ``id``/``name`` attributes it writes in HTML."""
    text = _FENCE.sub("", path.read_text(encoding="utf-8"))
    found: set[str] = set()
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6}\s+(.*?)\s*#*$", text, re.M):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    found.update(re.findall(r"""<[^>]+\s(?:id|name)=["']?([^"'\s>]+)""", text))
    return found


def links(path: Path) -> list[tuple[int, str]]:
    """(line, target) of every link in ``path`` outside code blocks and code spans."""
    text = path.read_text(encoding="utf-8")
    # blank out code, keeping the line count, so line numbers stay right
    text = _FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    text = _CODE_SPAN.sub("", text)
    return [
        (text.count("\n", 0, m.start()) + 1, m.group(1))
        for m in _LINK.finditer(text)
        if not re.match(r"[a-z][a-z0-9+.-]*:", m.group(1))  # http:, https:, mailto: ...
    ]


def broken(path: Path, root: Path = REPO) -> list[str]:
    """Each broken link of ``path``: ``file:line: target: why`` (``file`` from ``root``)."""
    out = []
    for line, target in links(path):
        file, _, fragment = target.partition("#")
        goal = (path.parent / file).resolve() if file else path
        where = f"{path.relative_to(root)}:{line}: {target}"
        if not goal.exists():
            out.append(f"{where}: no such file")
        elif fragment and (goal.is_dir() or fragment not in anchors(goal)):
            out.append(f"{where}: no heading or id '{fragment}' in {goal.name}")
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken(page) == []


def test_the_readme_links_to_every_page_of_docs() -> None:
    targets = {target.partition("#")[0] for _, target in links(REPO / "README.md")}
    pages = {f"docs/{p.name}" for p in (REPO / "docs").glob("*.md")}
    assert sorted(pages - targets) == []


def test_slugs_follow_github() -> None:
    assert slug("rules/agent.yaml — schema `agent`") == "rulesagentyaml--schema-agent"
    assert slug("`prefixlock diff OLD NEW`") == "prefixlock-diff-old-new"
    assert slug("Fleet store (PostgreSQL)") == "fleet-store-postgresql"


def test_a_broken_link_is_named_with_its_line(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other page\n\n## A part\n", encoding="utf-8")
    page.write_text(
        "# Title\n\n[ok](other.md#a-part) [self](#title)\n"
        "```\n[in code](nowhere.md)\n```\n"
        "[gone](missing.md) `[span](nowhere.md)`\n[bad anchor](other.md#b-part)\n"
        "[web](https://example.com/x) [bad self](#nothing)\n",
        encoding="utf-8",
    )
    assert broken(page, tmp_path) == [
        "page.md:7: missing.md: no such file",
        "page.md:8: other.md#b-part: no heading or id 'b-part' in other.md",
        "page.md:9: #nothing: no heading or id 'nothing' in page.md",
    ]
