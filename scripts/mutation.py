#!/usr/bin/env python3
"""Mutation testing of the modules whose mistakes users cannot see.

A mistake in a visibility reader, the selection cache's fingerprint, the device of a rank,
launcher detection, version ranges, the plugin guard (and its environment guard) or the PCI
helpers plugins use gives a wrong answer that looks right.
This script plants small bugs there, one at a time, and checks that the tests covering the
module fail for each:

- comparisons flipped (``<`` / ``<=``, ``==`` / ``!=``, ``in`` / ``not in``, ``is`` / ``is not``),
- ``and`` / ``or`` swapped, a ``not`` dropped, ``+`` / ``-`` swapped,
- integer constants off by one (``n`` -> ``n + 1``, ``1`` -> ``0``), ``True`` / ``False`` swapped,
- an ``if`` test negated, or its branch dropped (the test replaced by ``False``).

Each mutant is applied to a scratch copy of ``src/`` that a scratch virtual environment
(symlinks into ``.venv``, with the core's editable path pointing at the copy) imports, so
subprocesses started by the tests see the mutant too. Only the tests mapped to the module run
(``TESTS``), under ``nice``, with a time limit per mutant (a mutant that makes them hang counts
as killed). A mutant that survives is either a missing test or equivalent to the original:
``tests/mutation-survivors.md`` lists each accepted survivor with the reason; the script
reports the survivors missing from that list.

    .venv/bin/python scripts/mutation.py                  # every module, results to stdout
    .venv/bin/python scripts/mutation.py --module versions --module guard
    .venv/bin/python scripts/mutation.py --list           # the mutants, nothing run
    .venv/bin/python scripts/mutation.py --only 'versions:_release_key:Compare#1:Eq->NotEq'

A group maps module files to their tests (``TESTS``); ``FUNCTIONS`` narrows a group to some
functions of its modules (the pci group: three helpers of larger modules). A ``.venv`` that
links another checkout's (a git worktree) works: the scratch copy's editable paths are
redirected from that checkout to the copy, and checked.

Too slow for CI (minutes per module); run it after changing one of these modules or their
tests. Exit status: 0 when every survivor is listed in the survivors file, 1 otherwise.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "hwbackends"
SURVIVORS = ROOT / "tests" / "mutation-survivors.md"

#: short name -> (module files under src/hwbackends, the tests that cover them).
#: The tests are the fast ones that check the module's behaviour; the slow end-to-end ones
#: (torchrun, the tiny model) would cost minutes per mutant for little more.
TESTS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "versions": (
        ("_base/versions.py",),
        ("tests/test_records_and_versions.py", "tests/test_accel_declarations.py"),
    ),
    "guard": (
        ("_base/guard.py",),
        (
            "tests/test_guard.py",
            "tests/test_guard_reports.py",
            "tests/test_reliability.py::test_a_batch_of_plugin_calls_survives_one_that_hangs",
            "tests/test_registry.py",
        ),
    ),
    "cache": (
        ("_selection/cache.py",),
        ("tests/test_cache.py", "tests/test_selection_snapshot.py"),
    ),
    "verdict": (
        ("_selection/verdict.py",),
        (
            "tests/test_verdicts.py",
            "tests/test_advice.py",
            "tests/test_install_story.py",
            "tests/real_machines/test_corpus.py",
        ),
    ),
    "cpuinfo": (
        ("_machine/cpuinfo.py",),
        ("tests/test_cpuinfo.py", "tests/test_root_tree.py", "tests/real_machines/test_corpus.py"),
    ),
    "accel": (
        ("_kit/accel.py",),
        ("tests/test_accel_declarations.py", "tests/real_machines/test_corpus.py"),
    ),
    "cudawheels": (
        (
            "../../plugins/hwbackends-cuda/src/hwbackends_cuda/_wheels.py",
            "../../plugins/hwbackends-cuda/src/hwbackends_cuda/_probe.py",
        ),
        (
            "plugins/hwbackends-cuda/tests/test_cuda_device_ids.py",
            "plugins/hwbackends-cuda/tests/test_cuda_hosts.py",
            "tests/real_machines/test_corpus.py",
        ),
    ),
    "target": (
        ("_selection/target.py",),
        (
            "tests/test_target_device.py",
            "tests/test_rank_devices.py",
            "tests/test_advice.py::test_torch_fix_is_the_command_for_the_backend_build",
            "tests/test_advice.py::test_torch_fix_follows_the_devices_wheel_index",
            "tests/integrations/test_simulated_hosts.py",
        ),
    ),
    "launch": (
        ("_integrations/launch.py",),
        (
            "tests/test_rank_devices.py",
            "tests/test_launch_detection.py",
            "tests/test_launch_env.py",
        ),
    ),
    "pci": (
        ("plugin.py", "_machine/evidence.py", "_base/files.py"),  # only FUNCTIONS["pci"]
        (
            "tests/test_plugin_helpers.py",
            "tests/test_evidence.py",
            "tests/test_host.py",
        ),
    ),
    "visibility": (
        (
            "_visibility/base.py",
            "_visibility/cuda.py",
            "_visibility/rocm.py",
            "_visibility/generic.py",
            "_visibility/xpu.py",
            "_visibility/neuron.py",
            "_visibility/tpu.py",
            "_visibility/hpu.py",
            "_visibility/npu.py",
        ),
        ("tests/visibility",),
    ),
}

#: Groups that mutate only some functions of their modules: the names as mutant ids show them
#: (``module.function`` in a group of several modules; a method is ``Class.method``, and a
#: function's nested functions count as its own). Other groups mutate every function.
FUNCTIONS: dict[str, tuple[str, ...]] = {
    # the PCI helpers plugins use: ids from host files and sysfs, bus ids, /dev node patterns
    # (plugin.normalise_bus_id only calls the reader's; match_node is re-exported by plugin)
    "pci": ("plugin.pci_id", "evidence.normalise_bus_id", "files.match_node"),
}

#: Mutants drawn per module group by default (a seeded sample, the same every run);
#: ``--sample 0`` runs every mutation point (~800: hours on a small machine).
SAMPLE = 25

_SWAP_CMP: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}


@dataclass(frozen=True)
class Mutant:
    group: str
    path: str  # under src/hwbackends
    ident: str  # stable: group:function:kind#n:change
    line: int
    start: int  # byte offsets into the file
    end: int
    replacement: str
    before: str  # the original text of the span, for the report


def _offsets(source: bytes) -> list[int]:
    out, pos = [0], 0
    for line in source.split(b"\n"):
        pos += len(line) + 1
        out.append(pos)
    return out


class _Finder(ast.NodeVisitor):
    """Every mutation point of one module, named by its function and a per-kind counter."""

    def __init__(self, group: str, rel: str, source: bytes) -> None:
        self.group, self.rel, self.source = group, rel, source
        self.lines = _offsets(source)
        self.scope: list[str] = []
        self.counts: dict[tuple[str, str], int] = {}
        self.found: list[Mutant] = []
        self.skip_lines = {
            i + 1
            for i, text in enumerate(source.decode("utf-8").splitlines())
            if "pragma: no mutate" in text
        }

    def _span(self, node: ast.AST) -> tuple[int, int]:
        start = self.lines[node.lineno - 1] + node.col_offset  # type: ignore[attr-defined]
        end = self.lines[node.end_lineno - 1] + node.end_col_offset  # type: ignore[attr-defined]
        return start, end

    def _add(self, node: ast.AST, kind: str, change: str, replacement: str) -> None:
        line = node.lineno  # type: ignore[attr-defined]
        if line in self.skip_lines:
            return
        func = ".".join(self.scope) or "<module>"
        if len(TESTS[self.group][0]) > 1:  # several modules in the group: name the module
            func = f"{Path(self.rel).stem}.{func}"
        wanted = FUNCTIONS.get(self.group)
        if wanted is not None and not any(func == w or func.startswith(w + ".") for w in wanted):
            return  # outside the group's functions (numbering is per function: ids stay put)
        n = self.counts.get((func, kind), 0) + 1
        self.counts[(func, kind)] = n
        start, end = self._span(node)
        before = self.source[start:end].decode("utf-8")
        ident = f"{self.group}:{func}:{kind}#{n}:{change}"
        self.found.append(
            Mutant(self.group, self.rel, ident, line, start, end, replacement, before)
        )

    def _text(self, node: ast.AST) -> str:
        start, end = self._span(node)
        return self.source[start:end].decode("utf-8")

    # scopes ---------------------------------------------------------------------------------
    def _scoped(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.scope.append(node.name)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr) and child in getattr(node, "decorator_list", []):
                continue
            if isinstance(child, ast.arguments | ast.expr) and not isinstance(node, ast.ClassDef):
                continue  # defaults and annotations
            self.visit(child)
        self.scope.pop()

    visit_FunctionDef = _scoped
    visit_AsyncFunctionDef = _scoped
    visit_ClassDef = _scoped

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        if isinstance(test, ast.Name) and test.id == "TYPE_CHECKING":
            return  # typing-only imports
        simple = (isinstance(test, ast.Compare) and len(test.ops) == 1) or (
            isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
        )
        if not simple:  # else the same as flipping the comparison or dropping the not
            self._add(test, "If", "negated", f"(not ({self._text(test)}))")
        self._add(test, "If", "dropped", "(False)")
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        if any(
            isinstance(t, ast.Name) and t.id in ("__all__", "TYPE_CHECKING") for t in node.targets
        ):
            return
        self.generic_visit(node)

    def visit_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant):
            return  # docstrings
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        for i, op in enumerate(node.ops):
            new = _SWAP_CMP.get(type(op))
            if new is None:
                continue
            ops = list(node.ops)
            ops[i] = new()
            mutated = ast.Compare(left=node.left, ops=ops, comparators=node.comparators)
            self._add(
                node, "Compare", f"{type(op).__name__}->{new.__name__}", f"({ast.unparse(mutated)})"
            )
        self.generic_visit(node)

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        new: ast.boolop = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        mutated = ast.BoolOp(op=new, values=node.values)
        self._add(
            node,
            "BoolOp",
            f"{type(node.op).__name__}->{type(new).__name__}",
            f"({ast.unparse(mutated)})",
        )
        self.generic_visit(node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:
        if isinstance(node.op, ast.Not):
            self._add(node, "Not", "dropped", f"({self._text(node.operand)})")
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        swap = {ast.Add: ast.Sub, ast.Sub: ast.Add}.get(type(node.op))
        if swap is not None and not (
            isinstance(node.left, ast.Constant) and isinstance(node.left.value, str)
        ):
            mutated = ast.BinOp(left=node.left, op=swap(), right=node.right)
            self._add(
                node,
                "BinOp",
                f"{type(node.op).__name__}->{swap.__name__}",
                f"({ast.unparse(mutated)})",
            )
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        v = node.value
        if isinstance(v, bool):
            self._add(node, "Bool", f"{v}->{not v}", f"({not v})")
        elif isinstance(v, int):
            new = 0 if v == 1 else v + 1
            self._add(node, "Int", f"{v}->{new}", f"({new})")

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        return  # message text: the pinned-message tests judge it, not this script


def mutants(group: str, sample: int = SAMPLE) -> list[Mutant]:
    files, _tests = TESTS[group]
    out: list[Mutant] = []
    for rel in files:
        source = (SRC / rel).read_bytes()
        finder = _Finder(group, rel, source)
        finder.visit(ast.parse(source))
        for m in finder.found:
            code = source[: m.start] + m.replacement.encode("utf-8") + source[m.end :]
            try:
                compile(code, rel, "exec")
            except SyntaxError:
                continue
            out.append(m)
    if 0 < sample < len(out):
        rng = random.Random(f"hwbackends-mutation-{group}")  # the same sample every run
        keep = set(rng.sample(range(len(out)), sample))
        out = [m for i, m in enumerate(out) if i in keep]
    return out


# -- the scratch tree and environment ----------------------------------------------------------


def _scratch(base: Path, tests_from: str | None = None) -> Path:
    """A copy of the repository's sources and tests, and a venv that imports the copy.
    ``tests_from``: a git revision whose tests (``tests/``, ``conftest.py``) replace this
    checkout's, to score the tests of an earlier commit against today's mutants."""
    tree = base / "tree"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis", "*.egg-info")
    for name in ("src", "tests", "plugins", "docs", "scripts", ".ci"):
        if (ROOT / name).exists():
            shutil.copytree(ROOT / name, tree / name, ignore=ignore, symlinks=True)
    for name in ("pyproject.toml", "README.md", "mkdocs.yml", "LICENSE", "conftest.py"):
        if (ROOT / name).exists():
            shutil.copy2(ROOT / name, tree / name)
    if tests_from is not None:
        shutil.rmtree(tree / "tests")
        (tree / "conftest.py").unlink(missing_ok=True)
        git = ["git", "-C", str(ROOT), "archive", tests_from, "tests", "conftest.py"]
        archive = subprocess.run(git, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    # ``.venv`` may be a link to another checkout's (a git worktree sharing the main one's):
    # its scripts and editable paths name that checkout, which the copy must replace.
    old = (ROOT / ".venv").resolve()
    origin = old.parent
    venv = tree / ".venv"
    (venv / "bin").mkdir(parents=True)
    shutil.copy2(old / "pyvenv.cfg", venv / "pyvenv.cfg")
    for entry in (old / "bin").iterdir():
        target = venv / "bin" / entry.name
        if entry.is_symlink():
            os.symlink(os.readlink(entry), target)
            continue
        head = entry.read_bytes()[:200] if entry.is_file() else b""
        if head.startswith(f"#!{old}/bin/python".encode()):
            target.write_bytes(
                entry.read_bytes().replace(
                    f"{old}/bin/python".encode(), f"{venv}/bin/python".encode(), 1
                )
            )
            target.chmod(0o755)
        else:
            os.symlink(entry, target)
    for lib in (old / "lib").iterdir():  # lib/python3.X/site-packages
        if not (lib / "site-packages").is_dir():  # a shared library some wheel put in lib/
            (venv / "lib").mkdir(exist_ok=True)
            os.symlink(lib, venv / "lib" / lib.name)
            continue
        site_old = lib / "site-packages"
        site_new = venv / "lib" / lib.name / "site-packages"
        site_new.mkdir(parents=True)
        for entry in site_old.iterdir():
            if entry.name.startswith("_editable_impl_") and entry.suffix == ".pth":
                text = entry.read_text(encoding="utf-8").replace(f"{origin}/", f"{tree}/")
                (site_new / entry.name).write_text(text, encoding="utf-8")
            else:
                os.symlink(entry, site_new / entry.name)
    if (old / "lib64").exists() or (old / "lib64").is_symlink():
        os.symlink("lib", venv / "lib64")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HWBACKENDS_", "PYTEST_"))}
    where = subprocess.run(
        [str(venv / "bin/python"), "-c", "import hwbackends; print(hwbackends.__file__)"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
    ).stdout.strip()
    if tree.resolve() not in Path(where or "/").resolve().parents:  # a mutant nobody runs
        raise SystemExit(
            f"mutation.py: the scratch venv imports hwbackends from {where!r}, not from the "
            f"copy in {tree} (PYTHONPATH set? .venv not an editable install?)"
        )
    return tree


def _existing(tree: Path, tests: tuple[str, ...]) -> list[str]:
    """The mapped tests present in this checkout (a node id counts if its file exists)."""
    return [t for t in tests if (tree / t.partition("::")[0]).exists()]


def _run_tests(tree: Path, tests: tuple[str, ...], timeout: float) -> tuple[str, float, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HWBACKENDS_", "PYTEST_"))}
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # a mutant's bytecode must never be reused
    cmd = [
        "nice",
        "-n",
        "10",
        str(tree / ".venv/bin/python"),
        "-m",
        "pytest",
        "-x",
        "-q",
        "-p",
        "no:cacheprovider",
        "--no-header",
        "-o",
        "addopts=--import-mode=importlib --strict-markers --ignore=plugins/_template",
        *_existing(tree, tests),
    ]
    t0 = time.monotonic()
    try:
        proc = subprocess.run(
            cmd,
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            start_new_session=True,
        )
    except subprocess.TimeoutExpired as exc:
        tail = (exc.stdout or b"")[-400:]
        return "timeout", time.monotonic() - t0, tail.decode() if isinstance(tail, bytes) else tail
    took = time.monotonic() - t0
    out = (proc.stdout + proc.stderr)[-600:]
    if proc.returncode == 0:
        return "survived", took, out
    if proc.returncode in (1, 2):  # failures, or an error while collecting/importing
        return "killed", took, out
    return f"error rc={proc.returncode}", took, out


def _module_name(rel: str) -> str:
    """The import name of a mutated file: a core module (``_base/guard.py``) or a plugin's
    own (``../../plugins/hwbackends-cuda/src/hwbackends_cuda/_wheels.py``)."""
    if "/src/" in rel:
        return rel.rpartition("/src/")[2].removesuffix(".py").replace("/", ".")
    return "hwbackends." + rel.removesuffix(".py").replace("/", ".")


def _apply(tree: Path, m: Mutant | None, rel: str) -> None:
    src = SRC / rel
    dst = tree / "src" / "hwbackends" / rel
    data = src.read_bytes()
    if m is not None:
        data = _mutated(data, m)
    dst.write_bytes(data)
    cache = dst.parent / "__pycache__"
    for pyc in cache.glob(f"{dst.stem}.*.pyc") if cache.exists() else ():
        pyc.unlink()


def _mutated(source: bytes, m: Mutant) -> bytes:
    # keep the line count: later functions keep their line numbers in tracebacks
    span = source[m.start : m.end]
    pad = b"\n" * span.count(b"\n")
    text = m.replacement.encode("utf-8")
    if pad:
        text = text[:-1] + pad + text[-1:]  # inside the replacement's own parentheses
    return source[: m.start] + text + source[m.end :]


# -- in-process mode: one pytest session per module, each mutant patched into the live code --


def _code_differs(a: object, b: object) -> bool:
    ca, cb = getattr(a, "__code__", None), getattr(b, "__code__", None)
    if ca is None or cb is None:
        return False
    return (ca.co_code, ca.co_consts, ca.co_names) != (cb.co_code, cb.co_consts, cb.co_names)


class _Patch:
    """A mutant applied to an imported module: function code swapped in place (every
    reference sees it), changed module-level values rebound; ``undo`` restores both."""

    def __init__(
        self, module: object, source: bytes, *, rebind: frozenset[str] = frozenset()
    ) -> None:
        self.module = module
        self.undo_code: list[tuple[object, object]] = []
        self.undo_values: list[tuple[str, object]] = []
        ns: dict[str, object] = {
            "__name__": module.__name__,  # type: ignore[attr-defined]
            "__file__": module.__file__,  # type: ignore[attr-defined]
            "__package__": module.__package__,  # type: ignore[attr-defined]
            "__spec__": module.__spec__,  # type: ignore[attr-defined]
        }
        exec(compile(source, module.__file__, "exec"), ns)  # type: ignore[attr-defined]
        old = vars(module)
        for name, new in ns.items():
            if name.startswith("__") or name not in old:
                continue
            cur = old[name]
            if isinstance(cur, type) and isinstance(new, type):
                for attr, nv in vars(new).items():
                    ov = vars(cur).get(attr)
                    for o, n in _functions(ov, nv):
                        self._swap(o, n)
            elif callable(cur) and hasattr(cur, "__code__"):
                self._swap(cur, new)
            elif name in rebind:
                # a module-level constant the mutant changed; never the module's state (its
                # locks, pools and registries), which a fresh execution would replace
                try:
                    same = bool(cur == new)
                except Exception:
                    same = False
                if not same:
                    self.undo_values.append((name, cur))
                    old[name] = new

    def _swap(self, old: object, new: object) -> None:
        oc, nc = getattr(old, "__code__", None), getattr(new, "__code__", None)
        if oc is None or nc is None or oc.co_freevars != nc.co_freevars:
            return  # generated code (a record's __init__): not a mutation point, not swappable
        if _code_differs(old, new):
            self.undo_code.append((old, old.__code__))  # type: ignore[attr-defined]
            old.__code__ = new.__code__  # type: ignore[attr-defined]

    @property
    def changed(self) -> bool:
        return bool(self.undo_code or self.undo_values)

    def undo(self) -> None:
        for fn, code in self.undo_code:
            fn.__code__ = code  # type: ignore[attr-defined]
        for name, value in self.undo_values:
            vars(self.module)[name] = value


def _assigned_at(path: Path, line: int) -> frozenset[str]:
    """The names a module-level assignment covering ``line`` binds (a mutated constant)."""
    names: set[str] = set()
    for node in ast.parse(path.read_bytes()).body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and (
            node.lineno <= line <= (node.end_lineno or node.lineno)
        ):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                names |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
    return frozenset(names)


def _functions(old: object, new: object) -> list[tuple[object, object]]:
    pairs = []
    for get in (
        lambda x: x,
        lambda x: getattr(x, "__func__", None),
        lambda x: getattr(x, "fget", None),
        lambda x: getattr(x, "fset", None),
    ):
        o, n = get(old), get(new)
        if o is not None and n is not None and hasattr(o, "__code__") and hasattr(n, "__code__"):
            pairs.append((o, n))
    return pairs


def _child(
    group: str, ids: list[str], results: Path, limit: float, skip_baseline: bool = False
) -> int:
    """Run inside the scratch venv: collect the group's tests once, then each mutant."""
    import importlib
    import signal

    import pytest
    from _pytest.runner import runtestprotocol

    _files, tests = TESTS[group]
    todo = [m for m in mutants(group, 0) if m.ident in set(ids)]

    class Hang(BaseException):
        pass

    def alarm(signum: int, frame: object) -> None:
        raise Hang()

    signal.signal(signal.SIGALRM, alarm)

    last_failure = [""]

    def run_items(items: list[pytest.Item]) -> tuple[bool, str]:
        for item in items:
            reports = runtestprotocol(item, nextitem=None, log=False)
            failed = [r for r in reports if r.failed]
            if failed:
                last_failure[0] = str(failed[0].longrepr)[-1500:]
                return False, item.nodeid
        return True, ""

    class Runner:
        @pytest.hookimpl(tryfirst=True)
        def pytest_runtestloop(self, session: pytest.Session) -> bool:
            items = list(session.items)
            with results.open("a", encoding="utf-8") as out:
                # without any mutant every test must pass (a flaky one is tried twice more;
                # one that keeps failing is left out and reported, it can kill nothing)
                for item in list(items) if not skip_baseline else ():
                    if not any(run_items([item])[0] for _ in range(3)):
                        out.write(
                            json.dumps({"left_out": item.nodeid, "why": last_failure[0]}) + "\n"
                        )
                        items.remove(item)
                for m in todo:
                    out.write(json.dumps({"start": m.ident}) + "\n")
                    out.flush()
                    module = importlib.import_module(_module_name(m.path))
                    t0 = time.monotonic()
                    try:
                        patch = _Patch(
                            module,
                            _mutated((SRC / m.path).read_bytes(), m),
                            rebind=_assigned_at(SRC / m.path, m.line),
                        )
                    except BaseException as exc:  # the mutated module does not even load
                        out.write(
                            json.dumps(
                                {
                                    "id": m.ident,
                                    "outcome": "killed",
                                    "by": f"import: {exc!r}"[:200],
                                    "seconds": 0,
                                }
                            )
                            + "\n"
                        )
                        continue
                    if not patch.changed:
                        outcome, by = "not applicable", "module-level code run once at import"
                    else:
                        stem = Path(m.path).stem  # that module's own tests first: quick kills
                        order = sorted(items, key=lambda i: stem not in i.nodeid)
                        signal.setitimer(signal.ITIMER_REAL, limit)
                        try:
                            ok, by = run_items(order)
                            outcome = "survived" if ok else "killed"
                        except Hang:
                            outcome, by = "timeout", ""
                        finally:
                            signal.setitimer(signal.ITIMER_REAL, 0)
                            patch.undo()
                    rec = {"id": m.ident, "outcome": outcome, "by": by,
                           "seconds": round(time.monotonic() - t0, 1)}  # fmt: skip
                    if outcome == "killed":  # the failure's end: a kill by an unrelated test
                        rec["why"] = last_failure[0][-400:]  # is a flaky test, not a kill
                    out.write(json.dumps(rec) + "\n")
                    out.flush()
                    if outcome != "survived":
                        # The process was clean before this mutant (the previous check passed),
                        # so its verdict stands; but a failing or hanging test may have left
                        # state behind (an environment variable, a worker): the killing test
                        # must pass again without the mutant, else the rest go to a new process.
                        by_items = [i for i in items if i.nodeid == by]
                        if outcome == "timeout" or not run_items(by_items)[0]:
                            return True
            return True

    args = [
        "-q",
        "-p",
        "no:cacheprovider",
        "--no-header",
        "-o",
        "addopts=--import-mode=importlib --strict-markers --ignore=plugins/_template",
        *_existing(Path.cwd(), tests),
    ]
    pytest.main(args, plugins=[Runner()])
    return 0


