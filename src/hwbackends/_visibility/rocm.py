"""AMD ROCm: ``ROCR_VISIBLE_DEVICES``, then ``HIP_VISIBLE_DEVICES`` / ``CUDA_VISIBLE_DEVICES``.

Physical index
    Position among the host's AMD devices, which is KFD node order (what ROCr enumerates).

Two layers compose (spec §2.4): ROCr filters and reorders the physical GPUs, and HIP indexes
the ROCr-filtered list (``ROCR=2,3 HIP=1`` is physical 3).

ROCr (spec §2.2, observed in ROCm/ROCR-Runtime ``src/core/runtime/amd_filter_device.cpp``):
unset -> all; ``""`` -> none; tokens split on ``,`` (a trailing comma adds nothing), ASCII
upper-cased and trimmed; only the first ``min(#GPUs, #tokens)`` tokens are examined; a token
starting with ``G`` is a UUID prefix of 5..20 characters that must match exactly one GPU; any
other token is ``strtol(token, &end, 0)`` (``0x`` hex, ``0`` octal) with nothing left over;
negative, out of range, unknown, ambiguous or repeated tokens end the list. An empty token
among the examined ones makes ROCr call ``std::string::at(0)`` on an empty string; the HSA API
wrapper turns the exception into an initialisation failure, so the model says "no GPU" and
marks the answer uncertain (spec §13 leaves this open).

HIP (spec §2.3, observed in ROCm/clr ``rocclr/device/rocm/rocdevice.cpp``): the list is
``HIP_VISIBLE_DEVICES`` when non-empty, else ``CUDA_VISIBLE_DEVICES`` when non-empty, else no
filtering (empty means all, ROCm/hip#3001). Tokens containing ``GPU-`` pick the first agent
whose lower-case UUID contains them (case-sensitive, no ambiguity check). A token is valid
only when it is exactly ``str(n)`` with ``n`` below the number of ROCr agents; the first
invalid token ends the list; repeats are skipped silently. ``GPU_DEVICE_ORDINAL`` is ignored:
the HIP code path does not read it although the ROCm docs say it applies (sources disagree;
a warning is given when it is set).
"""

from __future__ import annotations

from hwbackends._visibility.base import (
    C_SPACE,
    Trace,
    VisibleUnit,
    c_strtol_base0,
    canonical_uint,
    devices_of,
    require_indices,
    show,
    units_from,
)
from hwbackends._visibility.cuda import torch_count_list, torch_parse
from hwbackends._visibility.kinds import RocmDevices

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from hwbackends._visibility.shapes import HostLike

VENDOR = "GPU"
VARIABLES = RocmDevices.variables
UNSET = RocmDevices.unset

_ASCII_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def rocr_tokens(value: str) -> list[str]:
    """``std::getline(stream, token, ',')``: a trailing delimiter yields no extra token."""
    tokens = value.split(",")
    if len(tokens) > 1 and tokens[-1] == "":
        tokens.pop()
    return tokens


