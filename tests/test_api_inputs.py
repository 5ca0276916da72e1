"""The Python API's refusals of bad arguments: each a ``HwBackendsError`` that says what was
wrong, what was expected and the fix."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from coretest import needs_plugins

import hwbackends
from hwbackends import Host, explain
from hwbackends._base.errors import (
    BackendNotFoundError,
    HostFileError,
    UnsupportedSettingError,
    VisibilityError,
)
from hwbackends.accelerate import training_kwargs
from hwbackends.visibility import visibility_env

ROOT = Path(__file__).resolve().parent.parent
PLUGINS = ROOT / "plugins"
H100 = str(PLUGINS / "hwbackends-cuda" / "tests" / "hosts" / "h100-sxm-8.json")

pytestmark = needs_plugins


def test_python_api_refusals_are_clear() -> None:
    with pytest.raises(HostFileError, match=r"host='file.json' is not a Host.*Host.from_file"):
        explain(host="file.json")  # type: ignore[arg-type]
    with pytest.raises(UnsupportedSettingError, match="report_to=5 is not a reporter name"):
        training_kwargs(report_to=5, host=Host.from_file(H100), env={})  # type: ignore[arg-type]
    with pytest.raises(BackendNotFoundError, match="backend name '' is empty"):
        hwbackends.get("")
    with pytest.raises(VisibilityError) as exc:
        visibility_env("cdua", [0], host=Host.from_file(H100), env={})
    msg = str(exc.value)
    assert msg.count("Expected") == 1 and msg.count("Fix:") == 1, msg
    assert "did you mean 'cuda'" in msg
    assert not re.search(r"pip install hwbackends-\W", msg)
    assert os.environ.get("HWBACKENDS_BACKEND") is None
