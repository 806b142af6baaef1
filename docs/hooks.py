"""MkDocs hooks: the course's pages (:mod:`course_pages`), a Markdown copy of every page beside its HTML, ``llms.txt``.

``page.md`` sits next to ``page.html`` in the built site: the page's own Markdown, with the changelog's
snippet filled in and, for the API reference, the docstrings of ``agentnb.__all__`` written out (its source is
only ``::: name`` directives). ``llms.txt`` (https://llmstxt.org) is the site's map for coding assistants:
the title, one line on the project, then a link to each page's Markdown copy, section by section.
"""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # mkdocs loads this file by path; course_pages.py is beside it
import course_pages as course  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SNIPPET = re.compile(r'^--8<-- "([^"]+)"\s*$', re.MULTILINE)
DIRECTIVE = re.compile(r"^::: agentnb\.(?:[\w.]+\.)?(\w+)[ \t]*$(?:\n {4}.*$)*", re.MULTILINE)
_copies: dict[str, str] = {}


def _reference(name: str) -> str:
    import agentnb

    obj = getattr(agentnb, name)
    doc = inspect.getdoc(obj) or ""
    try:
        signature = f"`{name}{inspect.signature(obj)}`\n\n" if callable(obj) else ""
    except (TypeError, ValueError):
        signature = ""
    return f"### `agentnb.{name}`\n\n{signature}{doc}\n"


def _llms_txt(config: Any) -> str:
    lines = [f"# {config['site_name']}", "", f"> {config['site_description']}", ""]

    def walk(items: list[Any], depth: int) -> None:
        for item in items:
            if isinstance(item, dict):
                for title, value in item.items():
                    if isinstance(value, list):
                        lines.extend(["", f"## {title}", ""])
                        walk(value, depth + 1)
                    elif depth == 0 and lines[-1].startswith("- ") and any(x.startswith("## ") for x in lines):
                        lines.extend(["", f"## {title}", "", f"- [{title}]({value})"])
                    else:
                        lines.append(f"- [{title}]({value})")
            else:
                lines.append(f"- [{item}]({item})")

    walk(config["nav"], 0)
    return "\n".join(lines).replace("\n\n\n", "\n\n") + "\n"


def on_config(config: Any) -> Any:
    """The course's section of the nav: its overview, then one page per notebook (see :mod:`course`)."""
    config["nav"] = course.nav(config["nav"])
    return config


def on_files(files: Any, config: Any) -> Any:
    """Add the course (its notebooks, a page and an export for each) and ``llms.txt`` to the site's files.

    ``notebooks/NN_name.ipynb`` is the notebook itself, which the pages link for download; ``llms.txt`` is made
    here, from the nav, so a page may link it.
    """
    from mkdocs.structure.files import File

    for nb in course.notebooks():
        files.append(File(f"notebooks/{nb.name}", src_dir=str(ROOT), dest_dir=config["site_dir"],
                          use_directory_urls=config["use_directory_urls"]))
    for src_uri, content in course.files():
        files.append(File.generated(config, src_uri, content=content))
    files.append(File.generated(config, "llms.txt", content=_llms_txt(config)))
    return files


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    """Keep the page's Markdown, as a reader (or a model) would want it, for on_post_build."""
    text = SNIPPET.sub(lambda m: (ROOT / m.group(1)).read_text(encoding="utf-8"), markdown)
    text = DIRECTIVE.sub(lambda m: _reference(m.group(1)), text)
    _copies[page.file.src_uri] = course.as_text(page.file.src_uri, text)
    return markdown


def on_page_content(html: str, page: Any, **_: Any) -> str:
    """Put a course page's outputs in place (the Markdown holds a marker for each)."""
    return course.with_outputs(page.file.src_uri, html)


def on_post_build(config: Any, **_: Any) -> None:
    """Write each page's Markdown copy into the site."""
    site = Path(config["site_dir"])
    for src, text in _copies.items():
        (site / src).parent.mkdir(parents=True, exist_ok=True)
        (site / src).write_text(text, encoding="utf-8")


try:  # the build's own tool; the hooks above need nothing but the standard library
    import griffe
except ImportError:  # pragma: no cover - only mkdocs loads this file, with the docs extra installed
    griffe = None  # type: ignore[assignment]

if griffe is not None:

    class ExampleSections(griffe.Extension):
        """Read agentnb's Google-style ``Example:`` sections as examples (griffe knows only ``Examples:``).

        Without it the doctest lines of every public name would render as prose instead of code.
        """

        def on_instance(self, *, obj: Any, **_: Any) -> None:
            """Rename the section before griffe parses the docstring (it parses when the page renders)."""
            doc = obj.docstring
            if doc is not None and "Example:" in doc.value:
                doc.value = re.sub(r"^(\s*)Example:\s*$", r"\1Examples:", doc.value, flags=re.MULTILINE)
