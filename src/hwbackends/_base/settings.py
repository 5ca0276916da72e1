"""The library's own ``HWBACKENDS_*`` variables, parsed and validated.

Pure: read from the mapping given, standard library only, no plugin code."""

from __future__ import annotations

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
    "HWBACKENDS_DEADLINE",
)

#: Seconds a single plugin call may take before it is reported as hanging.
DEFAULT_TIMEOUT = 30.0
#: Seconds one whole selection may spend in plugin code (every load, probe and devices()).
DEFAULT_DEADLINE = 60.0
#: The smallest limit accepted: below it not even a thread hand-off fits, and every plugin
#: would be reported hanging.
MIN_TIMEOUT = 0.01
_OFF = ("0", "off", "none")


def seconds_from(env: Mapping[str, str], name: str, default: float) -> float:
    """A number of seconds from ``env[name]`` (``HWBACKENDS_TIMEOUT``, ``HWBACKENDS_DEADLINE``);
    0 for no limit (``0``, ``off``, ``none``), ``default`` when unset or empty."""
    raw = (env.get(name) or "").strip()
    if not raw:
        return default
    if raw.lower() in _OFF:
        return 0.0
    try:
        value = float(raw) if len(raw) < 40 else -1.0
    except ValueError:
        value = -1.0
    from hwbackends._base.errors import SettingsError

    fix = f"set {name}={default:g} (the default) or unset it"
    if not 0 < value < 1e6:  # also refuses nan and inf
        raise SettingsError(
            f"{name}={raw[:40]!r} is not a number of seconds{close_matches(raw.lower(), _OFF)}",
            "a positive number of seconds, or 0 / off for no limit",
            fix,
        )
    if value < MIN_TIMEOUT:
        raise SettingsError(
            f"{name}={raw!r} is too small for any plugin call to finish in "
            "(a thread hand-off alone can take 5 ms)",
            f"at least {MIN_TIMEOUT:g} seconds, or 0 / off for no limit",
            fix,
        )
    return value


def timeout_from(env: Mapping[str, str]) -> float:
    """``HWBACKENDS_TIMEOUT`` as seconds (0: no limit, run inline)."""
    return seconds_from(env, "HWBACKENDS_TIMEOUT", DEFAULT_TIMEOUT)


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
    deadline: float = DEFAULT_DEADLINE  # seconds in plugin code per selection; 0: no limit
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
            deadline=seconds_from(env, "HWBACKENDS_DEADLINE", DEFAULT_DEADLINE),
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
