"""CUDA C -> PTX with NVRTC (cuda-bindings + nvidia-cuda-nvrtc-cu12), no GPU needed.

``compile_ptx(source, arch)`` targets the virtual architecture of ``arch``
("sm_80" -> compute_80), so the PTX loads on that GPU and later ones (the
driver compiles it on module load).
"""
from __future__ import annotations

import re

DEFAULT_ARCH = "sm_80"


class NVRTCError(RuntimeError):
    """NVRTC is missing or rejected the source; the message carries NVRTC's log."""


def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError:
        try:
            from cuda import nvrtc  # cuda-python < 12.6 spells the module this way
        except ImportError as exc:
            raise NVRTCError("NVRTC is not available: install the 'cuda' extra "
                             "(cuda-bindings and nvidia-cuda-nvrtc-cu12)") from exc
    return nvrtc



def virtual_arch(arch: str) -> str:
    match = re.fullmatch(r"(?:sm_|compute_)?(\d+)([af]?)", str(arch).strip())
    if match is None:
        raise NVRTCError(f"unknown CUDA architecture {arch!r}; expected e.g. 'sm_80' or 'sm_90'")
    return f"compute_{match.group(1)}{match.group(2)}"


def compile_ptx(source: str, arch: str = DEFAULT_ARCH, name: str = "relaxscript.cu") -> bytes:
    """PTX for ``source`` (CUDA C) at ``arch``; NVRTCError with the compile log when it fails."""
    nvrtc = _nvrtc()
    options = [f"--gpu-architecture={virtual_arch(arch)}".encode(), b"--std=c++17"]
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], [])
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise NVRTCError(f"NVRTC could not create a program: {err}")
    try:
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(options), options)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise NVRTCError(f"NVRTC could not compile {name} for {arch}:\n{_log(nvrtc, prog)}")
        err, size = nvrtc.nvrtcGetPTXSize(prog)
        ptx = b" " * size
        (err,) = nvrtc.nvrtcGetPTX(prog, ptx)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise NVRTCError(f"NVRTC could not return the PTX of {name}: {err}")
        return ptx.rstrip(b"\0")
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def _log(nvrtc, prog) -> str:
    err, size = nvrtc.nvrtcGetProgramLogSize(prog)
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS or size <= 1:
        return "(no log)"
    log = b" " * size
    nvrtc.nvrtcGetProgramLog(prog, log)
    return log.rstrip(b"\0").decode(errors="replace")
