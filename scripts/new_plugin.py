#!/usr/bin/env python3
"""Create a new backend distribution from plugins/_template/.

    python scripts/new_plugin.py acme --vendor acme --device acme --package torch-acme \
        --display "ACME NPU" [--dest plugins]

The result passes the hwbackends conformance kit before any edit beyond its facts.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parent.parent / "plugins" / "_template"


def _identifier(text: str) -> str:
    if not text.isidentifier() or not text.islower():
        raise SystemExit(
            f"new_plugin: {text!r} is not a valid backend name; expected a lower-case Python "
            "identifier such as 'acme'"
        )
    return text


def create(name: str, *, vendor: str, device: str, package: str, display: str, dest: Path) -> Path:
    """Copy the template to ``dest/hwbackends-NAME`` with every marker replaced."""
    _identifier(name)
    target = dest / f"hwbackends-{name}"
    if target.exists():
        raise SystemExit(f"new_plugin: {target} already exists; choose another name or remove it")
    replacements = {
        "REPLACE_CLASS": name.title().replace("_", ""),
        "REPLACE_DISPLAY": display,
        "REPLACE_VENDOR": vendor,
        "REPLACE_DEVICE": device,
        "REPLACE_PACKAGE": package,
        "REPLACE": name,
    }
    for src in sorted(TEMPLATE.rglob("*")):
        if "__pycache__" in src.parts or src.suffix == ".pyc":
            continue
        rel = str(src.relative_to(TEMPLATE))
        for marker, value in replacements.items():
            rel = rel.replace(marker, value)
        out = target / rel
        if src.is_dir():
            out.mkdir(parents=True, exist_ok=True)
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        text = src.read_text(encoding="utf-8")
        for marker, value in replacements.items():
            text = text.replace(marker, value)
        out.write_text(text, encoding="utf-8")
        shutil.copymode(src, out)
    return target


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("name", help="backend name: the entry-point name, e.g. acme")
    p.add_argument("--vendor", help="vendor key of its host devices (default: NAME)")
    p.add_argument("--device", help="torch device type (default: NAME)")
    p.add_argument("--package", help="distribution that registers the device (default: torch-NAME)")
    p.add_argument("--display", help="human name (default: NAME upper-cased)")
    p.add_argument("--dest", type=Path, default=TEMPLATE.parent, help="where to create it")
    a = p.parse_args(argv)
    target = create(
        a.name,
        vendor=a.vendor or a.name,
        device=a.device or a.name,
        package=a.package or f"torch-{a.name}",
        display=a.display or a.name.upper(),
        dest=a.dest,
    )
    print(
        f"created {target}; next: edit src/hwbackends_{a.name}/_facts.py, then "
        f"pip install -e {target} && pytest {target}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
