"""Which PyTorch ROCm wheel index has kernels for which gfx targets, per torch release.

AMD's ROCm support list (``_arch.GFX``'s ``support``) and PyTorch's wheels are different
facts: a wheel runs a GPU when its gfx target is in the ``PYTORCH_ROCM_ARCH`` the wheel was
built with *and* the ROCm libraries bundled into it (rocBLAS first: every GEMM goes through
it) ship kernels for that target. A target missing from either fails at the first kernel
("HIP error: invalid device function", or rocBLAS's "Cannot read TensileLibrary.dat ... for
GPU arch").

One row per (torch release, wheel index) on download.pytorch.org, Linux x86_64. Sources,
each row citing its own (file@tag in pytorch/pytorch):

* ``.github/scripts/generate_binary_build_matrix.py`` ``ROCM_ARCHES``: the ROCm versions a
  release builds wheels for; ``RELEASE.md`` "Release Compatibility Matrix" names the stable
  one.
* ``.ci/docker/manywheel/build.sh``: the ``PYTORCH_ROCM_ARCH`` each ROCm builder image passes
  to the wheel build (``.ci/manywheel/build_rocm.sh`` copies only those targets' rocBLAS,
  hipBLASLt and MIOpen files into the wheel). Changes between releases: gfx1200/gfx1201 from
  pytorch/pytorch#148562 (before 2.7); gfx950/gfx1150/gfx1151 for every ROCm version from
  pytorch/pytorch#167299 (2.10); gfx1103 from pytorch/pytorch#179653 (2.13); the rocm7.14
  index installs ROCm from AMD's TheRock wheels without gfx900/gfx906 (pytorch/pytorch#190276,
  2.14).
* Bundled-library gaps (``no_blas``): rocBLAS from ROCm 6.4 on ships no Tensile kernels for
  gfx900 or gfx906 although ``PYTORCH_ROCM_ARCH`` still lists them: ROCm/ROCm#4625 ("The
  rocblas of 6.4.0 release doesn't ship TensileLibrary files for gfx906"; "rocm 6.3 worked
  fine") and pytorch/pytorch#179865 (a rocm7.2 wheel aborts on gfx900: its rocBLAS lists no
  gfx900 Tensile library).
"""

from __future__ import annotations

from hwbackends.facts import WheelAdvice, release
from hwbackends.plugin import frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "NEWEST",
    "RELEASES",
    "WHEELS",
    "RocmWheel",
    "advise",
    "install_line",
    "lacking",
    "wheel_for",
    "wheel_of",
]

_GH = "pytorch/pytorch "
_BUILD = ".ci/docker/manywheel/build.sh"
_MATRIX = ".github/scripts/generate_binary_build_matrix.py"
NO_BLAS_SOURCE = (
    "ROCm/ROCm#4625 (rocBLAS 6.4.0 ships no TensileLibrary for gfx906 or gfx900; 6.3 did) and "
    "pytorch/pytorch#179865 (torch 2.12 rocm7.2: rocBLAS has no gfx900 Tensile library)"
)

PRE_GCN_SOURCE = (
    "amdgpu_unsupported_pciidlist in Linux drivers/gpu/drm/amd/amdgpu/amdgpu_drv.c; "
    f"{_GH}{_BUILD}@release/2.14 (PYTORCH_ROCM_ARCH names gfx targets only)"
)

_VEGA = ("gfx900", "gfx906")
# PYTORCH_ROCM_ARCH as .ci/docker/manywheel/build.sh sets it, in its own order
_A27 = (*_VEGA, "gfx908", "gfx90a", "gfx942", "gfx1030", "gfx1100", "gfx1101", "gfx1102",
        "gfx1200", "gfx1201")  # fmt: skip
_A210 = (*_A27, "gfx950", "gfx1150", "gfx1151")
_A213 = (*_A27[:9], "gfx1103", "gfx1200", "gfx1201", "gfx950", "gfx1150", "gfx1151")
_THEROCK = _A213[2:]  # the rocm7.14 builder: the common list, without gfx900/gfx906


@frozen
class RocmWheel:
    """One ROCm wheel index of one torch release line (``torch`` is ``"2.9"``)."""

    torch: str
    index: str  # "rocm6.3"
    archs: tuple[str, ...]  # PYTORCH_ROCM_ARCH
    source: str
    no_blas: tuple[str, ...] = ()  # listed targets whose bundled rocBLAS has no kernels

    @property
    def rocm(self) -> str:
        return self.index.removeprefix("rocm")

    def carries(self, arch: str) -> bool:
        """Whether both torch's kernels and the bundled rocBLAS's run this gfx target."""
        return arch in self.archs and arch not in self.no_blas


