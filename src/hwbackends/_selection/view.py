"""The chosen backend as it leaves the selection layer: a guarded view of the plugin object.

``hwbackends.current()`` and ``hwbackends.get()`` return a ``BackendView``, never the plugin's
own object, so that a user's ``current().devices(host, env)`` runs the plugin under the guard
(time limit, a ``PluginError`` naming the call, results checked and copied) as the library's
own calls do. Its identity (``name``, ``device_type``, ``priority``, ``api_version``) is the
plain copy the guard made when the plugin loaded; the protocol's methods go through
``plugin_call``; any other attribute (``vendor``, ``visibility``, a helper method) is read
under the guard too, a callable coming back guarded. The library's own code works on the
plugin object (``get_from_report``) or ``raw(view)``, each call guarded once.

This module imports only builtins: the selection cache's hit returns a view too.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any, TypeVar

    from hwbackends._base.protocol import Backend, Capabilities, Device, Probe
    from hwbackends._machine.host import Host

    _T = TypeVar("_T")

__all__ = ["BackendView", "raw", "view_of"]

_views: dict[int, BackendView] = {}  # id(plugin object) -> its view: current() is current()


class BackendView:
    """A backend (``hwbackends.Backend``) whose every call into plugin code is guarded."""

    __slots__ = ("_load", "_obj", "api_version", "device_type", "name", "priority")

    def __init__(self, backend: Backend | None, name: str, device_type: str, priority: int,
                 load: Callable[[], Backend] | None = None) -> None:  # fmt: skip
        from hwbackends._version import API_VERSION  # a loaded plugin declares exactly this

        self._obj, self._load, self.name, self.device_type = backend, load, name, device_type
        self.priority, self.api_version = priority, API_VERSION

    @property
    def _backend(self) -> Backend:
        """The plugin object; the built-in's from a cache hit is made on first use (``_load``:
        hwbackends' own code, which cannot fail to import), so a hit imports nothing."""
        if self._obj is None:
            assert self._load is not None
            self._obj = self._load()
        return self._obj

    def probe(self, host: Host) -> Probe:
        from hwbackends._base.protocol import Probe

        return plugin_call(self.name, "probe", lambda: self._backend.probe(host), Probe)

    def devices(self, host: Host, env: Mapping[str, str]) -> list[Device]:
        return plugin_call(self.name, "devices", lambda: self._backend.devices(host, env), list)

    def capabilities(self, device: Device | None = None, *, host: Host | None = None
                     ) -> Capabilities:  # fmt: skip
        from hwbackends._base.protocol import Capabilities

        b = self._backend
        return plugin_call(
            self.name, "capabilities", lambda: b.capabilities(device, host=host), Capabilities
        )

    def visibility_env(self, physical_indices: Sequence[int], *, host: Host | None = None,
                       env: Mapping[str, str] | None = None) -> dict[str, str]:  # fmt: skip
        from hwbackends._base.errors import VisibilityError

        b = self._backend
        return plugin_call(
            self.name,
            "visibility_env",
            lambda: b.visibility_env(physical_indices, host=host, env=env),
            dict,
            (VisibilityError,),  # a selection the runtime cannot express: the caller's
        )

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):  # dunders and private names: the view's own, never proxied
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {attr!r}")
        b = self._backend
        value = plugin_call(
            self.name, attr, lambda: getattr(b, attr), passthrough=(AttributeError,)
        )
        if not callable(value):
            return value  # a plain copy where it is one (plugin_call's)

        def guarded(*args: Any, **kwargs: Any) -> Any:
            return plugin_call(self.name, attr, lambda: value(*args, **kwargs))

        guarded.__name__ = guarded.__qualname__ = attr
        return guarded

    def __repr__(self) -> str:
        return f"<hwbackends backend {self.name!r} (guarded view)>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BackendView) and other._backend is self._backend

    def __hash__(self) -> int:
        return id(self._backend)


def plugin_call(name: str, method: str, fn: Callable[[], _T], expect: type | None = None,
                passthrough: tuple[type[BaseException], ...] = ()) -> _T:  # fmt: skip
    """``calls.plugin_call``, imported on the first call (not by a selection cache hit)."""
    from hwbackends._selection.calls import plugin_call as call

    return call(name, method, fn, expect, passthrough)


def view_of(backend: Backend, identity: tuple[str, str, int] | None = None) -> BackendView:
    """The view of a loaded backend (one per object). ``identity``: its ``(name, device_type,
    priority)`` as the guard copied them; None: the copies its load made (``meta_of``)."""
    got = _views.get(id(backend))
    if got is not None and got._backend is backend:
        return got
    if identity is None:
        from hwbackends._discovery.loading import meta_of

        meta = meta_of(backend)
        identity = (meta.name, meta.device_type, meta.priority)
    view = _views[id(backend)] = BackendView(backend, *identity)
    return view


def raw(backend: object) -> Any:
    """The plugin object behind a view (for the library's own guarded calls); else itself."""
    return backend._backend if isinstance(backend, BackendView) else backend
