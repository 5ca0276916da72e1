"""A backend's methods called for the core and the integrations, under the plugin guard:
a wrong result, an exception, a hang or an environment edit becomes an error that names the
backend and its method."""

from __future__ import annotations

from hwbackends._base.errors import PluginError
from hwbackends._base.guard import ResultError, plain
from hwbackends._base.protocol import Device, checked
from hwbackends._discovery.loading import Broken, guarded

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any, TypeVar

    from hwbackends._base.protocol import Backend
    from hwbackends._machine.host import Host

    _T = TypeVar("_T")


def plugin_call(
    name: str,
    method: str,
    fn: Callable[[], _T],
    expect: type | None = None,
    passthrough: tuple[type[BaseException], ...] = (),
) -> _T:
    """Call a backend's method for an integration (``capabilities()``, ``devices()``...).

    The call runs under the plugin guard; a result of the wrong type, an exception, a hang
    or an environment edit becomes a ``PluginError`` that names the backend and its method.
    ``expect`` is a protocol value class (``Capabilities``, ``Probe``) checked field by field,
    ``list`` for a list of ``Device``, or ``dict`` for variable names to string values.
    """
    what = f"{name}.{method}()"

    def run() -> Any:
        got = fn()
        if expect is list:
            if not isinstance(got, list):
                raise ResultError(f"{what} returned {type(got).__name__}, expected a list")
            return [checked(d, Device, what) for d in got]
        if expect is dict:
            if not isinstance(got, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in got.items()
            ):
                raise ResultError(
                    f"{what} returned {type(got).__name__}, expected a dict of variable names "
                    "to string values"
                )
            return {plain(k): plain(v) for k, v in dict(got).items()}
        if expect is not None:
            return checked(got, expect, what)
        try:  # an exact builtin copy where it is one (tuples of str, ...), else as it is
            return plain(got)
        except ResultError:
            return got

    try:
        return guarded(what, run, passthrough=passthrough, owner=name)  # type: ignore[no-any-return]
    except Broken as exc:
        raise PluginError(
            f"the {name} backend is broken: {exc.reason}",
            "a plugin whose methods return what the hwbackends.Backend protocol describes",
            "update or uninstall the plugin; `hwbackends plugins --check` lists broken plugins",
        ) from None


def _devices(
    backend: Backend, name: str, host: Host, env: Mapping[str, str], timeout: float | None
) -> list[Device]:
    what = f"{name}.devices()"

    def run() -> list[Device]:
        got = backend.devices(host, env)
        if not isinstance(got, list):
            raise ResultError(f"{what} returned {type(got).__name__}, expected a list of Device")
        return [checked(d, Device, what) for d in got]

    return guarded(what, run, timeout=timeout, owner=name)