def _src(tag: str, note: str = "") -> str:
    where = f"{_GH}{_BUILD}@{tag} (PYTORCH_ROCM_ARCH), {_MATRIX}@{tag} (ROCM_ARCHES)"
    return where + (f"; {note}" if note else "")


def _rows(torch: str, indexes: tuple[str, ...], archs: tuple[str, ...], note: str = "",
          therock: str | None = None) -> list[RocmWheel]:  # fmt: skip
    out = []
    for index in indexes:
        r = release(index.removeprefix("rocm"))
        gap = _VEGA if r >= (6, 4) else ()  # rocBLAS without gfx900/gfx906 from ROCm 6.4 on
        own = _THEROCK if index == therock else archs
        src = _src(f"release/{torch}", note) + (f"; {NO_BLAS_SOURCE}" if gap else "")
        out.append(RocmWheel(torch, index, own, src, tuple(a for a in gap if a in own)))
    return out


WHEELS: tuple[RocmWheel, ...] = (
    *_rows("2.7", ("rocm6.2.4", "rocm6.3"), _A27, "gfx1200/gfx1201 from pytorch/pytorch#148562"),
    *_rows("2.8", ("rocm6.3", "rocm6.4"), _A27),
    *_rows("2.9", ("rocm6.3", "rocm6.4"), _A27),
    *_rows("2.10", ("rocm7.0", "rocm7.1"), _A210,
           "gfx950/gfx1150/gfx1151 for every ROCm version: pytorch/pytorch#167299"),
    *_rows("2.11", ("rocm7.1", "rocm7.2"), _A210),
    *_rows("2.12", ("rocm7.1", "rocm7.2"), _A210),
    *_rows("2.13", ("rocm7.1", "rocm7.2"), _A213, "gfx1103 from pytorch/pytorch#179653"),
    *_rows("2.14", ("rocm7.2", "rocm7.14"), _A213,
           "rocm7.14 from AMD's TheRock wheels, without gfx900/gfx906: pytorch/pytorch#190276, "
           "pytorch/test-infra#8451", therock="rocm7.14"),
)  # fmt: skip

RELEASES: tuple[str, ...] = tuple(dict.fromkeys(w.torch for w in WHEELS))
NEWEST = RELEASES[-1]


def _line(version: str | None) -> str | None:
    r = release(version)
    return f"{r[0]}.{r[1]}" if len(r) >= 2 else None


def wheel_of(torch_version: str | None, hip: str | None = None) -> RocmWheel | None:
    """The table row of an installed torch (``2.8.0+rocm6.4``, else its HIP ``6.4.43482``)."""
    line = _line(torch_version)
    local = (torch_version or "").partition("+")[2]
    rows = [w for w in WHEELS if w.torch == line]
    if local.startswith("rocm"):
        return next((w for w in rows if local == w.index or local.startswith(w.index + ".")),
                    None)  # fmt: skip
    h = release(hip)
    return next((w for w in rows if h[:2] == release(w.rocm)[:2]), None) if h else None


def _best(line: str, archs: Sequence[str]) -> RocmWheel | None:
    """The release's newest-ROCm index that runs every target, if any."""
    rows = [w for w in WHEELS if w.torch == line and all(w.carries(a) for a in archs)]
    return max(rows, key=lambda w: release(w.rocm), default=None)


def _why_not(w: RocmWheel, arch: str) -> str:
    if arch in w.no_blas:
        return (
            f"list {arch} in PYTORCH_ROCM_ARCH but bundle a rocBLAS (ROCm {w.rocm}) with no "
            f"{arch} kernels"
        )
    return f"are not built for {arch} (PYTORCH_ROCM_ARCH: {', '.join(w.archs)})"


def lacking(w: RocmWheel, gpus: Sequence[tuple[str, str]]) -> str:
    """``label: PyTorch's rocmX wheels of torch Y ...`` for each GPU the row cannot run."""
    return "; ".join(
        f"{lbl}: PyTorch's {w.index} wheels of torch {w.torch} {_why_not(w, a)}"
        for a, lbl in gpus
        if not w.carries(a)
    )


def _with(source: str, cite: str) -> str:
    return source if not cite or cite[2:] in source else source + cite


def _last_with(index: str) -> RocmWheel | None:
    return next((w for w in reversed(WHEELS) if w.index == index), None)


