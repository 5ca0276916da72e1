#!/usr/bin/env python3
"""Create a new backend distribution from plugins/_template/.

    python scripts/new_plugin.py acme --vendor acme --device acme --package torch-acme \
        --display "ACME NPU" --pci-vendor 0x1f2a --variable ACME_VISIBLE_DEVICES [--dest plugins]

With ``--variable`` (a CUDA-style list of device indices) the result passes the hwbackends
conformance kit before any edit beyond its facts. Without it the visibility rule is left
undeclared and the kit fails until you declare the runtime's rule: no device could be
selected alone.
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


def _pci_id(text: str) -> int:
    try:
        value = int(text, 16)
    except ValueError:
        value = -1
    if not 0 < value <= 0xFFFF:
        raise SystemExit(
            f"new_plugin: {text!r} is not a PCI vendor id; expected 4 hex digits such as 0x1f2a "
            "(lspci -nn shows it in brackets)"
        )
    return value


def _variable(text: str) -> str:
    if not text or not text.replace("_", "A").isalnum() or text[0].isdigit() or not text.isupper():
        raise SystemExit(
            f"new_plugin: {text!r} is not an environment variable name; expected upper case "
            "such as ACME_VISIBLE_DEVICES"
        )
    return text


def sdk_module_of(package: str) -> str:
    """The import name a distribution most likely provides (torch-acme -> torch_acme)."""
    return package.strip().lower().replace("-", "_").replace(".", "_")


def create(
    name: str,
    *,
    vendor: str,
    device: str,
    package: str,
    display: str,
    dest: Path,
    pci_vendor: int | None = None,
    variable: str | None = None,
    sdk_modules: tuple[str, ...] | None = None,
) -> Path:
    """Copy the template to ``dest/hwbackends-NAME`` with every marker replaced."""
    _identifier(name)
    if variable is not None:
        _variable(variable)
    sdk = sdk_modules if sdk_modules is not None else (sdk_module_of(package),)
    target = dest / f"hwbackends-{name}"
    if target.exists():
        raise SystemExit(f"new_plugin: {target} already exists; choose another name or remove it")
    replacements = {
        "REPLACE_VISIBILITY_IMPORT": "IndexList, VisibilityRule" if variable else "VisibilityRule",
        "REPLACE_VISIBILITY": f'IndexList("{variable}")' if variable else "None",
        "REPLACE_PCI_IDS": f"(0x{pci_vendor:04X},)" if pci_vendor is not None else "()",
        # double quotes, as ruff format writes them
        "REPLACE_SDK_MODULES": "("
        + ", ".join(f'"{m}"' for m in sdk)
        + ("," if len(sdk) == 1 else "")
        + ")",
        "REPLACE_UPPER": name.upper(),
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
    p.add_argument("--pci-vendor", help="PCI vendor id of the hardware, e.g. 0x1f2a")
    p.add_argument(
        "--variable",
        help="the runtime's visibility variable, read as a CUDA-style list of device indices "
        "(e.g. ACME_VISIBLE_DEVICES); without it the rule is left for you to declare",
    )
    p.add_argument(
        "--sdk-module",
        action="append",
        help="a module of the runtime that importing the plugin must not import "
        "(default: the import name of --package)",
    )
    p.add_argument("--dest", type=Path, default=TEMPLATE.parent, help="where to create it")
    a = p.parse_args(argv)
    target = create(
        a.name,
        vendor=a.vendor or a.name,
        device=a.device or a.name,
        package=a.package or f"torch-{a.name}",
        display=a.display or a.name.upper(),
        dest=a.dest,
        pci_vendor=_pci_id(a.pci_vendor) if a.pci_vendor else None,
        variable=a.variable,
        sdk_modules=tuple(a.sdk_module) if a.sdk_module else None,
    )
    todo = "" if a.variable else "declare its visibility rule in __init__.py, "
    print(
        f"created {target}; next: {todo}edit src/hwbackends_{a.name}/_facts.py, then "
        f"pip install -e {target} && pytest {target}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
