"""Run every code example of the documentation in ``docs/**/*.md``.

* ```python blocks run in a subprocess with this interpreter; they must exit 0.
* ```console / ```bash blocks: lines starting with ``$ `` are commands, the other lines are
  output. A command is ``hwbackends ...`` (optionally after ``KEY=VALUE`` words) or
  ``python scripts/new_plugin.py ...`` (run in a scratch copy of the template). The exit code
  must be 0, or the one given by ``<!-- expect-exit: N -->`` before the block, and every shown
  output line must appear in stdout + stderr (whitespace runs compared as one space).
* Blocks of any other language (``text``, ``json``) are not run and not collected. A block
  preceded by ``<!-- no-test: REASON -->`` is collected as a skip that shows the reason; the
  reason is required.
  A block preceded by ``<!-- needs: torch -->`` names what it imports (documentation
  only: a missing module is a failure, as for every test).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from coretest import as_installed

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
BIN = Path(sys.executable).parent
RUN_LANGS = {"python", "console", "bash", "shell", "sh"}
_FENCE = re.compile(r"^```([\w-]*)\s*$")
_MARK = re.compile(r"^<!--\s*(no-test|expect-exit|needs)\s*:?\s*(.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    lang: str
    code: str
    skip: str | None
    exit_code: int
    needs: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(DOCS).as_posix()}:{self.line}"


def extract(path: Path) -> list[Block]:
    """The fenced blocks of one page, with the markers written just before them."""
    blocks: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    marks: dict[str, str] = {}
    while i < len(lines):
        m = _FENCE.match(lines[i])
        mark = _MARK.match(lines[i])
        if mark:
            marks[mark.group(1)] = mark.group(2)
        elif m:
            start = i
            body: list[str] = []
            i += 1
            while i < len(lines) and lines[i].rstrip() != "```":
                body.append(lines[i])
                i += 1
            blocks.append(
                Block(
                    path=path,
                    line=start + 1,
                    lang=m.group(1).lower(),
                    code="\n".join(body) + "\n",
                    skip=marks.get("no-test"),
                    exit_code=int(marks.get("expect-exit", "0") or 0),
                    needs=tuple(marks.get("needs", "").replace(",", " ").split()),
                )
            )
            marks = {}
        elif lines[i].strip():
            marks = {}
        i += 1
    return blocks


def all_blocks() -> list[Block]:
    return [b for p in sorted(DOCS.rglob("*.md")) for b in extract(p)]


def _clean_env() -> dict[str, str]:
    """This environment without variables that would change what the examples see."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("HWBACKENDS_")
        and not k.endswith(("_VISIBLE_DEVICES", "_VISIBLE_CORES", "_VISIBLE_CHIPS"))
        and k
        not in {
            "CUDA_DEVICE_ORDER",
            "ZE_AFFINITY_MASK",
            "ONEAPI_DEVICE_SELECTOR",
            "LOCAL_RANK",
            "WORLD_SIZE",
            "RANK",
        }
    }
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["NO_COLOR"] = "1"
    env["HF_HUB_OFFLINE"] = "1"
    env["TRANSFORMERS_OFFLINE"] = "1"
    env["PYTHONWARNINGS"] = "ignore"
    return env


def _norm(text: str) -> str:
    return " ".join(text.split())


def _commands(block: Block) -> list[tuple[str, list[str]]]:
    """(command, shown output lines) pairs of a console block."""
    out: list[tuple[str, list[str]]] = []
    for line in block.code.splitlines():
        if line.startswith("$ "):
            out.append((line[2:].strip(), []))
        elif out:
            out[-1][1].append(line)
        elif line.strip():
            pytest.fail(
                f"{block.id}: output before any `$ ` command; mark the block "
                "<!-- no-test: REASON --> or use ```text",
                pytrace=False,
            )
    if not out:
        pytest.fail(
            f"{block.id}: a {block.lang} block with no `$ ` command line; use ```text or "
            "<!-- no-test: REASON -->",
            pytrace=False,
        )
    return out


def _sandbox(tmp: Path) -> Path:
    """A scratch tree with scripts/new_plugin.py and plugins/_template, for new_plugin."""
    (tmp / "scripts").mkdir()
    shutil.copy2(ROOT / "scripts" / "new_plugin.py", tmp / "scripts" / "new_plugin.py")
    shutil.copytree(
        ROOT / "plugins" / "_template",
        tmp / "plugins" / "_template",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    return tmp


def run_console(block: Block, tmp: Path) -> None:
    commands = _commands(block)
    env = _clean_env()
    cwd = ROOT
    if any("scripts/new_plugin.py" in c for c, _ in commands):
        cwd = _sandbox(tmp)
    for command, shown in commands:
        words = shlex.split(command)
        extra: dict[str, str] = {}
        while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
            k, _, v = words.pop(0).partition("=")
            extra[k] = v
        if words[:1] == ["hwbackends"]:
            argv = [str(BIN / "hwbackends"), *words[1:]]
        elif words[:2] == ["python", "scripts/new_plugin.py"]:
            argv = [sys.executable, *words[1:]]
        else:
            pytest.fail(
                f"{block.id}: cannot run {command!r}: only `hwbackends ...` and "
                "`python scripts/new_plugin.py ...` run here; mark the block "
                "<!-- no-test: REASON -->",
                pytrace=False,
            )
        proc = subprocess.run(
            argv,
            cwd=cwd,
            env={**env, **extra},
            capture_output=True,
            text=True,
            timeout=600,
        )
        output = proc.stdout + proc.stderr
        assert proc.returncode == block.exit_code, (
            f"{block.id}: `{command}` exited {proc.returncode}, expected {block.exit_code}\n"
            f"{output}"
        )
        got = _norm(output)
        for line in shown:
            if line.strip() and line.strip() != "...":
                assert _norm(as_installed(line)) in got, (
                    f"{block.id}: `{command}` did not print the line shown in the docs:\n"
                    f"  {line.strip()}\n--- actual output ---\n{output}"
                )


def run_python(block: Block, tmp: Path) -> None:
    script = tmp / "example.py"
    script.write_text(block.code, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=ROOT,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == block.exit_code, (
        f"{block.id}: the example exited {proc.returncode}\n{proc.stdout}{proc.stderr}"
    )


BLOCKS = all_blocks()
# Only runnable blocks are tests: ``text``/``json`` blocks are shown, not run, so they are not
# collected at all; a ``<!-- no-test: REASON -->`` block is collected as a skip with its reason.
RUNNABLE = [b for b in BLOCKS if b.lang in RUN_LANGS]


def test_the_docs_have_examples() -> None:
    assert sum(1 for b in RUNNABLE if b.skip is None) >= 20


def test_every_no_test_marker_gives_a_reason() -> None:
    assert [b.id for b in BLOCKS if b.skip is not None and not b.skip.strip()] == []


def test_a_no_test_marker_is_on_a_runnable_block() -> None:
    """A marker before a ``text`` block would skip nothing: it is a mistake."""
    assert [b.id for b in BLOCKS if b.skip is not None and b.lang not in RUN_LANGS] == []


@pytest.mark.parametrize(
    "block",
    [
        pytest.param(b, marks=pytest.mark.skip(reason=f"{b.id}: no-test: {b.skip}"))
        if b.skip is not None
        else b
        for b in RUNNABLE
    ],
    ids=[b.id for b in RUNNABLE],
)
def test_example(block: Block, tmp_path: Path) -> None:
    for module in block.needs:
        __import__(module)  # a declared-absent module skips (conftest.py); others must import
    if block.lang == "python":
        run_python(block, tmp_path)
    else:
        run_console(block, tmp_path)