def rocr_filter(value: str | None, uuids: Sequence[str | None], t: Trace) -> list[int]:
    """ROCr's selection of physical GPUs (positions), in the order the runtime surfaces them."""
    n = len(uuids)
    if value is None:
        t.step("ROCR_VISIBLE_DEVICES unset: ROCr surfaces every GPU in KFD node order.")
        return list(range(n))
    if value == "":
        t.step("ROCR_VISIBLE_DEVICES is empty: ROCr surfaces no GPU (spec §2.2).")
        return []
    upper = [u.translate(_ASCII_UPPER) if u else None for u in uuids]
    tokens = rocr_tokens(value)
    examined = tokens[: min(n, len(tokens))]
    if len(tokens) > len(examined):
        t.step(f"ROCr examines only the first {len(examined)} token(s) (one per GPU).")
    picked: list[int] = []
    for i, raw in enumerate(examined):
        tok = raw.translate(_ASCII_UPPER).strip(C_SPACE)
        if not tok:
            t.warn(
                f"ROCR_VISIBLE_DEVICES has an empty entry at position {i}: ROCr throws while "
                "parsing it and HSA initialisation most likely fails, so no GPU is assumed "
                "(spec §2.2, §13: not verified). Remove the empty entry.",
                uncertain=True,
            )
            return []
        why = ""
        idx: int | None = None
        if tok[0] == "G":
            hits = [k for k, u in enumerate(upper) if u is not None and u.startswith(tok)]
            if not 5 <= len(tok) <= 20:
                why = "is a UUID of the wrong length (5..20 characters)"
            elif len(hits) != 1:
                why = "is an ambiguous UUID prefix" if hits else "names no GPU UUID"
            else:
                idx = hits[0]
        else:
            number, rest = c_strtol_base0(tok)
            if number is None or rest:
                why = "is not a whole number (strtol base 0)"
            elif not 0 <= number < n:
                why = f"is out of range (only {n} GPUs)"
            else:
                idx = number
        if idx is not None and idx in picked:
            why = "repeats a GPU (ROCr treats repeats as terminators)"
            idx = None
        if idx is None:
            t.step(f"ROCr entry {i} {show(raw)} {why}: the list ends; {len(picked)} kept.")
            return picked
        picked.append(idx)
        t.entry(f"ROCr entry {i} {show(raw)} is GPU {idx}.")
    return picked


def hip_tokens(value: str) -> list[str]:
    """clr's ``find_first_of`` loop: stops when the position reaches the end."""
    tokens: list[str] = []
    pos = 0
    while pos < len(value):
        end = value.find(",", pos)
        if end < 0:
            tokens.append(value[pos:])
            break
        tokens.append(value[pos:end])
        pos = end + 1
    return tokens


def hip_filter(value: str, agent_uuids: Sequence[str | None], source: str, t: Trace) -> list[int]:
    """HIP's selection among the ROCr agents; returns agent indices (positions in that list)."""
    # HSA_AMD_AGENT_INFO_UUID is "GPU-%016llx" (lower-case hex), "GPU-XX" without a UniqueID.
    lowered = [
        ("GPU-" + u[4:].lower() if u and u[:4].upper() == "GPU-" else u or "GPU-XX")
        for u in agent_uuids
    ]
    picked: list[int] = []
    for i, raw in enumerate(hip_tokens(value)):
        tok = raw
        if "GPU-" in tok:
            hit = next((k for k, u in enumerate(lowered) if tok in u), None)
            if hit is not None:
                tok = str(hit)
        idx = canonical_uint(tok)
        if idx is None or idx >= len(agent_uuids):
            t.step(
                f"{source} entry {i} {show(raw)} is not a valid index of the "
                f"{len(agent_uuids)} ROCr-visible GPU(s): the list ends; {len(picked)} kept."
            )
            break
        if idx in picked:
            t.entry(f"{source} entry {i} {show(raw)} repeats agent {idx}: skipped by HIP.")
            continue
        picked.append(idx)
        t.entry(f"{source} entry {i} {show(raw)} is ROCr agent {idx}.")
    return picked


def read(env: Mapping[str, str], host: HostLike, t: Trace) -> list[VisibleUnit]:
    gpus = devices_of(host)
    uuids = [d.uuid for d in gpus]
    t.step(f"Host: {len(gpus)} AMD GPU(s) in KFD node order.")
    rocr = t.read("ROCR_VISIBLE_DEVICES")
    hip = t.read("HIP_VISIBLE_DEVICES")
    cvd = t.read("CUDA_VISIBLE_DEVICES")
    gdo = t.read("GPU_DEVICE_ORDINAL")
    agents = rocr_filter(rocr, uuids, t)
    if hip:
        source, value = "HIP_VISIBLE_DEVICES", hip
    elif cvd:
        source, value = "CUDA_VISIBLE_DEVICES", cvd
    else:
        source, value = "", ""
    if hip == "" or (hip is None and cvd == ""):
        which = "HIP_VISIBLE_DEVICES" if hip == "" else "CUDA_VISIBLE_DEVICES"
        t.warn(
            f"{which} is set but empty: HIP treats that as unset and shows every GPU, unlike "
            "CUDA (spec §2.3, ROCm/hip#3001). To hide all GPUs set ROCR_VISIBLE_DEVICES=''."
        )
    if gdo is not None:
        t.warn(
            "GPU_DEVICE_ORDINAL is set: the ROCm docs say it filters HIP devices, but the HIP "
            "runtime's device setup reads it only for OpenCL (spec §2.3); it is ignored here. "
            "Use HIP_VISIBLE_DEVICES or ROCR_VISIBLE_DEVICES instead.",
            uncertain=True,
        )
    if source:
        if hip and cvd and hip != cvd:
            t.step("HIP_VISIBLE_DEVICES is non-empty, so CUDA_VISIBLE_DEVICES is ignored by HIP.")
        t.step(f"HIP reads {source} and indexes the {len(agents)} ROCr-visible GPU(s).")
        chosen = hip_filter(value, [uuids[a] for a in agents], source, t)
        picked = [agents[k] for k in chosen]
    else:
        t.step("HIP applies no filter: every ROCr-visible GPU is visible.")
        picked = agents
    _torch_checks(rocr, hip, cvd, uuids, len(picked), t)
    return units_from([(p, p, None, uuids[p] or str(p)) for p in picked])


