"""Sources are public: nothing users read cites a file they do not have, and every section of
the project's own reference pages that the code cites exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("src", "plugins", "docs", "scripts", "bench")
TEXT = {".py", ".md", ".toml", ".txt", ".json", ".yml", ".yaml", ".cfg", ".sh"}
PAGES = {
    "hf-integration.md": ROOT / "docs" / "reference" / "hf-integration.md",
    "visibility.md": ROOT / "docs" / "reference" / "visibility.md",
    "spec": ROOT / "docs" / "reference" / "visibility.md",  # "spec §N" in hwbackends.visibility
}
CITE = re.compile(
    r"(hf-integration\.md|visibility\.md|\bspec)\s+((?:§[\d.]+(?:\s*[-–]\s*[\d.]+)?[,;]?\s*)+)"
)


def _files() -> list[Path]:
    out = []
    for top in SCANNED:
        for p in sorted((ROOT / top).rglob("*")):
            if p.is_file() and p.suffix in TEXT and "__pycache__" not in p.parts:
                out.append(p)
    return [*out, ROOT / "README.md", ROOT / "mkdocs.yml"]


def test_no_file_users_read_mentions_shared() -> None:
    hits = [
        f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
        for p in _files()
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if "shared/" in line
    ]
    assert not hits, "\n".join(hits[:20])


def _sections(page: Path) -> set[str]:
    found = set()
    for line in page.read_text(encoding="utf-8").splitlines():
        m = re.match(r"#{2,3} (\d+(?:\.\d+)?)\.? ", line)
        if m:
            found.add(m.group(1))
    return found


def test_every_cited_section_of_the_reference_pages_exists() -> None:
    sections = {name: _sections(page) for name, page in PAGES.items()}
    assert {"1.1", "1.5", "3.2", "4.2"} <= sections["hf-integration.md"]
    assert {"1.1", "1.2", "2.5", "7.1", "12"} <= sections["visibility.md"]
    missing = []
    cited = 0
    for p in _files():
        if p.parent == ROOT / "docs" / "reference":
            continue
        for m in CITE.finditer(p.read_text(encoding="utf-8")):
            for num in re.findall(r"\d+(?:\.\d+)?", m.group(2)):
                cited += 1
                if num not in sections[m.group(1)]:
                    missing.append(f"{p.relative_to(ROOT)}: {m.group(1)} §{num}")
    assert cited > 50  # the scan really finds the citations
    assert not missing, "\n".join(sorted(set(missing)))
