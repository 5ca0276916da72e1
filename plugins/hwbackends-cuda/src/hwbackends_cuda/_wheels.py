"""Which PyTorch CUDA wheel index has kernels for which GPUs, per torch release.

One row per (torch release, wheel index) for the Linux x86_64 and Windows wheels on
download.pytorch.org: the compute capabilities compiled to machine code (SASS) and the one
shipped as PTX, if any. A GPU runs a wheel when the wheel has SASS for the same major version
at or below its own capability (a cubin for X.y runs on X.z with z >= y), or PTX at or below
it (JIT-compiled by the driver): CUDA C++ Programming Guide, "Binary Compatibility" and
"Application Compatibility". A GPU with neither gets "no kernel image is available for
execution on the device".

Sources, per release (each row cites its own):

* ``RELEASE.md`` of pytorch/pytorch, "Release Compatibility Matrix" (which CUDA versions each
  release ships, stable or experimental) and "PyTorch CUDA Support Matrix" (architectures
  per CUDA build), https://github.com/pytorch/pytorch/blob/main/RELEASE.md.
* 2.7: ``.ci/manywheel/build_cuda.sh`` at release/2.7 (cu128 starts at Turing); 2.8: the same
  file at release/2.8 and pytorch/pytorch#157517 / #160269 (Maxwell and Pascal removed from
  cu128/cu129, Volta kept); 2.9-2.10: RELEASE.md as of pytorch/pytorch#175253 ("For Release
  2.9 and 2.10"); 2.11: pytorch/pytorch#175253 and the dev-discuss post "Dropping Volta
  support from CUDA-12.8 binaries for release 2.11" (cu128 starts at Turing); 2.12-2.14:
  RELEASE.md "For Release 2.12, 2.13 and 2.14" (cu126, cu130, cu132; no cu128).

A wheel also needs a driver new enough for its CUDA runtime: each CUDA major runs on any
driver from a minimum on (NVIDIA's minor version compatibility), ``MIN_DRIVER``.
"""

from __future__ import annotations

from dataclasses import dataclass

from hwbackends.facts import WheelAdvice, pip_command, release

from ._driver import MIN_DRIVER as _MIN_DRIVER
from ._driver import SOURCE as DRIVER_SOURCE

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Literal

__all__ = [
    "MIN_DRIVER",
    "WHEELS",
    "Advice",
    "Wheel",
    "advise",
    "caps_text",
    "driver_problem",
    "driver_runs",
    "loaded_driver",
    "runs_on",
    "wheel_for",
    "wheel_of",
]

INDEX_URL = "https://download.pytorch.org/whl/{index}"
MATRIX = (
    "pytorch/pytorch RELEASE.md, 'Release Compatibility Matrix' and 'PyTorch CUDA Support "
    "Matrix' (https://github.com/pytorch/pytorch/blob/main/RELEASE.md)"
)
_S27 = "pytorch/pytorch .ci/manywheel/build_cuda.sh at release/2.7 (TORCH_CUDA_ARCH_LIST)"
_S28 = (
    "pytorch/pytorch .ci/manywheel/build_cuda.sh at release/2.8; pytorch/pytorch#157517 and "
    "#160269 (2.8 release notes: Maxwell and Pascal removed from the CUDA 12.8/12.9 builds)"
)
_S29 = f"{MATRIX} as it stood for 'Release 2.9 and 2.10' (pytorch/pytorch#175253)"
_S211 = (
    f"{MATRIX} 'For Release 2.11' (pytorch/pytorch#175253); dev-discuss.pytorch.org "
    "'Dropping Volta support from CUDA-12.8 binaries for release 2.11'"
)
_S212 = f"{MATRIX} 'For Release 2.12, 2.13 and 2.14'"
#: PyTorch's first binary builds, the oldest build scripts there are: nothing older than Kepler
OLDEST_SOURCE = (
    "pytorch/builder's manywheel build script for torch 0.2.0 (TORCH_CUDA_ARCH_LIST "
    "3.0;3.5;5.0;5.2+PTX, plus 6.0;6.1 with CUDA 8.0)"
)
OLDEST_BUILDS = f"PyTorch's oldest binary builds start at compute capability 3.0 ({OLDEST_SOURCE})"