def _run_inprocess(
    tree: Path, group: str, todo: list[Mutant], limit: float
) -> list[dict[str, object]]:
    """Run ``_child`` in the scratch tree, restarting it after a crash, a hang or pollution."""
    done: dict[str, dict[str, object]] = {}
    left = [m.ident for m in todo]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HWBACKENDS_", "PYTEST_"))}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    first = True
    while left:
        results = tree / f"results-{group}.jsonl"
        results.unlink(missing_ok=True)
        ids = tree / f"ids-{group}.json"
        ids.write_text(json.dumps(left), encoding="utf-8")
        cmd = [
            "nice",
            "-n",
            "10",
            str(tree / ".venv/bin/python"),
            str(tree / "scripts/mutation.py"),
            "--child",
            group,
            "--ids",
            str(ids),
            "--results",
            str(results),
            "--timeout",
            str(limit),
            *([] if first else ["--again"]),
        ]
        with contextlib.suppress(subprocess.TimeoutExpired):
            subprocess.run(
                cmd, cwd=tree, env=env, capture_output=True, timeout=limit * (len(left) + 2) + 300
            )
        first = False  # the unmutated tests passed once: a restarted process skips that run
        started = None
        lines = results.read_text(encoding="utf-8").splitlines() if results.exists() else []
        for line in lines:
            rec = json.loads(line)
            if "left_out" in rec:
                print(f"{group}: left out {rec['left_out']}: it fails without any mutant\n"
                      f"{rec['why']}")  # fmt: skip
                continue
            if "start" in rec:
                started = rec["start"]
                continue
            done[str(rec["id"])] = rec
            started = None
        if started is not None:  # the process died or hung inside this mutant
            done[started] = {"id": started, "outcome": "timeout", "by": "process", "seconds": 0}
        new_left = [i for i in left if i not in done]
        if len(new_left) == len(left):  # no progress: give the first one up as an error
            done[left[0]] = {"id": left[0], "outcome": "error", "by": "no result", "seconds": 0}
            new_left = left[1:]
        left = new_left
        for i, rec in done.items():
            if "printed" not in rec:
                rec["printed"] = True
                print(f"{rec['outcome']:9} {rec.get('seconds', 0):5}s {i}", flush=True)
    out = []
    for m in todo:
        rec = dict(done[m.ident])
        rec.pop("printed", None)
        rec.update(file=m.path, line=m.line, before=m.before, after=m.replacement)
        out.append(rec)
    return out


