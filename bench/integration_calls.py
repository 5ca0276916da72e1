"""Work per integration call: file opens and wall time of a first and a second
``pretrained_kwargs()`` / ``training_kwargs()`` in one process, and how many times selection,
a backend's ``devices()`` and the settings parser run in each.

    .venv/bin/python bench/integration_calls.py            # this machine
    HWBACKENDS_HOST=docs/hosts/two-l40s.json .venv/bin/python bench/integration_calls.py

Opens are counted by an audit hook (``open``, ``os.listdir``, ``os.scandir``); the selection
cache is bypassed so that the first call does the full selection every time.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time

os.environ.setdefault("HWBACKENDS_NO_CACHE", "1")

COUNT = {"open": 0, "os.listdir": 0, "os.scandir": 0}
ON = [False]


def _hook(event: str, _args: object) -> None:
    if ON[0] and event in COUNT:
        COUNT[event] += 1


def _counted(cls: type, attr: str, calls: dict[str, int], key: str) -> None:
    fn = getattr(cls, attr)

    def wrapper(*a: object, **k: object) -> object:
        calls[key] = calls.get(key, 0) + 1
        return fn(*a, **k)

    setattr(
        cls,
        attr,
        staticmethod(wrapper)
        if isinstance(cls.__dict__.get(attr), staticmethod)
        else (
            classmethod(lambda c, *a, **k: wrapper(*a, **k))
            if isinstance(cls.__dict__.get(attr), classmethod)
            else wrapper
        ),
    )


def main() -> None:
    from hwbackends import accelerate, transformers
    from hwbackends._base.settings import Settings
    from hwbackends._selection import calls as calls_mod
    from hwbackends._selection.registry import Registry

    calls: dict[str, int] = {}
    _counted(Registry, "select", calls, "Registry.select")
    _counted(Settings, "from_env", calls, "Settings.from_env")
    orig_pc = calls_mod.plugin_call

    def counting_plugin_call(name: str, method: str, *a: object, **k: object) -> object:
        calls[f"{method}()"] = calls.get(f"{method}()", 0) + 1
        return orig_pc(name, method, *a, **k)  # type: ignore[arg-type]

    orig_dev = calls_mod._devices

    def counting_devices(*a: object, **k: object) -> object:
        calls["devices()"] = calls.get("devices()", 0) + 1
        return orig_dev(*a, **k)  # type: ignore[arg-type]

    import importlib

    mods = []
    for m in ("calls", "registry", "target", "choose"):  # choose: split from registry
        with contextlib.suppress(ImportError):
            mods.append(importlib.import_module(f"hwbackends._selection.{m}"))
    for mod in mods:
        if hasattr(mod, "plugin_call"):
            mod.plugin_call = counting_plugin_call  # type: ignore[attr-defined]
        if hasattr(mod, "_devices"):
            mod._devices = counting_devices  # type: ignore[attr-defined]
    sys.addaudithook(_hook)

    def cli_env() -> None:
        import io

        from hwbackends.cli import main as cli_main

        with contextlib.redirect_stdout(io.StringIO()):
            cli_main(["env", "--json"])

    for label, fn in (
        ("pretrained_kwargs", transformers.pretrained_kwargs),
        ("training_kwargs", accelerate.training_kwargs),
        ("hwbackends env --json", cli_env),
    ):
        for which in ("first", "second"):
            for k in COUNT:
                COUNT[k] = 0
            calls.clear()
            ON[0] = True
            t0 = time.perf_counter()
            fn()
            ms = (time.perf_counter() - t0) * 1000
            ON[0] = False
            opens = ", ".join(f"{k} {v}" for k, v in COUNT.items())
            runs = ", ".join(f"{k} {v}" for k, v in sorted(calls.items()))
            print(f"{label} {which}: {ms:.1f} ms; {opens}; {runs}")


if __name__ == "__main__":
    main()
