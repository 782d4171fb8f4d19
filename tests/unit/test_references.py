"""Every reference the project makes resolves in a clone of it, with nothing beside it.

Checked over every file of the repository (as git lists it, committed or not):

- every relative Markdown link, and its `#anchor` when it has one;
- every citation of a document in `docs/` ("docs/DESIGN.md §5", "docs/API.md \"Workloads\""),
  including the section it names;
- every "invariant N", against the numbered list in docs/DESIGN.md §3;
- every repository path quoted in code or docs (`app/api/creating.py`), which must exist
  (or be an output git ignores, such as `loadtest/reports/`);
- every `file.py:function` (or `file.py:Class.method`) stop, which must be defined there;
- no file names a place outside the repository (a sibling checkout, a machine's own paths).
"""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEXT_SUFFIXES = {".py", ".md", ".sql", ".yaml", ".yml", ".toml", ".tpl", ".txt", ".sh", ".cfg"}
TEXT_NAMES = {"Makefile", "Dockerfile", "run"}

MARKDOWN_LINK = re.compile(r"!?\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
# "docs/DESIGN.md", optionally followed by " §5", " §3, §6", " §3 to §8" or " \"Title\"".
CITATION = re.compile(
    r"(?<![\w/.-])(docs/[\w.-]+\.md)"
    r"(?P<sections>(?:,? (?:§ ?\d+|to §\d+))*)"
    r"(?: \"(?P<title>[^\"\n]+)\")?"
)
# A section sign right after a Markdown link: "[DESIGN.md](DESIGN.md) §5".
LINK_SECTIONS = re.compile(r"\]\(([^)\s#]+\.md)\)(?P<sections>(?:,? (?:§ ?\d+|to §\d+))+)")
INVARIANT = re.compile(r"\b[Ii]nvariants? (\d+(?:(?:, | and | to )\d+)*)")
REPO_PATH = re.compile(
    r"(?<![\w/.<{-])((?:app|kubesim|tests|sql|chart|loadtest|docs)/[\w./-]*[\w/])(?![\w<>{}*])"
)
PLACEHOLDER = re.compile(r"NNNN|<|\*|\{")
STOP = re.compile(r"(?<![\w/.-])((?:app|kubesim|tests|loadtest)/[\w/]+\.py):([A-Za-z_][\w.]*[\w])")


@cache
def repository_files() -> tuple[Path, ...]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return tuple(sorted(ROOT / name for name in listed.split("\0") if name))


def text_files() -> list[Path]:
    return [
        path
        for path in repository_files()
        if (path.suffix in TEXT_SUFFIXES or path.name in TEXT_NAMES) and path.is_file()
    ]


def markdown_files() -> list[Path]:
    return [path for path in text_files() if path.suffix == ".md"]


def without_code_blocks(text: str) -> str:
    """Markdown with fenced code blocks blanked (their lines kept, so line numbers hold)."""
    out, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            out.append("")
        else:
            out.append("" if fenced else line)
    return "\n".join(out)


def without_code_spans(text: str) -> str:
    """Text with inline `code` blanked to spaces (offsets kept): no link lives in code."""
    return re.sub(r"`[^`\n]*`", lambda m: " " * len(m.group()), text)


def slug(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading."""
    text = re.sub(r"[`*]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@cache
def headings(path: Path) -> tuple[str, ...]:
    text = without_code_blocks(path.read_text())
    return tuple(m.group(2).strip() for m in re.finditer(r"^(#{1,6}) +(.+)$", text, re.M))


def anchors(path: Path) -> set[str]:
    return {slug(h) for h in headings(path)}


def section_numbers(path: Path) -> set[str]:
    return {m.group(1) for h in headings(path) if (m := re.match(r"(\d+)\.", h))}


def cited_sections(sections: str) -> list[str]:
    numbers = [int(n) for n in re.findall(r"\d+", sections)]
    if " to " in sections and len(numbers) == 2:
        return [str(n) for n in range(numbers[0], numbers[1] + 1)]
    return [str(n) for n in numbers]


def line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def where(path: Path, text: str, offset: int) -> str:
    return f"{path.relative_to(ROOT)}:{line_of(text, offset)}"


def dead_markdown_links() -> list[str]:
    dead = []
    for path in markdown_files():
        text = without_code_spans(without_code_blocks(path.read_text()))
        for match in MARKDOWN_LINK.finditer(text):
            target = match.group(1)
            if re.match(r"[a-z][a-z0-9+.-]*:", target):
                continue  # http:, https:, mailto:
            file_part, _, anchor = target.partition("#")
            resolved = (path.parent / file_part).resolve() if file_part else path
            problem = None
            if not resolved.is_relative_to(ROOT):
                problem = "leaves the repository"
            elif not resolved.exists():
                problem = "does not exist"
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                problem = f"has no heading #{anchor}"
            if problem:
                dead.append(f"{where(path, text, match.start())}: {target} {problem}")
    return dead


def dead_citations() -> list[str]:
    dead = []
    for path in text_files():
        raw = path.read_text()
        text = without_code_blocks(raw) if path.suffix == ".md" else raw
        for match in CITATION.finditer(text):
            doc = ROOT / match.group(1)
            at = where(path, text, match.start())
            if not doc.is_file():
                dead.append(f"{at}: {match.group(1)} does not exist")
                continue
            missing = set(cited_sections(match.group("sections"))) - section_numbers(doc)
            if missing:
                dead.append(f"{at}: {match.group(1)} has no section §{', §'.join(sorted(missing))}")
            # A title alone names a heading; after a section it names a part of that section.
            title = match.group("title")
            if title and match.group("sections") and title not in doc.read_text():
                dead.append(f'{at}: {match.group(1)} never mentions "{title}"')
            elif (
                title
                and not match.group("sections")
                and not any(h.startswith(title) for h in headings(doc))
            ):
                dead.append(f'{at}: {match.group(1)} has no heading "{title}"')
        if path.suffix == ".md":
            for match in LINK_SECTIONS.finditer(text):
                doc = (path.parent / match.group(1)).resolve()
                if not doc.is_file():
                    continue  # reported as a dead link
                missing = set(cited_sections(match.group("sections"))) - section_numbers(doc)
                if missing:
                    at = where(path, text, match.start())
                    dead.append(f"{at}: {match.group(1)} has no section §{', §'.join(missing)}")
    return dead


def numbered_invariants() -> set[int]:
    design = (ROOT / "docs" / "DESIGN.md").read_text()
    section = design.split("\n## 3.", 1)[1].split("\n## ", 1)[0]
    return {int(n) for n in re.findall(r"^(\d+)\. ", section, re.M)}


def dead_invariants() -> list[str]:
    known = numbered_invariants()
    dead = []
    for path in text_files():
        text = path.read_text()
        for match in INVARIANT.finditer(text):
            numbers = cited_sections(match.group(1).replace(" and ", ", "))
            unknown = [n for n in numbers if int(n) not in known]
            if unknown:
                at = where(path, text, match.start())
                dead.append(f"{at}: invariant {', '.join(unknown)} is not in docs/DESIGN.md §3")
    return dead


def generated(quoted: str) -> bool:
    """A path git ignores is an output the build or a run writes (`loadtest/reports/`)."""
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", "--no-index", quoted], cwd=ROOT, check=False
    )
    return ignored.returncode == 0


def dead_paths() -> list[str]:
    dead = []
    for path in text_files():
        text = path.read_text()
        for match in REPO_PATH.finditer(text):
            quoted = match.group(1).rstrip(".")
            if PLACEHOLDER.search(text[match.start() : match.end() + 1]):
                continue
            if not (ROOT / quoted).exists() and not generated(quoted):
                dead.append(f"{where(path, text, match.start())}: {quoted} does not exist")
    return dead


def dead_stops() -> list[str]:
    dead = []
    for path in markdown_files():
        text = path.read_text()
        for match in STOP.finditer(text):
            source = ROOT / match.group(1)
            if not source.is_file():
                continue  # reported as a dead path
            code = source.read_text()
            for name in match.group(2).split("."):
                if not re.search(rf"^\s*(?:async def|def|class) {re.escape(name)}\b", code, re.M):
                    at = where(path, text, match.start())
                    dead.append(f"{at}: {match.group(1)} defines no {name}")
    return dead


# The places outside the repository this project was once written beside, spelled in pieces
# so that this file does not itself name them.
_SHARED, _WORK = r"\.\./" + "shared", "/" + "work" + "/"
OUTSIDE = re.compile(rf"(?<![\w.]){_SHARED}\b|(?<![\w.]){_WORK}")


def outside_paths() -> list[str]:
    found = []
    for path in text_files():
        if path == Path(__file__).resolve():
            continue  # the pattern itself
        text = path.read_text()
        for match in OUTSIDE.finditer(text):
            found.append(f"{where(path, text, match.start())}: names {match.group()!r}")
    return found


@pytest.mark.parametrize(
    "check",
    [
        pytest.param(dead_markdown_links, id="every relative Markdown link resolves"),
        pytest.param(dead_citations, id="every docs/ citation names a document and a section"),
        pytest.param(dead_invariants, id="every invariant cited is in the design"),
        pytest.param(dead_paths, id="every repository path quoted exists"),
        pytest.param(dead_stops, id="every file:function stop is defined"),
        pytest.param(outside_paths, id="nothing names a path outside the repository"),
    ],
)
def test_no_reference_is_dead(check: object) -> None:
    assert callable(check)
    assert check() == []


def test_the_checks_see_the_documents_they_check() -> None:
    names = {path.relative_to(ROOT).as_posix() for path in markdown_files()}

    assert {"README.md", "docs/DESIGN.md", "docs/API.md", "docs/ARCHITECTURE.md"} <= names
    assert "docs/KUBERNETES.md" in names
    assert numbered_invariants() == set(range(1, 11))
    assert "5" in section_numbers(ROOT / "docs" / "DESIGN.md")


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        pytest.param("5. Work queue and leases", "5-work-queue-and-leases", id="numbered"),
        pytest.param("Faults, stats and time (`/_sim/`)", "faults-stats-and-time-_sim", id="code"),
        pytest.param(
            "Projects — platform admin creates", "projects--platform-admin-creates", id="dash"
        ),
    ],
)
def test_anchors_are_the_ones_github_makes(heading: str, anchor: str) -> None:
    assert slug(heading) == anchor
