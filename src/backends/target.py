"""The one interface between the VM / ``rx.build`` and a code-generation target.

A target is a folder of ``backends`` (``c``, ``opencl``, ``cuda``, ``interp``)
whose ``target`` module defines a ``TargetBackend``. The backend turns the
module's kernels into a ``KernelImage`` (serializable: source and binary
bytes plus per-kernel metadata) and loads an image into a ``KernelModule``,
which links a VM ``CallKernel`` to a step function, calls kernels directly on
NumPy arrays, and owns device memory (``DeviceMemory``) where the target has
its own. ``relaxscript`` reaches targets only through ``get_backend``: it
never imports a target folder.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from math import prod

import numpy as np

TARGET_KINDS = ("c", "interp", "opencl", "cuda")
DEFAULT_CUDA_ARCH = "sm_80"


class TargetError(ValueError):
    """A target string or object that does not name a known target."""


class TargetMismatchError(ValueError):
    """Saved kernels built for a machine this one is not (a CPU instruction set it lacks)."""


@dataclass(frozen=True)
class Target:
    """A parsed target: ``kind`` ("c", "interp", "opencl", "cuda") and, for CUDA, ``arch``."""
    kind: str
    arch: str = ""

    @staticmethod
    def parse(spec) -> "Target":
        """``"c"``, ``"interp"``, ``"opencl"``, ``"cuda"``, ``"cuda -arch=sm_90"`` or a ``Target``."""
        if isinstance(spec, Target):
            return spec
        if not isinstance(spec, str):
            raise TargetError(f"a target is a string such as 'c' or 'cuda -arch=sm_90' or a Target, "
                              f"got {type(spec).__name__}")
        words = spec.split()
        if not words or words[0] not in TARGET_KINDS:
            raise TargetError(f"unknown build target {spec!r}; known targets: {', '.join(TARGET_KINDS)}")
        kind, arch = words[0], ""
        for option in words[1:]:
            if kind == "cuda" and option.startswith("-arch="):
                arch = option[len("-arch="):]
                if not (arch.startswith(("sm_", "compute_")) and arch.split("_", 1)[1].rstrip("a").isdigit()):
                    raise TargetError(f"target {spec!r}: -arch must look like sm_80 or compute_90, got {arch!r}")
            else:
                raise TargetError(f"target {spec!r}: unknown option {option!r} for {kind!r}")
        if kind == "cuda" and not arch:
            arch = DEFAULT_CUDA_ARCH
        return Target(kind, arch)

    def __str__(self) -> str:
        return f"{self.kind} -arch={self.arch}" if self.arch else self.kind


class KernelImage:
    """Compiled kernels of one executable, as plain data (saved with the executable).

    ``target``: the Target built for; ``kernel_names``: the kernels it holds;
    ``source``: the generated kernel-language text ("" for interp);
    ``compiled``: whether producing it ran a compiler (False on a cache hit or load)."""
    target: Target
    source: str
    compiled: bool

    def kernel_names(self) -> list[str]:
        raise NotImplementedError

    def encode(self, encoder) -> dict:
        """The image as manifest data; large bytes go through ``encoder.payload``."""
        raise NotImplementedError


class DeviceArray:
    """What every target's device tensor shares: C-contiguous ``.shape``/``.dtype`` over device
    memory, ``.numpy()`` (the one copy a target writes), and NumPy conversion through it."""
    class _Flags:
        c_contiguous = True

    flags = _Flags()
    device_name = "device"

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def numpy(self) -> np.ndarray:
        raise NotImplementedError

    def __array__(self, dtype=None, copy=None):
        host = self.numpy()
        return host if dtype is None else host.astype(dtype)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} shape={self.shape} dtype={self.dtype.name}>"


class DeviceMemory:
    """Storage of a target whose kernels do not read host memory.

    Registers of the VM then hold device arrays (``.shape``, ``.dtype``,
    ``.ndim``, ``.numpy()``); NumPy arguments are copied in at their first
    kernel use and results are copied out unless the caller passed device arrays."""
    device_array_type: type

    def empty(self, shape: tuple, dtype) -> object:
        raise NotImplementedError

    def storage(self, nbytes: int) -> object:
        raise NotImplementedError

    def view(self, storage, offset: int, shape: tuple, dtype) -> object:
        """A tensor placed in ``storage`` at byte ``offset``."""
        raise NotImplementedError

    def to_device(self, array) -> object:
        raise NotImplementedError

    def write(self, array, host) -> None:
        """Copy the NumPy array ``host`` into the device array ``array`` (same shape and dtype)."""
        raise NotImplementedError

    def copy_bytes(self, dst, src) -> None:
        """Copy the first ``src.nbytes`` bytes of device array ``src`` into device array ``dst``."""
        raise NotImplementedError

    # The walks over results are the same for every device: only the copies differ.
    def to_host(self, value):
        """``value`` with every device array in it (tuples included) copied to NumPy."""
        if isinstance(value, self.device_array_type):
            return value.numpy()
        if type(value) is tuple:
            return tuple(self.to_host(v) for v in value)
        return value

    def to_device_all(self, value):
        """``value`` with every NumPy array in it (tuples included) copied to the device."""
        if isinstance(value, np.ndarray):
            return self.to_device(value)
        if type(value) is tuple:
            return tuple(self.to_device_all(v) for v in value)
        return value

    def copy_views(self, value):
        """``value`` with every device array that views a storage copied into its own buffer."""
        if isinstance(value, self.device_array_type) and value.is_view:
            copy = self.empty(value.shape, value.dtype)
            if value.nbytes:
                self.copy_bytes(copy, value)
            return copy
        if type(value) is tuple:
            return tuple(self.copy_views(v) for v in value)
        return value


class KernelModule:
    """A loaded KernelImage.

    ``link(ins, nxt, frame, prologue, where)`` returns the VM step of one
    ``CallKernel`` (``frame.regs``, ``frame.ptrs``, ``frame.table``;
    ``prologue`` is the VM's run-time symbol work of the call, or None).
    ``module[name](*arrays, **scalars)`` calls one kernel directly.
    ``memory`` is None when kernels work on host NumPy arrays."""
    memory: DeviceMemory | None = None
    image: KernelImage

    @property
    def source(self) -> str:
        return self.image.source

    @property
    def compiled(self) -> bool:
        return self.image.compiled

    def link(self, ins, nxt: int, frame, prologue, where: str):
        raise NotImplementedError

    def __getitem__(self, name: str):
        raise NotImplementedError


class TargetBackend:
    """One target: what the pipeline does for it, building, decoding and loading images.

    ``schedule``: "cpu", "gpu" or None (which default-schedule pass the
    pipeline runs); ``library_dispatch``: whether matmuls go to
    ``call_dps_library`` (OpenBLAS) or stay generated kernels;
    ``native_library``: whether library calls may take their native C path."""
    kind: str
    schedule: str | None = None
    library_dispatch: bool = False
    native_library: bool = False

    def build(self, target: Target, kernels: dict) -> KernelImage:
        """``kernels``: name -> the scheduled signature PrimFunc the VM calls."""
        raise NotImplementedError

    def decode(self, target: Target, entry, decoder) -> KernelImage:
        """The image ``KernelImage.encode`` wrote; ValueError for anything malformed."""
        raise NotImplementedError

    def load(self, image: KernelImage) -> KernelModule:
        raise NotImplementedError

    def memory(self) -> DeviceMemory | None:
        """The target's device memory (None when kernels use host NumPy arrays)."""
        return None

    def thread_team(self):
        """The host thread team the VM sizes around each call (``backends.threading``), or None."""
        return None

    def built_cache_folder(self):
        """A private folder where whole built executables of this target may be kept
        (``relaxscript.llm.build_cache``), or None: this target's builds are not kept."""
        return None

    def machine_identity(self) -> str:
        """What decides this target's generated code besides the IR (compiler, flags, the CPU's
        features): a key part of kept builds."""
        return self.kind


def get_backend(target) -> TargetBackend:
    """The backend of ``target`` (a string or Target); imports only that target's folder."""
    kind = Target.parse(target).kind
    return importlib.import_module(f"backends.{kind}.target").BACKEND


def build_kernels(target, funcs) -> KernelModule:
    """Build and load PrimFuncs for ``target`` in one step (tests, benchmarks): ``module[name](*arrays)``."""
    from tensorir.function import PrimFunc
    from tensorir.transform.inline_subroutines import kernels_of
    if isinstance(funcs, PrimFunc):
        funcs = {funcs.name: funcs}
    funcs = kernels_of(dict(funcs))
    target = Target.parse(target)
    backend = get_backend(target)
    image = backend.build(target, dict(funcs))
    return backend.load(image)