_M_TO_H = (50, 60, 70, 75, 80, 86, 90)  # 12.6.3: Maxwell(5.0) ... Hopper(9.0)
_V_TO_B = (70, 75, 80, 86, 90, 100, 120)  # Volta(7.0) ... Blackwell(10.0, 12.0)
_T_TO_B = (75, 80, 86, 90, 100, 120)  # Turing(7.5) ... Blackwell(10.0, 12.0)


@dataclass(frozen=True)
class Wheel:
    """One wheel index of one torch release line (``torch`` is ``"2.8"``)."""

    torch: str
    index: str
    sass: tuple[int, ...]
    source: str
    ptx: int | None = None
    stable: bool = True

    @property
    def url(self) -> str:
        return INDEX_URL.format(index=self.index)

    @property
    def cuda(self) -> str:
        digits = self.index[2:]
        return f"{digits[:-1]}.{digits[-1]}"


def _w(torch: str, index: str, sass: tuple[int, ...], source: str, *, ptx: int | None = None,
       stable: bool = True) -> Wheel:  # fmt: skip
    return Wheel(torch, index, sass, source, ptx, stable)


WHEELS: tuple[Wheel, ...] = (
    # its compute_37 PTX is left out: CUDA 11.8's libraries have no kernels for newer GPUs
    _w("2.7", "cu118", (37, 50, 60, 61, 70, 75, 80, 86, 90), _S27),
    _w("2.7", "cu126", _M_TO_H, _S27),
    _w("2.7", "cu128", _T_TO_B, _S27, stable=False),
    _w("2.8", "cu126", _M_TO_H, _S28),
    _w("2.8", "cu128", _V_TO_B, _S28),
    _w("2.8", "cu129", _V_TO_B, _S28, ptx=120, stable=False),
    *(_w(t, "cu126", _M_TO_H, _S29) for t in ("2.9", "2.10")),
    *(_w(t, "cu128", _V_TO_B, _S29) for t in ("2.9", "2.10")),
    *(_w(t, "cu130", _T_TO_B, _S29, ptx=120, stable=False) for t in ("2.9", "2.10")),
    _w("2.11", "cu126", _M_TO_H, _S211),
    _w("2.11", "cu128", _T_TO_B, _S211),
    _w("2.11", "cu130", _T_TO_B, _S211, ptx=120),
    *(_w(t, "cu126", _M_TO_H, _S212) for t in ("2.12", "2.13", "2.14")),
    *(_w(t, "cu130", _T_TO_B, _S212, ptx=120) for t in ("2.12", "2.13", "2.14")),
    *(_w(t, "cu132", _T_TO_B, _S212, ptx=120, stable=t == "2.14")
      for t in ("2.12", "2.13", "2.14")),
)  # fmt: skip

RELEASES: tuple[str, ...] = tuple(dict.fromkeys(w.torch for w in WHEELS))
NEWEST = RELEASES[-1]

#: CUDA major -> the oldest Linux driver that runs its wheels (``_driver``), as numbers.
MIN_DRIVER: dict[int, tuple[int, ...]] = {k: release(v) for k, v in _MIN_DRIVER.items()}


def _need(w: Wheel) -> tuple[int, ...]:
    return MIN_DRIVER.get(int(w.cuda.partition(".")[0]), ())


def _text(v: tuple[int, ...]) -> str:
    return ".".join(f"{n:02d}" if i else str(n) for i, n in enumerate(v))


def driver_runs(wheel: Wheel, driver: tuple[int, ...] | None) -> bool:
    """Whether the loaded driver (its release numbers; None: not known) runs the wheel's CUDA."""
    return driver is None or driver >= _need(wheel)


def driver_problem(wheel: Wheel, driver: tuple[int, ...] | None) -> str | None:
    """Why the loaded driver cannot run this wheel's CUDA, or None when it can (or is unknown)."""
    if driver is None or driver_runs(wheel, driver):
        return None
    return (f"the loaded NVIDIA driver {_text(driver)} is too old for the CUDA {wheel.cuda} of "
            f"PyTorch's {wheel.index} wheels, which need driver {_text(_need(wheel))} or newer "
            f"({DRIVER_SOURCE})")  # fmt: skip


