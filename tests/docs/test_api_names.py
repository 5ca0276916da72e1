"""Every function docs/api.md lists under Integrations exists."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

API = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def test_listed_functions_exist() -> None:
    text = API.read_text()
    section = text[text.index("## Integrations") : text.index("## distributed")]
    checked = 0
    for item in re.split(r"\n- ", section):
        m = re.match(r"`(hwbackends\.\w+)`:", item)
        if not m:
            continue
        module = importlib.import_module(m.group(1))
        listed = re.findall(r"`(\w+)\(\)`", item)
        for name in listed:
            if name in ("capabilities",):  # a Backend method, named as such in the text
                continue
            assert callable(getattr(module, name, None)), f"{m.group(1)}.{name}"
            checked += 1
    assert checked >= 10
