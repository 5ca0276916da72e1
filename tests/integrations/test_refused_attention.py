"""A backend may refuse any ``attn_implementation`` name, with its reason."""

from __future__ import annotations

import pytest

from hwbackends import Capabilities, Host, UnsupportedSettingError
from hwbackends._base.guard import ResultError
from hwbackends._base.protocol import checked
from hwbackends.plugin import common_attention
from hwbackends.transformers import KernelsStatus, resolve_attention

REASON = "the Acme compiler cannot lower it (Acme guide, 'Unsupported operators')"


def caps(refused: dict[str, str]) -> Capabilities:
    return Capabilities(
        backend="acme",
        device_type="acme",
        arch=None,
        dtypes=("float32",),
        training_precision="fp32",
        attention=common_attention(),
        distributed_backend="gloo",
        refused_attention=refused,
    )


HOST = Host.from_dict({"packages": {"transformers": "5.22.2"}})
NO_KERNELS = KernelsStatus(False, "not installed", None, None, None)


@pytest.mark.parametrize("name", ["flex_attention", "sdpa", "paged|sdpa"])
def test_a_refused_name_is_an_error_with_the_reason(name: str) -> None:
    c = caps({"flex_attention": REASON, "sdpa": REASON})
    bare = name.removeprefix("paged|")
    with pytest.raises(
        UnsupportedSettingError,
        match=rf"attn_implementation='{bare}' cannot load on acme \(acme\): the Acme compiler",
    ):
        resolve_attention(c, HOST, name, NO_KERNELS)


def test_auto_never_picks_a_refused_option_and_others_pass() -> None:
    first = common_attention()[0].name
    impl, _why = resolve_attention(caps({first: REASON}), HOST, "auto", NO_KERNELS)
    assert impl != first
    impl, _why = resolve_attention(caps({}), HOST, "flex_attention", NO_KERNELS)
    assert impl == "flex_attention"  # registered in Transformers and not refused: as asked


def test_the_refusals_are_checked_like_every_fact() -> None:
    bad = caps({"flex_attention": 1})  # type: ignore[dict-item]
    with pytest.raises(ResultError, match="refused_attention"):
        checked(bad, Capabilities, "acme.capabilities()")
    assert checked(caps({"sdpa": REASON}), Capabilities, "x").refused_attention == {"sdpa": REASON}
