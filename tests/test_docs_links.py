"""Every relative link in README.md and docs/*.md points to a file of the repository, and
every ``#anchor`` to a heading of that file (GitHub's heading slugs); the README keeps the
set-up test command that ``.ci/run`` runs."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def slug(heading):
    """GitHub's anchor for a Markdown heading: lower case, punctuation but ``-`` and ``_``
    dropped, spaces to ``-``."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page):
    """The anchors of every heading of ``page`` (fenced code skipped)."""
    text = FENCE.sub("", page.read_text())
    return {slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", text, re.M)}


def links(page):
    """``(target, anchor)`` of every relative link of ``page`` outside fenced code."""
    text = FENCE.sub("", page.read_text())
    for m in LINK.finditer(text):
        target = m.group(1)
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        yield path, anchor


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_resolve(page):
    broken = []
    for path, anchor in links(page):
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            broken.append(f"{path}: no such file")
        elif anchor and target.suffix == ".md" and anchor not in anchors(target):
            broken.append(f"{path}#{anchor}: no such heading")
    assert not broken, f"{page.relative_to(ROOT)}: {broken}"


def test_readme_has_ci_test_command_and_stays_short():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    command = ".venv/bin/python -m pytest -q tests"
    assert command in ci and f"\n{command}\n" in readme
    assert len(readme.splitlines()) <= 160