def _accepted() -> dict[str, str]:
    """Survivors listed in tests/mutation-survivors.md with their reason."""
    out: dict[str, str] = {}
    if not SURVIVORS.exists():
        return out
    for line in SURVIVORS.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0].startswith("`") and cells[0].endswith("`"):
            out[cells[0].strip("`")] = cells[-1]
    return out


def _worker_trees(base: Path, n: int, tests_from: str | None) -> Iterator[Path]:
    for i in range(n):
        yield _scratch(base / f"w{i}", tests_from)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--module", action="append", choices=sorted(TESTS), help="repeatable")
    p.add_argument("--only", action="append", help="mutant id (repeatable)")
    p.add_argument("--list", action="store_true", help="list the mutants; run nothing")
    p.add_argument(
        "--isolated",
        action="store_true",
        help="one pytest process per mutant (slow; subprocesses of the tests see the "
        "mutant too) instead of patching the mutant into one session per module",
    )
    p.add_argument("--jobs", type=int, default=1, help="--isolated: mutants run at once")
    p.add_argument(
        "--timeout",
        type=float,
        default=0,
        help="seconds per mutant (default: 4x the unmutated run, at least 60)",
    )
    p.add_argument("--json", type=Path, help="write every result to this file")
    p.add_argument(
        "--sample",
        type=int,
        default=SAMPLE,
        help=f"mutants per module group (default {SAMPLE}; 0: all)",
    )
    p.add_argument(
        "--tests-from",
        metavar="REV",
        help="run the tests of this git revision (the score before a change)",
    )
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--ids", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--results", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--again", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return _child(
            args.child, json.loads(args.ids.read_text()), args.results, args.timeout, args.again
        )
    groups = args.module or sorted(TESTS)
    todo = [m for g in groups for m in mutants(g, 0 if args.only else args.sample)]
    if args.only:
        todo = [m for m in todo if m.ident in set(args.only)]
    if args.list:
        for m in todo:
            print(f"{m.ident}  {m.path}:{m.line}  {m.before!r} -> {m.replacement!r}")
        print(f"{len(todo)} mutants")
        return 0
    base = Path(tempfile.mkdtemp(prefix="hwb-mutation-"))
    results: list[dict[str, object]] = []
    t_start = time.monotonic()
    try:
        trees = list(
            _worker_trees(base, max(1, args.jobs) if args.isolated else 1, args.tests_from)
        )
        limits: dict[str, float] = {}
        for g in groups:
            if not any(m.group == g for m in todo):
                continue
            if not args.isolated:  # the child checks the unmutated tests itself
                limits[g] = args.timeout or 60.0
                continue
            files, tests = TESTS[g]
            for rel in files:
                _apply(trees[0], None, rel)
            outcome, took, out = _run_tests(trees[0], tests, 1800)
            if outcome != "survived":
                print(f"{g}: the tests fail without any mutant ({outcome}):\n{out}")
                return 2
            limits[g] = args.timeout or max(60.0, 4 * took)
            print(
                f"{g}: unmutated tests pass in {took:.0f} s; limit {limits[g]:.0f} s per mutant",
                flush=True,
            )
        if not args.isolated:
            for g in groups:
                mine = [m for m in todo if m.group == g]
                if mine:
                    results += _run_inprocess(trees[0], g, mine, limits[g])
        else:
            free = list(trees)

            def one(m: Mutant) -> dict[str, object]:
                tree = free.pop()
                try:
                    _apply(tree, m, m.path)
                    outcome, took, out = _run_tests(tree, TESTS[m.group][1], limits[m.group])
                finally:
                    _apply(tree, None, m.path)
                    free.append(tree)
                r = {
                    "id": m.ident,
                    "file": m.path,
                    "line": m.line,
                    "before": m.before,
                    "after": m.replacement,
                    "outcome": outcome,
                    "seconds": round(took, 1),
                }
                if outcome != "killed":
                    r["tail"] = out
                print(f"{outcome:9} {took:5.0f}s {m.ident} ({m.path}:{m.line})", flush=True)
                return r

            with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
                results = list(pool.map(one, todo))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")
    return _report(groups, results, time.monotonic() - t_start)


