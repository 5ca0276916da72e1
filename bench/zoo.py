"""The whole causal-LM zoo of the installed Transformers through the recommended settings.

For every model type of ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES``: a tiny random model, loaded
with Transformers' defaults and with ``pretrained_kwargs(model=path)`` (one forward each), and
trained 2 ``Trainer`` steps with defaults and with the recommended training settings. Prints
the table ``bench/README.md`` keeps, and the regressions (recommended fails, default works).

    .venv/bin/python bench/zoo.py [--no-train] [--json out.json] [TYPE ...]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
os.environ.setdefault("HWBACKENDS_PLUGINS", "")  # the CPU the zoo runs on
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from integrations import zoo


def _mark(row: dict[str, object], key: str) -> str:
    value = row.get(key)
    return "-" if value is None else ("yes" if value else "no")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("types", nargs="*", help="model types (default: the whole zoo)")
    p.add_argument("--no-train", action="store_true", help="load and forward only")
    p.add_argument("--json", help="also write the rows to this file")
    a = p.parse_args(argv)
    rows = []
    for t in a.types or zoo.model_types():
        row = zoo.run_type(t, train=not a.no_train)
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)
    print("| type | class | built | default load | ours load (attn) | default train | ours train |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        attn = f" ({r['ours_attn']})" if r.get("ours_load") else ""
        print(
            f"| {r['type']} | {r['class'] if r['built'] else ''} | {_mark(r, 'built')} | "
            f"{_mark(r, 'default_load')} | {_mark(r, 'ours_load')}{attn} | "
            f"{_mark(r, 'default_train')} | {_mark(r, 'ours_train')} |"
        )
    built = [r for r in rows if r["built"]]
    print(
        f"\n{len(rows)} types, {len(built)} built, "
        f"{sum(bool(r.get('default_load')) for r in built)} load with defaults, "
        f"{sum(bool(r.get('ours_load')) for r in built)} with ours, "
        f"{sum(bool(r.get('default_train')) for r in built)} train with defaults, "
        f"{sum(bool(r.get('ours_train')) for r in built)} with ours"
    )
    regs = [x for r in rows for x in zoo.regressions(r)]
    print(f"regressions: {len(regs)}")
    for x in regs:
        print(f"  {x}")
    print("not built:")
    for r in rows:
        if not r["built"]:
            print(f"  {r['type']}: {r['class']}")
    return 1 if regs else 0


if __name__ == "__main__":
    raise SystemExit(main())
