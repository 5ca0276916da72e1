"""The generic rule kinds: lists of indices or UUIDs, one device, every device, no device.

``IndexList(variable)`` reads a comma list of integer indices the way the CUDA runtime reads
``CUDA_VISIBLE_DEVICES`` (NVIDIA CUDA C Programming Guide, "CUDA Environment Variables"):
unset -> every device; ``""`` -> none; each entry is read like C ``strtoul`` (leading blanks
skipped, trailing characters ignored); the first entry that names no device ends the list; a
repeated device empties the list (PyTorch's reading of CUDA's list). Physical index: position
among the backend's devices. Runtimes that document nothing of their own (Cambricon's
``MLU_VISIBLE_DEVICES``, Moore Threads' ``MUSA_VISIBLE_DEVICES``) declare it with
``inferred=True``, which marks every report where the variable is set as uncertain.

Every part of that grammar is a declared policy, so a runtime that differs says how:

``unknown``
    an entry that names no device: ``"truncate"`` (the list ends there, CUDA), ``"ignore"``
    (the entry is skipped), ``"refuse"`` (the runtime fails: ``VisibilityError``).
``repeated``
    an entry naming a device already listed: ``"empty"`` (no device at all, PyTorch's model of
    CUDA), ``"truncate"``, ``"ignore"`` or ``"refuse"``.
``empty``
    what ``""`` means: ``"none"`` (no device) or ``"all"`` (the same as unset).
``minus_one``
    ``"none"``: a value whose first entry is ``-1`` selects no device (the writer writes
    ``-1`` for an empty selection when ``""`` is not a documented "none"); ``"unknown"``
    (default): ``-1`` is an entry that names no device, handled by ``unknown``.
``numbers``
    ``"strtoul"`` (C's reading: blanks skipped, trailing characters ignored, so ``1gpu`` is 1)
    or ``"strict"`` (blanks trimmed, then ASCII digits only, as a runtime that calls Python's
    ``int`` or C++ ``std::stoul`` with a full-match check).

``IndexOrUuidList(variable, uuid_prefix)`` also accepts device UUIDs: an entry that starts
with ``uuid_prefix`` (``"GPU-"`` for NVML) names the device whose ``uuid`` in the host starts
with it (``prefix_match=True``: a unique prefix is enough, as CUDA allows; an ambiguous prefix
names no device) or equals it. A host device's ``uuid`` is compared with the prefix added when
it does not already carry it. ``write_as`` is ``"index"`` (default) or ``"uuid"``.

Every choice made while reading is recorded on the :class:`Trace`: a step per entry, and a
warning for every entry that was skipped, ended the list or emptied it, naming the policy and
the fix. Nothing is dropped without a warning.

``SingleDevice()``: one device and no variable that hides it (Apple's MPS); ``notes`` names
related variables that hide nothing. ``AllVisible()``: no variable; every device is visible
in host order, so only the whole list can be selected. ``NoDevices()``: no accelerator unit
(the CPU).
"""

from __future__ import annotations

