"""Every code example of the docs site and the README runs, so the docs cannot drift from the code.

Each page's ```` ```python ```` blocks run in order in one namespace (a later block may use an earlier one's
names, as a reader goes down the page), in a fresh working directory, offline: the examples use the
``ScriptedModel``, the emulator on 127.0.0.1 or files they write. A block that cannot run here (a PostgreSQL
server somewhere else, a real provider's key) is marked on the line above its fence with
``<!-- no-run: why -->``; those are counted, and their number may not grow unnoticed (``MAX_NOT_RUN``).
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^(?P<marker><!-- no-run: (?P<why>[^>]*?) -->\n)?```(?P<info>[^\n`]*)\n(?P<code>.*?)^```$",
                   re.MULTILINE | re.DOTALL)
SAVED_RUNS = """
import agentnb as anb
from pathlib import Path
Path("runs").mkdir()
for i, story in enumerate(["weather", "parallel", "calculator", "malformed", "looping"]):
    run = anb.Loop(model=anb.ScriptedModel.story(story), tools=anb.stories.tools(story)).start(story).run()
    run.transcript.save(f"runs/{story}-{i}.jsonl")
"""
A_STORE = """
store = anb.SqliteStore("shop.db", key=b"the shop's key")
loop = anb.Loop(model=anb.ScriptedModel.story("refund"), tools=anb.stories.tools("refund"), store=store)
_run = loop.start("Please refund order 42", run_id="refund-42").run()
_run.approve(_run.pending_approvals()[0].call_id)
transcript = _run.run().transcript
"""
GIVEN = {"docs/frames.md": SAVED_RUNS, "docs/scanners.md": SAVED_RUNS + A_STORE}
"""What a page takes as given before its first block (the runs, files and store a reader already has)."""

MAX_NOT_RUN = 6
"""Blocks marked ``no-run`` across all pages; raise it only with a reason on each new block."""


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    info: str
    code: str
    why: str | None


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    found = []
    for m in FENCE.finditer(text):
        line = text.count("\n", 0, m.start("info")) + 1
        found.append(Block(page, line, m.group("info").strip(), m.group("code"), m.group("why")))
    return found


def python(page: Path) -> list[Block]:
    return [b for b in blocks(page) if b.info.split(" ")[0] == "python"]


def name(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.mark.parametrize("page", [p for p in PAGES if python(p)], ids=name)
def test_the_examples_of_a_page_run_in_order(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for var in ("AGENTNB_PROVIDER", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    namespace: dict[str, object] = {"__name__": f"docs_{page.stem}"}
    ran = 0
    given = GIVEN.get(name(page))
    if given:
        exec(compile(given, f"{name(page)} (given)", "exec"), namespace)  # noqa: S102
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        for block in python(page):
            if block.why is not None:
                continue
            where = f"{name(page)}:{block.line}"
            try:
                exec(compile(block.code, where, "exec"), namespace)  # noqa: S102 - the docs' own examples
            except Exception as exc:
                raise AssertionError(f"the example at {where} fails: {type(exc).__name__}: {exc}") from exc
            ran += 1
    assert ran, f"{name(page)}: every python block is marked no-run"


def test_blocks_that_do_not_run_are_few_and_say_why() -> None:
    skipped = [b for p in PAGES for b in python(p) if b.why is not None]
    for b in skipped:
        assert len(b.why or "") >= 10, f"{name(b.page)}:{b.line}: say why the block cannot run"
    print("\n".join(f"not run: {name(b.page)}:{b.line}: {b.why}" for b in skipped))
    assert len(skipped) <= MAX_NOT_RUN, [f"{name(b.page)}:{b.line}" for b in skipped]
    total = sum(len(python(p)) for p in PAGES)
    assert total >= 20 and len(skipped) * 4 < total, (total, len(skipped))


def test_python_examples_are_fenced_as_python() -> None:
    # a ```py or ```pycon block would escape the test above
    other = [f"{name(b.page)}:{b.line} ({b.info})" for p in PAGES for b in blocks(p)
             if b.info.split(" ")[0] in {"py", "py3", "python3", "pycon", "ipython"}]
    assert not other, other


def test_the_reference_documents_exactly_the_public_names() -> None:
    import agentnb

    text = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    # by its last name: a name whose module shares it is given by its full path
    documented = re.findall(r"^::: agentnb\.(?:[\w.]+\.)?(\w+)[ \t]*$", text, re.MULTILINE)
    assert sorted(documented) == sorted(agentnb.__all__)


def test_the_course_page_lists_every_notebook() -> None:
    text = (ROOT / "docs" / "course.md").read_text(encoding="utf-8")
    notebooks = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9]*.ipynb"))
    assert notebooks and all(f"`{nb}`" in text for nb in notebooks), notebooks


def test_the_site_builds_strict_with_a_markdown_copy_of_each_page_and_llms_txt(docs_site: Path) -> None:
    """``mkdocs build --strict`` (``make docs``, the ``docs_site`` fixture): a broken link, a missing page or a bad
    docstring fails it."""
    site = docs_site
    llms = (site / "llms.txt").read_text(encoding="utf-8")
    assert llms.startswith("# agentnb\n\n> ")
    linked = re.findall(r"^- \[[^\]]+\]\(([^)]+\.md)\)$", llms, re.MULTILINE)
    pages = sorted(str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md"))
    chapters = sorted(f"course/{nb.stem}.md" for nb in (ROOT / "notebooks").glob("[0-9]*.ipynb"))
    assert sorted(linked) == sorted(pages + chapters)  # every page is in the nav, and in llms.txt
    for rel in pages + chapters:
        copy = (site / rel).read_text(encoding="utf-8")
        assert (site / rel).with_suffix(".html").is_file(), rel
        assert "--8<--" not in copy and "::: agentnb" not in copy, rel  # snippets and directives written out
        assert "<!--agentnb-output-" not in copy, rel  # a course page's outputs written out as text
    reference = (site / "reference.md").read_text(encoding="utf-8")
    assert "### `agentnb.Loop`" in reference and "### `agentnb.evaluate`" in reference and "Example" in reference
    assert "## [Unreleased]" in (site / "changelog.md").read_text(encoding="utf-8")
    for nb in (ROOT / "notebooks").glob("[0-9]*.ipynb"):
        assert (site / "notebooks" / nb.name).read_bytes() == nb.read_bytes()
    assert 'href="llms.txt"' in (site / "index.html").read_text(encoding="utf-8")  # a link the build checked


def test_the_readme_links_to_pages_and_headings_that_exist() -> None:
    """The front page's links into the docs (GitHub renders them; the site build does not see the README)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#\s]+)(?:#([^)\s]+))?\)", text)
    assert len(links) >= 12, links
    for path, anchor in links:
        assert not path.startswith(("http:", "https:")), path
        target = ROOT / path
        assert target.is_file(), path
        if anchor:
            headings = re.findall(r"^#+ (.+)$", target.read_text(encoding="utf-8"), re.MULTILINE)
            slugs = {re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-") for h in headings}
            assert anchor in slugs, (path, anchor)
    assert len(text.splitlines()) <= 150
    first_screen = "\n".join(text.splitlines()[:12])
    assert "make lab" in first_screen and "make test" in first_screen