def _report(groups: list[str], results: list[dict[str, object]], seconds: float) -> int:
    accepted = _accepted()
    counted = [r for r in results if r["outcome"] != "not applicable"]
    print(
        f"\n{len(results)} mutants in {seconds / 60:.0f} min; "
        f"{len(results) - len(counted)} not applicable in this mode"
    )
    print("module       killed / total   score")
    for g in groups:
        rs = [r for r in counted if str(r["id"]).startswith(g + ":")]
        killed = sum(r["outcome"] in ("killed", "timeout") for r in rs)
        if rs:
            print(f"{g:12} {killed:6} / {len(rs):<5}   {100 * killed / len(rs):5.1f} %")
    killed_all = sum(r["outcome"] in ("killed", "timeout") for r in counted)
    if counted:
        print(
            f"{'all':12} {killed_all:6} / {len(counted):<5}   "
            f"{100 * killed_all / len(counted):5.1f} %"
        )
    alive = [r for r in counted if r["outcome"] == "survived"]
    untriaged = [r for r in alive if r["id"] not in accepted]
    for r in alive:
        why = accepted.get(str(r["id"]), "NOT TRIAGED")
        print(
            f"survivor {r['id']} ({r['file']}:{r['line']}: {r['before']!r} -> {r['after']!r}): "
            f"{why}"
        )
    errors = [r for r in counted if str(r["outcome"]).startswith("error")]
    for r in errors:
        print(f"error {r['id']}: {r['outcome']} {r.get('by', '')}\n{r.get('tail', '')}")
    return 1 if untriaged or errors else 0


if __name__ == "__main__":
    sys.exit(main())