from hwbackends._base.errors import VisibilityError
from hwbackends._visibility.base import (
    C_SPACE,
    Trace,
    VisibilityRule,
    VisibleUnit,
    c_strtoul,
    devices_of,
    plain_uint,
    require_indices,
    show,
    units_from,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from hwbackends._visibility.shapes import DeviceLike, HostLike

_POLICIES = {
    "unknown": ("truncate", "ignore", "refuse"),
    "repeated": ("empty", "truncate", "ignore", "refuse"),
    "empty": ("none", "all"),
    "minus_one": ("unknown", "none"),
    "numbers": ("strtoul", "strict"),
    "write_as": ("index", "uuid"),
}


def _choose(kind: str, option: str, value: object) -> str:
    allowed = _POLICIES[option]
    if value not in allowed:
        raise VisibilityError(
            f"{kind}({option}={value!r}) is not a known policy",
            f"{option} to be one of {', '.join(map(repr, allowed))}",
            "pick the policy that matches what your runtime documents",
        )
    assert isinstance(value, str)
    return value


class IndexList(VisibilityRule):
    """A comma list of device indices in one variable: unset means every device; an entry
    that names no device, a repeat, an empty value, ``-1`` and the reading of numbers each
    follow a declared policy (``policies()``), CUDA's by default.

    Policies: ``unknown`` ``"truncate"`` | ``"ignore"`` | ``"refuse"``; ``repeated``
    ``"empty"`` | ``"truncate"`` | ``"ignore"`` | ``"refuse"``; ``empty`` ``"none"`` |
    ``"all"``; ``minus_one`` ``"unknown"`` | ``"none"``; ``numbers`` ``"strtoul"`` |
    ``"strict"``. ``inferred=True`` marks every report where the variable is set as uncertain
    (a runtime that documents nothing of its own); ``empty_means_none=False`` when ``""`` is
    not a documented "none" to write. Every entry dropped is a warning on the ``Trace``.
    """

    def __init__(
        self,
        variable: str,
        *,
        unknown: str = "truncate",
        repeated: str = "empty",
        empty: str = "none",
        minus_one: str = "unknown",
        numbers: str = "strtoul",
        inferred: bool = False,
        empty_means_none: bool = True,
        source: str = "",
    ) -> None:
        kind = type(self).__name__
        if not isinstance(variable, str) or not variable or "=" in variable:
            raise VisibilityError(
                f"{kind} needs an environment variable name, got {variable!r}",
                "a name such as 'ACME_VISIBLE_DEVICES'",
                "pass the variable your runtime reads",
            )
        self.variable = variable
        self.unknown = _choose(kind, "unknown", unknown)
        self.repeated = _choose(kind, "repeated", repeated)
        self.empty = _choose(kind, "empty", empty)
        self.minus_one = _choose(kind, "minus_one", minus_one)
        self.numbers = _choose(kind, "numbers", numbers)
        self.inferred = inferred
        # "" selects none and may be written for an empty selection
        self.empty_means_none = empty_means_none and self.empty == "none"
        self.source = source
        self.variables: tuple[str, ...] = (variable,)
        self.unset: tuple[str, ...] = ()

    # -- reading --------------------------------------------------------------------------

    def _labels(self, devices: Sequence[DeviceLike]) -> list[str]:
        return [str(k) for k in range(len(devices))]

    def _match(self, token: str, devices: Sequence[DeviceLike], t: Trace) -> tuple[int | None, str]:
        """``(device position or None, how the entry was read)``."""
        n = len(devices)
        if self.numbers == "strict":
            body = token.strip(C_SPACE)
            k = plain_uint(body)
            if k is None and body[:1] == "-" and plain_uint(body[1:]) is not None:
                return None, "is negative"
            if k is None:
                return None, "is not a number"
        else:
            k, rest = c_strtoul(token)
            if k is None:
                return None, "is not a number"
            if k < 0:
                return None, "is negative"
            if rest:
                t.step(f"{show(token)} is read as {k} (strtoul stops at {show(rest[:10])}).")
        if k >= n:
            return None, f"is out of range (only {n} device(s))"
        return k, f"is device {k}"

    def read(self, env: Mapping[str, str], host: HostLike, trace: Trace) -> list[VisibleUnit]:
        t = trace
        devices = devices_of(host)
        n = len(devices)
        t.step(f"Host: {n} device(s).")
        value = t.read(self.variable)
        labels = self._labels(devices)
        if value is None:
            t.step("Unset: every device is visible.")
            return units_from([(k, k, None, labels[k]) for k in range(n)])
        if self.inferred:
            why = f" ({self.source})" if self.source else ""
            t.warn(
                f"{self.variable} has no published specification; it is read like "
                f"CUDA_VISIBLE_DEVICES{why}.",
                uncertain=True,
            )
        if value == "":
            if self.empty == "all":
                t.step("Set but empty: read as unset, so every device is visible.")
                return units_from([(k, k, None, labels[k]) for k in range(n)])
            t.step("Set but empty: no device.")
            return []
        picked = self._read_list(value, devices, t)
        return units_from([(k, k, None, labels[k]) for k in picked])

    def _read_list(self, value: str, devices: Sequence[DeviceLike], t: Trace) -> list[int]:
        var = self.variable
        tokens = value.split(",")
        first = tokens[0].strip(C_SPACE)
        if first == "-1" and self.minus_one == "none":
            t.step(f"{var} starts with -1: no device (declared minus_one='none').")
            return []
        picked: list[int] = []
        seen: set[int] = set()
        for i, token in enumerate(tokens):
            k, how = self._match(token, devices, t)
            if k is None:
                if i == 0 and first == "-1" and self.unknown == "truncate":
                    t.step(f"Entry 0 {show(token)} names no device: no device is visible.")
                    return []
                if self.unknown == "refuse":
                    raise VisibilityError(
                        f"{var} entry {i} {show(token)} {how}",
                        f"entries that name this host's {len(devices)} device(s)",
                        f"remove or correct {show(token)} in {var}",
                    )
                if self.unknown == "ignore":
                    t.warn(
                        f"{var} entry {i} {show(token)} {how}; the runtime skips it "
                        f"(declared unknown='ignore'). Remove it from {var}."
                    )
                    continue
                t.warn(
                    f"{var} entry {i} {show(token)} {how}; the runtime stops reading there, so "
                    f"{len(picked)} device(s) are visible (declared unknown='truncate'). "
                    f"Remove it from {var}."
                )
                t.step(f"Entry {i} {show(token)} {how}: the list ends; {len(picked)} kept.")
                return picked
            if k in seen:
                effect = {
                    "empty": "the runtime then makes no device visible",
                    "truncate": f"the list ends there with {len(picked)} device(s)",
                    "ignore": "the repeat is skipped",
                    "refuse": "the runtime refuses the value",
                }[self.repeated]
                msg = (
                    f"{var} entry {i} {show(token)} repeats device {k}; {effect} "
                    f"(declared repeated={self.repeated!r}). Remove the repeated entry."
                )
                if self.repeated == "refuse":
                    raise VisibilityError(
                        f"{var} entry {i} {show(token)} repeats device {k}",
                        "each device at most once",
                        f"remove the repeated entry from {var}",
                    )
                t.warn(msg)
                if self.repeated == "empty":
                    t.step("A repeated device empties the list.")
                    return []
                if self.repeated == "truncate":
                    t.step(f"A repeated device ends the list; {len(picked)} kept.")
                    return picked
                continue
            seen.add(k)
            picked.append(k)
            t.entry(f"Entry {i} {show(token)} {how} -> logical {len(picked) - 1}.")
        return picked

    # -- writing --------------------------------------------------------------------------

    def _empty_value(self) -> str:
        if self.empty_means_none:
            return ""
        if self.minus_one == "none":
            return "-1"
        raise VisibilityError(
            f"{self.variable} has no documented value that selects no device",
            "at least one device",
            "do not start the process, or run it on the cpu backend",
        )

    def _entry(self, k: int, devices: Sequence[DeviceLike]) -> str:
        return str(k)

    def write(
        self, physical: Sequence[int], host: HostLike, env: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        devices = devices_of(host)
        sel = require_indices(self.variable, physical, len(devices), "devices")
        if not sel:
            return {self.variable: self._empty_value()}
        return {self.variable: ",".join(self._entry(k, devices) for k in sel)}

    def policies(self) -> dict[str, str]:
        """The declared reading of each case (what a report or a docs page shows)."""
        return {
            "unknown": self.unknown,
            "repeated": self.repeated,
            "empty": self.empty,
            "minus_one": self.minus_one,
            "numbers": self.numbers,
            "inferred": "yes" if self.inferred else "no",
            "no device is written as": '""'
            if self.empty_means_none
            else "-1"
            if self.minus_one == "none"
            else "(refused)",
        }

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.variable!r})"


