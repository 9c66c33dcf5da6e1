"""The process's OpenCL device: one context and one in-order queue, shared by every executable.

pyopencl is imported here, on first use, so that building for other targets
never needs it. ``RELAXSCRIPT_OPENCL_DEVICE`` ("platform:device" indices,
default "0:0") picks the device when several exist.
"""
from __future__ import annotations

import os

_DEVICE = []


class OpenCLUnavailableError(RuntimeError):
    """pyopencl or an OpenCL device is missing."""


def opencl_device():
    """The shared ``OpenCLDevice`` (created on first use)."""
    if not _DEVICE:
        _DEVICE.append(OpenCLDevice())
    return _DEVICE[0]


class OpenCLDevice:
    def __init__(self):
        try:
            import pyopencl as cl
        except ImportError as err:
            raise OpenCLUnavailableError(
                f"the opencl target needs pyopencl and an OpenCL driver (pip install "
                f"'relaxscript[opencl]' installs pyopencl and the PoCL CPU device): {err}") from None
        choice = os.environ.get("RELAXSCRIPT_OPENCL_DEVICE", "0:0")
        try:
            platform_index, device_index = (int(part) for part in choice.split(":"))
            platforms = cl.get_platforms()
            device = platforms[platform_index].get_devices()[device_index]
        except (ValueError, IndexError, cl.Error) as err:
            raise OpenCLUnavailableError(f"no OpenCL device {choice!r} (RELAXSCRIPT_OPENCL_DEVICE): {err}") from None
        self.cl = cl
        self.device = device
        self.context = cl.Context([device])
        self.queue = cl.CommandQueue(self.context)
        self.base_align = max(1, device.mem_base_addr_align // 8)   # bytes a sub-buffer must start at

    def __repr__(self) -> str:
        return f"<OpenCLDevice {self.device.name!r}>"