def advise(gpus: Sequence[tuple[str, str]], *, line: str | None = None,
           default_index: str = "rocm6.4") -> WheelAdvice:  # fmt: skip
    """Which wheel index has kernels for every GPU (``(gfx target, label)`` pairs).

    ``line`` is the installed torch's release line when its wheel lacks kernels: the advice
    stays on it when another of its indexes serves the GPUs. Without it, the default index is
    kept when its newest torch serves them, else the newest release's index that does, else
    the newest older release that still has one, else none.
    """
    archs = list(dict.fromkeys(a for a, _ in gpus))
    gap = any(w.no_blas and a in w.no_blas for w in WHEELS for a in archs)
    cite = f"; {NO_BLAS_SOURCE}" if gap else ""  # why a listed target may still lack kernels
    label = {a: lbl for a, lbl in gpus}
    what = ", ".join(label[a] for a in archs)
    if line in RELEASES:
        w = _best(line, archs)
        if w is not None:
            return WheelAdvice("index", w.index, line,
                               f"torch {line}'s {w.index} wheels have kernels for {what}",
                               _with(w.source, cite))  # fmt: skip
    gone = _last_with(default_index)
    if gone is not None and line is None and all(gone.carries(a) for a in archs):
        return WheelAdvice("default", gone.index, None, "", gone.source)
    if gone is not None and line is None:
        lacking = "; ".join(
            f"PyTorch's {gone.index} wheels (torch {gone.torch}, the newest on that index) "
            f"{_why_not(gone, a)}"
            for a in archs
            if not gone.carries(a)
        )
    else:
        lacking = f"no ROCm wheel of torch {line} has kernels for {what}"
    for i, older in enumerate(reversed(RELEASES)):
        w = _best(older, archs)
        if w is None:
            continue
        if i == 0:
            return WheelAdvice("index", w.index, None,
                               f"{lacking}; torch {older}'s {w.index} wheels have them",
                               _with(w.source, cite))  # fmt: skip
        return WheelAdvice(
            "older",
            w.index,
            older,
            f"{lacking}; no ROCm wheel of torch {NEWEST} has them either: torch {older}'s "
            f"{w.index} wheels are the last with kernels for {what}",
            _with(w.source, cite),
        )
    return WheelAdvice(
        "none",
        None,
        None,
        f"no PyTorch ROCm wheel from {RELEASES[0]} to {NEWEST} has kernels for {what}",
        WHEELS[-1].source,
    )


def wheel_for(arch: str | None, *, pre_gcn: bool = False,
              default_index: str | None = None) -> WheelAdvice:  # fmt: skip
    """One device's answer: the wheel with kernels for its gfx target, beside AMD's own list.

    ``arch`` is the device's gfx target (``"gfx906"``); ``pre_gcn`` marks a GPU older than GCN
    (no gfx target at all: no PyTorch wheel supports it, and no ROCm advice is given).
    ``default_index`` is the index the backend's plain install line uses (``rocm6.4``).
    """
    from ._arch import GFX, SYSREQ

    if pre_gcn:
        return WheelAdvice("none", None, None, "no PyTorch wheel supports it: it is older than "
                           "GCN, which ROCm, the amdgpu driver and every PYTORCH_ROCM_ARCH "
                           "target start at", PRE_GCN_SOURCE)  # fmt: skip
    if not arch:
        return WheelAdvice("none", None, None, "its gfx target is unknown, so no wheel can be "
                           "named for it", WHEELS[-1].source)  # fmt: skip
    if default_index is None:
        from hwbackends.facts import TORCH_INDEXES

        default_index = TORCH_INDEXES["rocm"].rstrip("/").rpartition("/")[2]
    row = GFX.get(arch)
    label = f"{arch} ({row.products})" if row is not None else arch
    advice = advise([(arch, label)], default_index=default_index)
    if row is None:
        vendor = f"{arch} is not in hwbackends' table of AMD's support list"
    elif row.support == "supported":
        vendor = ""
    else:
        vendor = f"AMD's ROCm support list has {arch} as {row.support} ({SYSREQ.split()[0]})"
    return WheelAdvice(advice.status, advice.index, advice.release, advice.reason,
                       advice.source, vendor)  # fmt: skip


def install_line(advice: WheelAdvice) -> str | None:
    """The fix text of an advice: the pip line with its reason, or the reason alone."""
    if advice.status == "default":
        return None
    cmd = advice.command
    if cmd is None:
        return advice.reason
    return cmd + (f" ({advice.reason})" if advice.reason else "")