class IndexOrUuidList(IndexList):
    """A comma list of device indices or UUIDs: an entry that starts with ``uuid_prefix``
    names the device whose ``uuid`` starts with it (``prefix_match=True``, a unique prefix, as
    CUDA accepts) or equals it; the other entries are read as by :class:`IndexList`.

    A host device's ``uuid`` is compared with the prefix added when it lacks it; an ambiguous
    prefix names no device. ``write_as="uuid"`` writes UUIDs instead of indices.
    """

    def __init__(
        self,
        variable: str,
        uuid_prefix: str,
        *,
        prefix_match: bool = True,
        write_as: str = "index",
        unknown: str = "truncate",
        repeated: str = "empty",
        empty: str = "none",
        minus_one: str = "unknown",
        numbers: str = "strtoul",
        inferred: bool = False,
        empty_means_none: bool = True,
        source: str = "",
    ) -> None:
        super().__init__(
            variable,
            unknown=unknown,
            repeated=repeated,
            empty=empty,
            minus_one=minus_one,
            numbers=numbers,
            inferred=inferred,
            empty_means_none=empty_means_none,
            source=source,
        )
        if (
            not isinstance(uuid_prefix, str)
            or not uuid_prefix
            or any(c in uuid_prefix for c in ", " + C_SPACE)
            or uuid_prefix[0] in "+-0123456789"
        ):
            raise VisibilityError(
                f"IndexOrUuidList needs a UUID prefix, got {uuid_prefix!r}",
                "a non-empty prefix without commas or blanks that does not start like a "
                "number, such as 'ACME-'",
                "pass the prefix your runtime's UUIDs carry",
            )
        self.uuid_prefix = uuid_prefix
        self.prefix_match = prefix_match
        self.write_as = _choose("IndexOrUuidList", "write_as", write_as)

    def _uuids(self, devices: Sequence[DeviceLike]) -> list[str | None]:
        p = self.uuid_prefix
        out: list[str | None] = []
        for d in devices:
            u = d.uuid
            out.append(None if not u else u if u.startswith(p) else p + u)
        return out

    def _labels(self, devices: Sequence[DeviceLike]) -> list[str]:
        return [u or str(k) for k, u in enumerate(self._uuids(devices))]

    def _match(self, token: str, devices: Sequence[DeviceLike], t: Trace) -> tuple[int | None, str]:
        body = token.strip(C_SPACE)
        if not body.startswith(self.uuid_prefix):
            return super()._match(token, devices, t)
        if body != token:
            t.step(f"UUID entry {show(token)}: blanks around it are ignored.")
        uuids = self._uuids(devices)
        if self.prefix_match:
            hits = [k for k, u in enumerate(uuids) if u is not None and u.startswith(body)]
        else:
            hits = [k for k, u in enumerate(uuids) if u == body]
        if len(hits) == 1:
            return hits[0], f"is device {hits[0]} by UUID"
        if hits:
            return None, f"is a prefix of {len(hits)} devices' UUIDs (ambiguous)"
        if all(u is None for u in uuids) and uuids:
            return None, "is a UUID, but the host description has no device UUIDs"
        return None, "matches no device's UUID"

    def _entry(self, k: int, devices: Sequence[DeviceLike]) -> str:
        if self.write_as == "index":
            return str(k)
        u = self._uuids(devices)[k]
        if u is None:
            raise VisibilityError(
                f"device {k} has no UUID in the host description",
                f"a UUID for every device selected in {self.variable}",
                "add each device's 'uuid' to the host description (or read it in read_devices)",
            )
        return u

    def policies(self) -> dict[str, str]:
        return {
            **super().policies(),
            "uuid_prefix": self.uuid_prefix,
            "prefix_match": "yes" if self.prefix_match else "no",
            "write_as": self.write_as,
        }

    def __repr__(self) -> str:
        return f"IndexOrUuidList({self.variable!r}, {self.uuid_prefix!r})"


