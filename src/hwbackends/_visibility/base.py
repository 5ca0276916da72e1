"""Shared pieces of the visibility engine: host protocols, result types, number parsing.

Everything here is pure: no I/O, no environment access, standard library only. The reference
for every rule is the project's page ``docs/reference/visibility.md`` (cited as "spec §N").
"""

from __future__ import annotations

from _collections_abc import Sequence  # collections.abc's classes, without importing collections
from types import MappingProxyType

from hwbackends._base.errors import VisibilityError
from hwbackends._base.record import field, frozen, mutable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from hwbackends._visibility.shapes import DeviceLike as DeviceLike
    from hwbackends._visibility.shapes import HostLike as HostLike

# C's isspace() in the "C" locale: what strtoul/strtol skip and what std trims.
C_SPACE = " \t\n\v\f\r"
ASCII_DIGITS = frozenset("0123456789")
# No runtime has anywhere near this many devices; longer digit strings are "huge" and are never
# handed to int() (which refuses more than 4300 digits by default).
MAX_DIGITS = 18
HUGE: int = 10**MAX_DIGITS
# How many per-entry lines a report lists before it summarises the rest.
MAX_ENTRY_STEPS = 64


@frozen
class VisibleUnit:
    """One unit the process sees: logical index -> physical index (see each backend's docs).

    ``device_position`` is the owning device's position among the host devices of the
    backend's vendor; ``sub_index`` is the MIG instance / tile / NeuronCore within that device
    (None for a whole device); ``label`` is how a user or the runtime names the unit.
    """

    logical_index: int
    """The index the framework uses for this unit (``cuda:0`` is 0), counted from 0."""
    physical_index: int
    """The unit in the backend's own numbering of the host's units, the numbers
    ``hwbackends.visibility.visibility_env`` takes (each rule kind's docs say which)."""
    device_position: int
    """Position of the device that holds the unit in ``host.devices`` (the backend's own
    devices, in its runtime's physical order), counted from 0."""
    sub_index: int | None
    """The MIG instance, tile or NeuronCore within that device; None for a whole device."""
    label: str
    """How a user or the runtime names the unit (``"0"``, ``"GPU-8e3f…"``, ``"nc2"``)."""

    def to_dict(self) -> dict[str, Any]:
        """The fields as JSON-ready plain data."""
        return {
            "logical_index": self.logical_index,
            "physical_index": self.physical_index,
            "device_position": self.device_position,
            "sub_index": self.sub_index,
            "label": self.label,
        }


