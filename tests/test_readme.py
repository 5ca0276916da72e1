"""The README's set-up commands and Transformers usage work on this machine, as written."""

from __future__ import annotations

import glob
import re
import shlex
import subprocess
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from the `test` dependency group
    import tomli as tomllib


ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def test_readme_setup_installs_the_core_and_every_plugin() -> None:
    """The first command installs the core and every in-repo plugin before ``hwbackends env``,
    so that the report is right on an accelerator machine; the second runs the test suite."""
    text = README.read_text()
    checkout = text[text.index("## From a checkout") :]
    blocks = re.findall(r"```bash\n(.*?)```", checkout, re.S)
    assert [b.strip() for b in blocks[1:2]] == ["bash scripts/test.sh"]
    steps = [shlex.split(step) for step in blocks[0].strip().split("&&")]
    installs = [s for s in steps if s[:1] and s[0].endswith("pip") and "install" in s]
    assert len(installs) == 1, steps
    targets = [a for a in installs[0][installs[0].index("install") + 1 :] if not a.startswith("-")]
    installed = {Path(p).resolve() for t in targets for p in glob.glob(str(ROOT / t))}
    plugins = {
        d.resolve()
        for d in (ROOT / "plugins").glob("hwbackends-*")
        if (d / "pyproject.toml").is_file()
    }
    assert plugins, "no plugin found in plugins/"
    assert installed == {ROOT, *plugins}, sorted(map(str, installed ^ {ROOT, *plugins}))
    last = steps[-1]
    assert last[0].endswith("hwbackends") and last[1:] == ["env"], last


def test_readme_opens_with_the_checkout_and_says_the_index_install_is_for_later() -> None:
    """What works today comes first; the index install says in one line that it waits for
    the distributions to be published (no index has them yet)."""
    text = README.read_text()
    sections = re.findall(r"^## (.*)$", text, re.M)
    assert sections[:2] == ["From a checkout", "Once published"], sections
    published = text[text.index("## Once published") :].split("\n## ", 1)[0]
    assert "not published yet" in " ".join(published.split())


def test_readme_install_names_the_core_extras() -> None:
    """The index install: an extra that exists, the command that shows the report."""
    text = README.read_text()
    published = text[text.index("## Once published") :].split("\n## ", 1)[0]
    block = re.findall(r"```bash\n(.*?)```", published, re.S)
    assert [b.strip() for b in block] == ['pip install "hwbackends[cuda]" && hwbackends env']
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    named = re.search(r"extras pull them in \((.*?)\)", " ".join(text.split()))
    assert named is not None
    listed = re.findall(r"`(\w+)`", named.group(1))
    assert set(listed) == set(extras["optional-dependencies"]) - {"torch", "transformers"}


def test_readme_transformers_usage_runs(tmp_path: Path) -> None:
    __import__("transformers"), __import__("torch")  # the block runs them in a child process
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) == 2  # the load, then the training plan
    setup = (
        "import torch, transformers\n"
        "from hwbackends._integrations.smoke import tiny_llama_config\n"
        f"path = {str(tmp_path)!r}\n"
        "transformers.LlamaForCausalLM(tiny_llama_config()).save_pretrained(path)\n"
    )
    # the model trained is the training plan's: fp32 master weights under mixed precision
    check = (
        "\nassert model.config._attn_implementation in ('sdpa', 'eager')"
        "\nassert model.dtype == torch.float32 and (args.bf16 or args.fp16 or args.use_cpu)"
        "\nprint('ok')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", setup + "\n".join(blocks) + check],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("ok")
