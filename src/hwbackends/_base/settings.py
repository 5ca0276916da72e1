"""The library's own ``HWBACKENDS_*`` variables, parsed and validated.

Pure: read from the mapping given, standard library only, no plugin code."""

from __future__ import annotations

from hwbackends._base.guard import DEFAULT_TIMEOUT, timeout_from
from hwbackends._base.record import frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from hwbackends._discovery.scan import EntryPointSpec


#: The library's own variables, read from the environment given (or os.environ).
SETTINGS_VARS = (
    "HWBACKENDS_BACKEND",
    "HWBACKENDS_PLUGINS",
    "HWBACKENDS_DISABLE",
    "HWBACKENDS_STRICT",
    "HWBACKENDS_HOST",
    "HWBACKENDS_DEBUG",
    "HWBACKENDS_DISCOVERY",
    "HWBACKENDS_NO_CACHE",
    "HWBACKENDS_TIMEOUT",
)


def _names(value: str | None) -> frozenset[str] | None:
    if value is None:
        return None
    return frozenset(p.strip().lower() for p in value.split(",") if p.strip())


def _order(value: str | None) -> tuple[str, ...]:
    """HWBACKENDS_BACKEND: one name, or a comma list of preferences (a repeat counts once)."""
    out: list[str] = []
    for p in (value or "").split(","):
        name = p.strip().lower()
        if name and name not in out:
            out.append(name)
    return tuple(out)


@frozen
class Settings:
    """The ``HWBACKENDS_*`` variables, parsed once."""

    forced: str | None = None  # HWBACKENDS_BACKEND as written (names joined by commas)
    preferred: tuple[str, ...] = ()  # its names, first available wins
    allow: frozenset[str] | None = None  # None: every plugin; empty: none but the built-in cpu
    deny: frozenset[str] = frozenset()
    strict: bool = False
    debug: bool = False
    host_file: str | None = None
    timeout: float = DEFAULT_TIMEOUT  # seconds per plugin call; 0: no limit
    no_cache: bool = False
    discovery: str = "auto"

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        preferred = _order(env.get("HWBACKENDS_BACKEND"))
        return cls(
            forced=",".join(preferred) or None,
            preferred=preferred,
            allow=_names(env.get("HWBACKENDS_PLUGINS")),
            deny=_names(env.get("HWBACKENDS_DISABLE")) or frozenset(),
            strict=truthy(env.get("HWBACKENDS_STRICT"), "HWBACKENDS_STRICT"),
            debug=truthy(env.get("HWBACKENDS_DEBUG"), "HWBACKENDS_DEBUG"),
            host_file=env.get("HWBACKENDS_HOST") or None,
            timeout=timeout_from(env),
            no_cache=truthy(env.get("HWBACKENDS_NO_CACHE"), "HWBACKENDS_NO_CACHE"),
            discovery=_choice(env.get("HWBACKENDS_DISCOVERY"), "HWBACKENDS_DISCOVERY"),
        )


_TRUE = ("1", "true", "yes", "on")


_FALSE = ("", "0", "false", "no", "off")


#: HWBACKENDS_DISCOVERY: "" / "auto" scan sys.path directly where possible, "importlib" always
#: asks importlib.metadata (see _discovery.fast_scan_possible).
_DISCOVERY = ("auto", "importlib")


def truthy(v: str | None, name: str = "the switch") -> bool:
    """A switch's value; a typo (``maybe``, ``ture``) is refused, never read as off."""
    word = (v or "").strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    from hwbackends._base.errors import SettingsError

    raise SettingsError(
        f"{name}={v!r} is not a switch value{close_matches(word, _TRUE + _FALSE[1:])}",
        f"one of {', '.join(_TRUE)} to turn it on, or {', '.join(_FALSE[1:])} or empty for off",
        f"set {name}=1 or {name}=0, or unset it",
    )


def _choice(v: str | None, name: str) -> str:
    word = (v or "").strip().lower()
    if word in ("", *_DISCOVERY):
        return word or "auto"
    from hwbackends._base.errors import SettingsError

    raise SettingsError(
        f"{name}={v!r} is not a discovery method{close_matches(word, _DISCOVERY)}",
        f"one of {', '.join(_DISCOVERY)} (or unset, which is auto)",
        f"set {name}=importlib to ask importlib.metadata, or unset it",
    )


def unknown_settings(env: Mapping[str, str]) -> list[str]:
    """A misspelled HWBACKENDS_* variable is otherwise ignored without a word. Matched without
    regard to case, and with the S forgotten: ``hwbackends_backend``, ``HWBACKEND_BACKEND``."""
    out = []
    for key in sorted(env):
        up = key.upper()
        if key in SETTINGS_VARS or not up.startswith(("HWBACKENDS_", "HWBACKEND_")):
            continue
        if up in SETTINGS_VARS:
            near = f" (did you mean {up!r}? the names are upper case)"
        else:
            near = close_matches(up, SETTINGS_VARS)
        known = near or f" (the variables are {', '.join(SETTINGS_VARS)})"
        out.append(f"{key[:60]} is not a hwbackends variable and is ignored{known}")
    return out


_warned: set[str] = set()


def warn_once(messages: Iterable[str]) -> None:
    """Each message as one Python warning per process (``HwBackendsWarning``)."""
    new = [m for m in messages if m not in _warned]
    if not new:
        return
    import warnings

    from hwbackends._base.errors import HwBackendsWarning

    for m in new:
        _warned.add(m)
        warnings.warn(m, HwBackendsWarning, stacklevel=4)


def close_matches(name: str, names: Iterable[str]) -> str:
    import difflib

    near = difflib.get_close_matches(name, sorted(names), n=3, cutoff=0.5)
    return f" (did you mean {', '.join(map(repr, near))}?)" if near else ""


def listed(spec: EntryPointSpec, names: frozenset[str]) -> bool:
    """Whether a backend name or its distribution (PEP 503: ``hwbackends_cuda`` is
    ``hwbackends-cuda``) is among ``names``: a distribution name picks one of two plugins
    that claim the same backend name."""
    if spec.name in names or spec.dist in names:
        return True
    from hwbackends._base.files import normalize_dist_name

    return any(normalize_dist_name(n) == spec.dist for n in names if "_" in n or "." in n)


def disabled_reason(spec: EntryPointSpec, s: Settings) -> str:
    """Why ``allowed`` refuses a spec, in the words every report uses."""
    if listed(spec, s.deny):
        return "listed in HWBACKENDS_DISABLE"
    return "not listed in HWBACKENDS_PLUGINS"


def allowed(spec: EntryPointSpec, s: Settings) -> bool:
    if listed(spec, s.deny):
        return False
    if s.allow is None or spec.name == "cpu":
        return True  # the built-in cpu cannot be filtered out by an allow-list, only denied
    return listed(spec, s.allow)