@frozen
class VisibilityReport:
    """How one backend's runtime resolves the visibility variables of one environment."""

    backend: str
    """The backend's name (``"cuda"``); for a bare rule, its class name (``"IndexList"``)."""
    variables: Mapping[str, str | None]
    """Each variable read, with its value (None: unset; ``""``: set but empty), and related
    variables the runtime ignores that were set (the steps say why they do not apply)."""
    units: tuple[VisibleUnit, ...]
    """The visible units in logical order: ``units[i]`` is what the framework calls index i."""
    steps: tuple[str, ...]
    """How the runtime reads the variables, one sentence per step, citing the visibility
    reference (``docs/reference/visibility.md §N``) where a rule comes from."""
    warnings: tuple[str, ...] = ()
    """What the user should know (an entry skipped, a list cut short, a guess), each naming
    its fix where there is one; 32 are kept, then one line says more were left out."""
    uncertain: bool = False
    """True when part of the answer rests on an inferred or undocumented rule (the steps and
    warnings say which): the runtime may decide otherwise."""

    @property
    def physical(self) -> list[int]:
        """Logical index i -> physical index ``physical[i]``."""
        return [u.physical_index for u in self.units]

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready plain data, with ``physical`` added (the ``visibility``
        of ``hwbackends.explain()``'s report)."""
        return {
            "backend": self.backend,
            "variables": dict(self.variables),
            "units": [u.to_dict() for u in self.units],
            "physical": self.physical,
            "steps": list(self.steps),
            "warnings": list(self.warnings),
            "uncertain": self.uncertain,
        }


class VisibilityRule:
    """How one runtime reads its visibility variables, and how to write them.

    A backend declares one as its ``visibility`` class attribute. The engine calls it with
    the backend's own devices only (``host.devices`` is already filtered to them, in the
    runtime's physical order), so a rule never filters by vendor. Subclass it for a runtime
    whose grammar no built-in kind models; ``read`` must record what it did on the ``Trace``.
    """

    variables: tuple[str, ...] = ()
    """Every environment variable the runtime reads for visibility or device order
    (``hwbackends.visibility.variables_for`` returns it)."""
    unset: tuple[str, ...] = ()
    """Variables to remove before applying what ``write`` returns (its assignments win);
    ``hwbackends.visibility.visibility_unset`` returns it."""

    def read(self, env: Mapping[str, str], host: HostLike, trace: Trace) -> list[VisibleUnit]:
        """The visible units under ``env``, in logical order.

        :param env: the environment, variable name -> value; a missing name is unset and
            ``""`` is set but empty (a runtime may treat the two differently).
        :param host: the host, reduced to this backend's own devices when the rule is
            reached through a backend (``host.devices``, in the runtime's physical order).
        :param trace: where every step, warning and variable read is recorded (read the
            variables with ``trace.read``); the report is made from it.
        :raises VisibilityError: only for a value the runtime itself refuses, and for a
            malformed host description.
        """
        raise NotImplementedError

    def write(
        self, physical: Sequence[int], host: HostLike, env: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """Assignments that make exactly ``physical`` visible, in that order.

        :param physical: physical indices (``VisibleUnit.physical_index``) to make visible,
            in the logical order wanted: logical index i is ``physical[i]``; empty asks
            for no unit.
        :param host: the host, reduced to this backend's own devices as for ``read``.
        :param env: the environment the indices were read under, for a runtime whose
            numbering depends on a setting (``ZE_FLAT_DEVICE_HIERARCHY``,
            ``NEURON_LOGICAL_NC_CONFIG``); None reads as an empty environment (the defaults).
        :raises VisibilityError: when the runtime cannot express the selection on this host
            (an index it lacks, a repeat, an order it cannot write).
        """
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


@mutable
class Trace:
    """Collects what a reader did, then freezes it into a :class:`VisibilityReport`."""

    backend: str
    """The name the report carries (``VisibilityReport.backend``)."""
    env: Mapping[str, str]
    """The environment being read; ``read`` takes values from it."""
    variables: dict[str, str | None] = field(default_factory=dict)
    """Each variable read so far (None: unset), and related ones noted by ``note_if_set``."""
    steps: list[str] = field(default_factory=list)
    """The steps recorded so far, in order (``step``, ``entry``, ``infer``, ``read``)."""
    warnings: list[str] = field(default_factory=list)
    """The warnings recorded so far (``warn``), each once; after 32, one line says more
    were left out."""
    uncertain: bool = False
    """Whether an inferred rule or an uncertain warning was recorded (``infer``, ``warn``)."""
    _entry_steps: int = 0
    _warned: set[str] = field(default_factory=set)  # beside the list: O(1) repeats

    def read(self, name: str) -> str | None:
        """Read one variable (None = unset) and record it, with a step giving its value.

        :param name: the environment variable's name.
        :raises VisibilityError: when the value is not a string, or is longer than 65,536
            characters.
        """
        value = self.env.get(name)
        if value is not None and not isinstance(value, str):
            raise VisibilityError(
                f"environment variable {name} has a {type(value).__name__} value",
                "a mapping of variable names to strings (leave a name out to mean unset)",
                "pass os.environ or a dict of strings",
            )
        if value is not None and len(value) > MAX_VALUE_CHARS:
            raise VisibilityError(
                f"{name} is {len(value)} characters long",
                f"at most {MAX_VALUE_CHARS} characters: the devices of one machine fit in far less",
                f"set {name} to the devices this process should use",
            )
        self.variables[name] = value
        if value is None:
            self.step(f"{name} is unset.")
        else:
            self.step(f"{name}={show(value)}.")
        return value

    def note_if_set(self, name: str, why: str) -> None:
        """Record a related variable that this runtime does not read, only when it is set.

        :param name: the variable's name (``"NVIDIA_VISIBLE_DEVICES"``).
        :param why: why it does not apply, worded to follow "is set but"
            (``"it is read by the container runtime at start"``).
        """
        value = self.env.get(name)
        if isinstance(value, str):
            self.variables[name] = value
            self.step(f"{name}={show(value)} is set but {why}; not applied here.")

    def step(self, msg: str) -> None:
        """Record one step of the reading.

        :param msg: one sentence for the report; ``"spec §N"`` is shown as a citation of
            ``docs/reference/visibility.md``.
        """
        self.steps.append(msg)

    def entry(self, msg: str) -> None:
        """A per-entry step; a long list's entries stop after 64 lines, then one line says so.

        :param msg: the step for one entry of a list (``"Entry 0 '3' is device 3 -> logical 0."``).
        """
        self._entry_steps += 1
        if self._entry_steps <= MAX_ENTRY_STEPS:
            self.steps.append(msg)
        elif self._entry_steps == MAX_ENTRY_STEPS + 1:
            self.steps.append(f"(further entries are not listed; more than {MAX_ENTRY_STEPS})")

    def warn(self, msg: str, *, uncertain: bool = False) -> None:
        """A warning, once; after 32 warnings one line says more were left out.

        :param msg: what went wrong and its fix (the same text twice is recorded once).
        :param uncertain: also mark the report uncertain: the runtime's behaviour here is
            inferred or undocumented.
        """
        if uncertain:
            self.uncertain = True
        if msg in self._warned:
            return
        self._warned.add(msg)
        if len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(msg)
        elif len(self.warnings) == MAX_WARNINGS:
            self.warnings.append(f"(further warnings are not listed; more than {MAX_WARNINGS})")

    def infer(self, msg: str) -> None:
        """A step whose rule is inferred: recorded as a step and marks the report uncertain.

        :param msg: the step; ``" (inferred rule)"`` is appended.
        """
        self.steps.append(msg + " (inferred rule)")
        self.uncertain = True

    def report(self, units: Sequence[VisibleUnit]) -> VisibilityReport:
        """Freeze what was recorded into a :class:`VisibilityReport`.

        :param units: the visible units ``read`` returned, in logical order.
        """
        return VisibilityReport(
            backend=self.backend,
            variables=MappingProxyType(dict(self.variables)),
            units=tuple(units),
            steps=tuple(cite(x) for x in self.steps),
            warnings=tuple(cite(x) for x in self.warnings),
            uncertain=self.uncertain,
        )


#: The page the readers' "spec §N" citations point to, named in what users read.
SPEC_PAGE = "docs/reference/visibility.md"


def cite(msg: str) -> str:
    """A step or warning with its "spec §N" citation naming the page: a user reading
    ``hwbackends devices`` has no "spec", but has the project's docs."""
    return msg.replace("spec §", SPEC_PAGE + " §") if "spec §" in msg else msg


def show(value: str, limit: int = 120) -> str:
    """``repr`` of a value, shortened so that reports stay readable for huge inputs."""
    if len(value) <= limit:
        return repr(value)
    return repr(value[:limit]) + f"... ({len(value)} characters)"


def units_from(
    picked: Sequence[tuple[int, int, int | None, str]],
) -> list[VisibleUnit]:
    """Number ``(physical, device_position, sub_index, label)`` tuples logically from 0."""
    return [
        VisibleUnit(logical_index=i, physical_index=p, device_position=d, sub_index=s, label=lab)
        for i, (p, d, s, lab) in enumerate(picked)
    ]


def devices_of(host: HostLike) -> list[DeviceLike]:
    """The devices a rule reads: the backend's own, in its runtime's physical order."""
    try:
        devices = list(host.devices)
    except (AttributeError, TypeError) as exc:
        raise VisibilityError(
            f"the host object has no usable 'devices' list ({exc})",
            "a hwbackends Host (or an object with 'devices' and 'cuda_fastest_first')",
            "build it with Host.from_dict(...) or Host.from_system()",
        ) from None
    return devices


#: Warnings kept in one report; per-entry warnings of a long list are summarised after these.
MAX_WARNINGS = 32

#: Longest visibility value read: every reader is linear, and this bounds its time and output.
MAX_VALUE_CHARS = 1 << 16

#: Upper bound of a per-device count or id read from a host description (cores, tiles,
#: module ids): real parts have at most a few dozen, and the readers expand counts into lists.
MAX_PER_DEVICE = 256


def int_extra(dev: DeviceLike, key: str, position: int, kind: str) -> int | None:
    """A non-negative integer device extra, None when absent; anything else is an error."""
    extra = dev.extra or {}
    if key not in extra or extra[key] is None:
        return None
    value: object = extra[key]
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_PER_DEVICE:
        shown = repr(value) if len(repr(value)) < 40 else repr(value)[:40] + "…"
        raise VisibilityError(
            f"{kind} device {position} has {key}={shown}",
            f"'{key}' to be an integer from 0 to {MAX_PER_DEVICE}",
            f"fix the '{key}' field of that device in the host description",
        )
    return value


def c_strtoul(text: str) -> tuple[int | None, str]:
    """Read an unsigned decimal like C ``strtoul(text, &end, 10)`` in the "C" locale.

    Leading C blanks are skipped, one ``+`` or ``-`` is accepted, then ASCII digits; the
    rest is returned. No digits gives ``(None, text)``. A ``-`` with digits gives a negative
    number (strtoul would wrap it to a huge value: either way it names no device); more than
    MAX_DIGITS digits give HUGE.
    """
    i, n = 0, len(text)
    while i < n and text[i] in C_SPACE:
        i += 1
    sign = 1
    if i < n and text[i] in "+-":
        sign = -1 if text[i] == "-" else 1
        i += 1
    start = i
    while i < n and text[i] in ASCII_DIGITS:
        i += 1
    if i == start:
        return None, text
    digits = text[start:i]
    # leading zeros count against int()'s 4,300-digit limit too: strip them first
    significant = digits.lstrip("0") or "0"
    value = HUGE if len(significant) > MAX_DIGITS else int(significant)
    return sign * value, text[i:]


def c_strtol_base0(text: str) -> tuple[int | None, str]:
    """C ``strtol(text, &end, 0)``: blanks, sign, then ``0x`` hex, ``0`` octal or decimal."""
    i, n = 0, len(text)
    while i < n and text[i] in C_SPACE:
        i += 1
    sign = 1
    if i < n and text[i] in "+-":
        sign = -1 if text[i] == "-" else 1
        i += 1
    rest = text[i:]
    if rest[:2] in ("0x", "0X") and len(rest) > 2 and rest[2] in "0123456789abcdefABCDEF":
        base, i = 16, i + 2
        alphabet = "0123456789abcdefABCDEF"
    elif rest[:1] == "0":
        base, alphabet = 8, "01234567"
    else:
        base, alphabet = 10, "0123456789"
    start = i
    while i < n and text[i] in alphabet:
        i += 1
    if i == start:
        return None, text
    digits = text[start:i]
    significant = digits.lstrip("0") or "0"
    value = HUGE if len(significant) > MAX_DIGITS else int(significant, base)
    return sign * value, text[i:]


def canonical_uint(token: str) -> int | None:
    """The value of a token that is exactly ``str(n)`` for some n >= 0 (no sign, no padding)."""
    if not token or len(token) > MAX_DIGITS or not all(c in ASCII_DIGITS for c in token):
        return None
    if len(token) > 1 and token[0] == "0":
        return None
    return int(token)


def plain_uint(token: str) -> int | None:
    """ASCII digits only (leading zeros allowed); huge values give HUGE; else None."""
    if not token or not all(c in ASCII_DIGITS for c in token):
        return None
    significant = token.lstrip("0") or "0"
    if len(significant) > MAX_DIGITS:
        return HUGE
    return int(significant)


#: The fix for an index the host lacks, worded for Python callers; the CLI (`hwbackends pin`)
#: recognises it and gives its own command instead.
UNKNOWN_INDEX_FIX = (
    "list the host's units with hwbackends.visibility.explain_visibility(name, {}, host)"
)


def require_indices(
    backend: str, physical_indices: Sequence[int], limit: int, what: str
) -> list[int]:
    """Validate a writer's selection: integers in ``range(limit)``, no repeats."""
    if isinstance(physical_indices, (str, bytes)) or not isinstance(physical_indices, Sequence):
        raise VisibilityError(
            f"physical_indices for {backend} must be a sequence of integers, got "
            f"{type(physical_indices).__name__}",
            "a list such as [0, 2]",
        )
    out: list[int] = []
    seen: set[int] = set()
    for p in physical_indices:
        if isinstance(p, bool) or not isinstance(p, int):
            raise VisibilityError(
                f"physical index {p!r} for {backend} is not an integer",
                f"integers naming {what}",
            )
        if not 0 <= p < limit:
            raise VisibilityError(
                f"physical index {p} for {backend} does not exist on this host",
                f"{what} in 0..{limit - 1}" if limit else f"no index: the host has no {what}",
                UNKNOWN_INDEX_FIX,
            )
        if p in seen:
            raise VisibilityError(
                f"physical index {p} for {backend} is selected twice",
                "each unit at most once",
                "remove the repeated index",
            )
        seen.add(p)
        out.append(p)
    return out


def require_ascending(backend: str, indices: Sequence[int], why: str) -> None:
    if any(indices[i + 1] < indices[i] for i in range(len(indices) - 1)):
        raise VisibilityError(
            f"{backend} cannot make {list(indices)} visible in that order: {why}",
            "physical indices in ascending order",
            "sort the indices and map ranks to devices in your own code",
        )


def differ(devices: Sequence[DeviceLike]) -> bool:
    """Whether the devices are not all the same model (name and arch)."""
    return len({(d.name, d.arch) for d in devices}) > 1


def __getattr__(name: str) -> object:
    # the typing.Protocol classes load on first use (typing stays off the selection path)
    if name in ("DeviceLike", "HostLike"):
        from hwbackends._visibility import shapes as _likes

        return getattr(_likes, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