class SingleDevice(VisibilityRule):
    """One device, visible as index 0, and no variable that hides it."""

    def __init__(
        self, *, notes: Mapping[str, str] | None = None, why: str = "", label: str = "0"
    ) -> None:
        # variable -> why it hides nothing; reported when set
        self.notes = dict(notes or {})
        self.why = why
        self.label = label

    def read(self, env: Mapping[str, str], host: HostLike, trace: Trace) -> list[VisibleUnit]:
        t = trace
        t.step(f"There is no visibility or ordering variable{self.why}.")
        for name, why in self.notes.items():
            t.note_if_set(name, why)
        n = len(devices_of(host))
        if n:
            t.step(f"The device is visible as index 0 ({self.label}).")
            return units_from([(0, 0, None, self.label)])
        t.step("The host has no such device.")
        return []

    def write(
        self, physical: Sequence[int], host: HostLike, env: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        n = min(1, len(devices_of(host)))
        sel = require_indices("this backend", physical, n, "the one device (index 0)")
        if not sel and n:
            raise VisibilityError(
                "this device cannot be hidden by an environment variable",
                "[0] (the one device)",
                "use the cpu backend to run without it",
            )
        return {}

    def __repr__(self) -> str:
        return "SingleDevice()"


class AllVisible(VisibilityRule):
    """No visibility variable: every device is visible, in host order."""

    def read(self, env: Mapping[str, str], host: HostLike, trace: Trace) -> list[VisibleUnit]:
        n = len(devices_of(host))
        trace.step(f"No visibility variable is declared: all {n} device(s) are visible.")
        return units_from([(k, k, None, str(k)) for k in range(n)])

    def write(
        self, physical: Sequence[int], host: HostLike, env: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        n = len(devices_of(host))
        sel = require_indices("this backend", physical, n, "devices")
        if sel != list(range(n)):
            raise VisibilityError(
                f"no visibility variable is declared, so {sel} cannot be selected",
                f"every device in host order ({list(range(n))})",
                "declare the runtime's variable in the backend (for example "
                "visibility = IndexList('ACME_VISIBLE_DEVICES'))",
            )
        return {}

    def __repr__(self) -> str:
        return "AllVisible()"


class NoDevices(VisibilityRule):
    """No accelerator unit and no variable (the CPU)."""

    def read(self, env: Mapping[str, str], host: HostLike, trace: Trace) -> list[VisibleUnit]:
        trace.step("This backend has no visibility variable and no accelerator unit.")
        return []

    def write(
        self, physical: Sequence[int], host: HostLike, env: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        require_indices("this backend", physical, 0, "accelerator units")
        return {}

    def __repr__(self) -> str:
        return "NoDevices()"
