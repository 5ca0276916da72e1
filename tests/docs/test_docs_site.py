"""The site builds without warnings, its generated pages are current, and the plugin
template described in "Writing a backend" passes the conformance kit."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "WARNING" not in proc.stderr, proc.stderr
    assert (tmp_path / "site" / "index.html").is_file()


def test_generated_pages_are_current() -> None:
    __import__("transformers")  # the expected output was made with Transformers installed
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_docs.py"), "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr


def test_new_plugin_passes_the_conformance_kit(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    shutil.copy2(ROOT / "scripts" / "new_plugin.py", tmp_path / "scripts" / "new_plugin.py")
    shutil.copytree(
        ROOT / "plugins" / "_template",
        tmp_path / "plugins" / "_template",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    made = subprocess.run(
        [
            sys.executable,
            "scripts/new_plugin.py",
            "acme",
            "--package",
            "torch-acme",
            "--pci-vendor",
            "0x1f2a",
            "--variable",
            "ACME_VISIBLE_DEVICES",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    plugin = tmp_path / "plugins" / "hwbackends-acme"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HWBACKENDS_")}
    env["PYTHONPATH"] = str(plugin / "src")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=plugin,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