def _torch_checks(
    rocr: str | None,
    hip: str | None,
    cvd: str | None,
    uuids: Sequence[str | None],
    runtime: int,
    t: Trace,
) -> None:
    """Compare with PyTorch's ROCm pre-init parser (spec §2.5)."""
    # amdsmi serials, lower-cased; candidates lose their "GPU-" prefix before matching.
    lowered = ["GPU-" + u[4:].lower() if u and u[:4].upper() == "GPU-" else None for u in uuids]
    try:
        if rocr is not None:
            rocr_count = len(rocr.split(","))
            if hip is not None:
                if len(hip.split(",")) > rocr_count:
                    t.warn(
                        "PyTorch's pre-init parser raises RuntimeError ('HIP_VISIBLE_DEVICES "
                        "contains more devices than ROCR_VISIBLE_DEVICES') from "
                        f"torch.cuda.device_count(), while the runtime exposes {runtime} "
                        "device(s) (spec §2.5)."
                    )
                    return
                parsed = torch_parse(hip)
            else:
                parsed = list(range(rocr_count))
        else:
            parsed = torch_parse(hip if hip is not None else cvd)
        count = torch_count_list(parsed, lowered, len(uuids))
    except ValueError:
        t.warn(
            "PyTorch's pre-init parser raises ValueError for these variables, so "
            "torch.cuda.device_count() fails before HIP is initialised (spec §2.5, §12.2)."
        )
        return
    if count is not None and count != runtime:
        t.warn(
            f"Before HIP is initialised, torch.cuda.device_count() reports {count} device(s) "
            f"but the ROCm runtime exposes {runtime}; the count changes once HIP starts "
            "(spec §2.5). The runtime's answer is shown."
        )


def write(
    physical: Sequence[int], host: HostLike, env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """ROCr does the selection and ordering; HIP is pinned to the identity over it.

    Sets ``ROCR_VISIBLE_DEVICES`` to the physical indices (KFD order) and
    ``HIP_VISIBLE_DEVICES`` to ``0..k-1``, which overrides any ``CUDA_VISIBLE_DEVICES`` inside
    HIP and keeps PyTorch's pre-init count right. The caller must remove
    ``CUDA_VISIBLE_DEVICES`` (vLLM and Ray insist it equals HIP's) and ``GPU_DEVICE_ORDINAL``
    (see ``UNSET``). An empty selection is ``ROCR_VISIBLE_DEVICES=""`` (ROCr's "no GPU") with
    ``HIP_VISIBLE_DEVICES=""`` (so that PyTorch's pre-init count is 0 too).
    """
    gpus = devices_of(host)
    sel = require_indices("rocm", physical, len(gpus), "AMD GPUs")
    if not sel:
        return {"ROCR_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": ""}
    return {
        "ROCR_VISIBLE_DEVICES": ",".join(str(p) for p in sel),
        "HIP_VISIBLE_DEVICES": ",".join(str(i) for i in range(len(sel))),
    }