def loaded_driver(host: object) -> tuple[int, ...] | None:
    """The loaded NVIDIA driver's release numbers (``/proc/driver/nvidia/version``, the
    module's version), or None when the host does not show one."""
    drivers = getattr(host, "drivers", None) or {}
    got = release(drivers.get("nvidia"))
    return got if len(got) >= 2 else None


def runs_on(wheel: Wheel, capability: int) -> bool:
    """Whether the wheel has kernels for a GPU of this compute capability (major*10+minor)."""
    if any(s // 10 == capability // 10 and s <= capability for s in wheel.sass):
        return True
    return wheel.ptx is not None and wheel.ptx <= capability


def _line(version: str | None) -> str | None:
    r = release(version)
    return f"{r[0]}.{r[1]}" if len(r) >= 2 else None


def wheel_of(torch_version: str | None, cuda: str | None) -> Wheel | None:
    """The table row of an installed torch (``2.8.0+cu128``, or its CUDA ``12.8``)."""
    line = _line(torch_version)
    local = (torch_version or "").partition("+")[2]
    index = local if local.startswith("cu") else None
    if index is None and cuda:
        r = release(cuda)
        index = f"cu{r[0]}{r[1]}" if len(r) >= 2 else None
    return next((w for w in WHEELS if w.torch == line and w.index == index), None)


@dataclass(frozen=True)
class Advice:
    """The index to use for these GPUs and why (empty when the default index serves them);
    ``torch_pin`` names the torch release line to stay on or go back to."""

    wheel: Wheel | None
    reason: str
    torch_pin: str | None = None
    source: str = ""

    @property
    def command(self) -> str | None:
        if self.wheel is None:
            return None
        return pip_command(self.wheel.index, self.torch_pin)


def _covering(line: str, caps: Sequence[int], driver: tuple[int, ...] | None = None) -> list[Wheel]:
    rows = [w for w in WHEELS if w.torch == line and all(runs_on(w, c) for c in caps)
            and driver_runs(w, driver)]  # fmt: skip
    # stable before experimental, then the newest CUDA: what PyTorch itself recommends first
    return sorted(rows, key=lambda w: (not w.stable, -int(w.index[2:])))


def _last_with(index: str) -> Wheel | None:
    """The newest release's row for an index: what ``pip install torch --index-url`` gets."""
    return next((w for w in reversed(WHEELS) if w.index == index), None)


def caps_text(w: Wheel) -> str:
    return ", ".join(f"{s // 10}.{s % 10}" for s in w.sass) + (
        f" (+PTX {w.ptx // 10}.{w.ptx % 10})" if w.ptx else ""
    )


def advise(
    gpus: Sequence[tuple[int, str]],
    *,
    line: str | None = None,
    default_index: str = "cu128",
    driver: tuple[int, ...] | None = None,
) -> Advice:
    """Which wheel index has kernels for every GPU (``(capability, label)`` pairs).

    ``line`` is the installed torch's release line (``"2.11"``) when it must be replaced:
    the advice stays on it when one of its indexes serves the GPUs. Without it, the default
    index is kept when its newest torch serves them (an empty reason), else the newest
    release's index that does, else the newest older release that still has one. ``driver``
    (the loaded NVIDIA driver's release numbers) rules out the wheels whose CUDA it cannot run;
    when it rules out all of them, the advice is to update the driver first.
    """
    caps = sorted({c for c, _ in gpus})
    if driver is not None:
        any_driver = advise(gpus, line=line, default_index=default_index)
        if any_driver.wheel is not None and not driver_runs(any_driver.wheel, driver):
            return _with_driver(gpus, line, default_index, driver, any_driver)
        return any_driver
    what = ", ".join(dict.fromkeys(lbl for _, lbl in gpus))
    if line in RELEASES:
        ok = _covering(line, caps)
        if ok:
            w = ok[0]
            return Advice(w, f"torch {line}'s {w.index} wheels have kernels for {what}",
                          line, w.source)  # fmt: skip
    gone = _last_with(default_index)
    if line is None and gone is not None and all(runs_on(gone, c) for c in caps):
        return Advice(gone, "", None, gone.source)
    if gone is not None and line is None:
        bad = ", ".join(dict.fromkeys(lbl for c, lbl in gpus if not runs_on(gone, c)))
        lacking = (
            f"PyTorch's {default_index} wheels have no kernels for {bad} (torch {gone.torch}, "
            f"the newest on that index, is built for compute capability {caps_text(gone)})"
        )
    else:
        lacking = f"no CUDA wheel of torch {line} has kernels for {what}"
    for i, older in enumerate(reversed(RELEASES)):
        ok = _covering(older, caps)
        if ok:
            w = ok[0]
            if i == 0:
                return Advice(w, f"{lacking}; torch {older}'s {w.index} wheels have them",
                              None, w.source)  # fmt: skip
            return Advice(
                w,
                f"{lacking}; no CUDA wheel of torch {NEWEST} has them either: torch {older} is "
                f"the newest release whose {w.index} wheels do",
                older,
                w.source,
            )
    none = f"no PyTorch CUDA wheel from {RELEASES[0]} to {NEWEST} has kernels for {what}"
    if caps[0] >= 50:
        return Advice(None, f"{none}; build torch from source with TORCH_CUDA_ARCH_LIST set for "
                      "it", None, MATRIX)  # fmt: skip
    # below Maxwell no toolkit current torch builds with can compile for it: no source build
    oldest = min(s for w in WHEELS for s in w.sass)
    reason = (
        f"{none} (the oldest they carry is compute capability {oldest // 10}.{oldest % 10}), "
        "and CUDA 12 and later cannot build for it (CUDA 12.0 release notes: Kepler and older "
        "removed)"
    )
    if caps[0] < 30:
        reason += f"; no PyTorch wheel ever had kernels for it: {OLDEST_BUILDS}"
    return Advice(None, reason, None, f"{MATRIX}; {OLDEST_SOURCE}")


def _with_driver(gpus: Sequence[tuple[int, str]], line: str | None, default_index: str,
                 driver: tuple[int, ...], plain: Advice) -> Advice:  # fmt: skip
    """The advice when the loaded driver cannot run the index ``plain`` names: the newest
    release whose wheels it runs and that has kernels for the GPUs, else update the driver."""
    caps = sorted({c for c, _ in gpus})
    w0 = plain.wheel
    if w0 is None:  # pragma: no cover - the caller passes an advice that names a wheel
        return plain
    too_old = driver_problem(w0, driver)
    # the installed line first (as without a driver), then the newest release down
    for older in ([line] if line is not None and line in RELEASES else []) + list(
        reversed(RELEASES)
    ):
        ok = _covering(older, caps, driver)
        if ok:
            w = ok[0]
            pin = None if older == NEWEST and line is None else older
            return Advice(w, f"{too_old}; torch {older}'s {w.index} wheels run on it and have "
                          f"kernels for the GPUs; or update the NVIDIA driver to "
                          f"{_text(_need(w0))} or newer and use {w0.index}", pin,
                          f"{w.source}; {DRIVER_SOURCE}")  # fmt: skip
    return Advice(w0, f"{too_old}, and no CUDA wheel from {RELEASES[0]} to {NEWEST} runs on "
                  f"that driver: update the NVIDIA driver to {_text(_need(w0))} or newer first",
                  plain.torch_pin, f"{w0.source}; {DRIVER_SOURCE}")  # fmt: skip


def wheel_for(arch: str, *, default_index: str | None = None) -> WheelAdvice:
    """One device's answer (``arch`` is ``sm_60``, ``6.0`` or ``60``): the index with kernels
    for it, the release to pin when only an older one has them, or that no wheel does."""
    from ._arch import SM, normalise

    sm = normalise(arch)
    row = SM.get(sm or "")
    if sm is None:
        return WheelAdvice("none", None, None, f"{arch!r} is not a compute capability", MATRIX)
    if default_index is None:
        from hwbackends.facts import TORCH_INDEXES

        default_index = TORCH_INDEXES["cuda"].rstrip("/").rpartition("/")[2]
    label = f"{sm} ({row.family})" if row is not None else sm
    a = advise([(int(sm[3:]), label)], default_index=default_index)
    if a.wheel is None:
        status: Literal["default", "index", "older", "none"] = "none"
    elif not a.reason:
        status = "default"
    else:
        status = "older" if a.torch_pin else "index"
    index = a.wheel.index if a.wheel is not None else None
    return WheelAdvice(status, index, a.torch_pin, a.reason, a.source)
