"""The C target's kernel image (C source + shared library bytes) and its loaded module.

Building: every kernel goes through ``tensorir.transform.lower`` and the C
code generator into ONE library, compiled by gcc into the per-user cache.
The image keeps the source and the library bytes, so loading a saved
executable never calls gcc; ``load`` opens the cache file holding exactly
those bytes (written from them when missing or damaged).
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

from ..host_pointer import data_pointer
from ..kernel_signature import bind_kernel_symbols, kernel_sym_vars
from ..target import KernelImage, KernelModule, Target
from .status import raise_for_status

# The "kernel_" prefix keeps kernel symbols (e.g. a fused kernel named "sigmoid")
# clear of the helper functions the C prelude defines (rs_sigmoid, ...).
KERNEL_PREFIX = "kernel_"


@dataclass
class CLibraryImage(KernelImage):
    """C source, the library's bytes, kernel name -> C symbol, and (for direct calls) the signatures.

    ``path`` only says where the library was built."""
    source: str
    library: bytes
    symbols: dict
    path: str = ""
    compiled: bool = False
    signatures: dict | None = None   # kernel name -> PrimFunc (fresh builds only: direct calls)
    target: Target = Target("c")
    isa: tuple = ()   # vector instruction sets the library may use (compiler.vector_isa names)

    def kernel_names(self) -> list[str]:
        return list(self.symbols)

    def encode(self, encoder) -> dict:
        from .library_cache import library_digest
        return {"source": self.source, "symbols": dict(self.symbols), "isa": list(self.isa),
                "sha256": library_digest(self.library), **encoder.payload(bytes(self.library))}

    def load(self) -> ctypes.CDLL:
        from ..threading import prepare_openmp
        from .library_cache import store_library
        prepare_openmp()   # before the library pulls in libgomp
        return ctypes.CDLL(str(store_library(self.library)))


def build_library(kernels: dict) -> CLibraryImage:
    """Lower, generate C and compile ``{name: signature PrimFunc}`` into one library."""
    from tensorir.transform import lower
    from tensorir.transform.localize_allocations import localize_allocations

    from .codegen import generate_c
    from .compiler import compile_shared, vector_isa
    signatures = {KERNEL_PREFIX + name: func for name, func in kernels.items()}
    # per-iteration scratch becomes local arrays of each thread (see localize_allocations)
    lowered = {name: localize_allocations(lower(func)) for name, func in signatures.items()}
    source, prefixed = generate_c(lowered, signatures=signatures)
    infos = {name: prefixed[KERNEL_PREFIX + name] for name in kernels}
    for name, func in kernels.items():
        if [id(v) for v in infos[name].sym_vars] != [id(v) for v in kernel_sym_vars(func)]:
            raise ValueError(f"kernel '{name}': the C backend's symbol order differs from the signature's")
    path, compiled = compile_shared(source)
    return CLibraryImage(source, path.read_bytes(), {n: infos[n].name for n in kernels}, str(path),
                         compiled=compiled, signatures=dict(kernels), isa=tuple(vector_isa()))


class CKernelModule(KernelModule):
    """Links ``CallKernel`` to ctypes calls of one loaded library (host NumPy memory).

    ``time_runs``: set before frames are linked, joined runs of kernel calls time each call
    (``kernel_runs.link_run``; benchmarks/profile_decode.py)."""
    time_runs = False

    def __init__(self, image: CLibraryImage):
        from ..threading import bind, team
        self.image = image
        self.lib = image.load()
        bind(self.lib)
        self.team = team()   # direct calls size it themselves; the VM sizes it around a whole call
        self.functions = {}
        for name, symbol in image.symbols.items():
            cfunc = getattr(self.lib, symbol)
            cfunc.argtypes = None   # arguments are prebuilt ctypes objects: no conversion per call
            cfunc.restype = ctypes.c_int32
            self.functions[name] = cfunc

    def bad_index(self) -> tuple[int, int]:
        """(value, extent) of the index the last failing kernel of this thread reported."""
        report = (ctypes.c_int64 * 2)()
        self.lib.rs_index_failure(report)
        return int(report[0]), int(report[1])

    def assert_message(self) -> str | None:
        """The message of the assert that stopped the last failing kernel of this thread."""
        getter = self.lib.rs_assert_failure
        getter.restype = ctypes.c_char_p
        getter.argtypes = []
        raw = getter()
        return raw.decode("utf-8", "replace") if raw is not None else None

    @property
    def path(self) -> str:
        return self.image.path

    def link(self, ins, nxt: int, frame, prologue, where: str):
        regs, ptrs, t = frame.regs, frame.ptrs, frame.table
        cfunc = self.functions[ins.kernel]
        bad_index, assert_message = self.bad_index, self.assert_message
        bufs = (ctypes.c_void_p * max(1, len(ins.buffers)))()
        syms = ctypes.c_void_p(ctypes.addressof(t) + 8 * ins.sym_base) if ins.sym_base >= 0 else None
        # prebound allocations (vm/prebind.py) keep their address for the frame's life: written once
        fixed = frame.fixed_ptr_regs
        for i, r in enumerate(ins.buffers):
            if r in fixed:
                bufs[i] = ptrs[r]
        cached = tuple((i, r) for i, r in enumerate(ins.buffers) if r in frame.ptr_regs and r not in fixed)
        computed = tuple((i, r) for i, r in enumerate(ins.buffers) if r not in frame.ptr_regs)
        label = f"{where}: kernel '{ins.kernel}'"
        # The array last seen at each computed slot: a model's weights and caches are the same
        # objects on every call, so their address is looked up once (holding the reference keeps
        # the object, and so its identity and data, alive).
        seen: list = [None] * len(computed)
        computed = tuple((k, i, r) for k, (i, r) in enumerate(computed))

        def step():
            if prologue is not None:
                prologue()
            for i, r in cached:
                bufs[i] = ptrs[r]
            for k, i, r in computed:
                value = regs[r]
                if value is not seen[k]:
                    bufs[i] = data_pointer(value)
                    seen[k] = value
            status = cfunc(bufs, syms)
            if status:
                raise_for_status(status, label, bad_index, assert_message)
            return nxt
        return step

    def link_run(self, calls, early: tuple, nxt: int, frame, fixed_values: dict, kills: tuple, where: str):
        """One VM step running consecutive kernel calls in one native call (``kernel_runs``), or None."""
        from .kernel_runs import link_run
        return link_run(self, calls, early, nxt, frame, fixed_values, kills, where)

    def __getitem__(self, name: str):
        if self.image.signatures is None:
            raise KeyError(f"kernel {name!r}: a loaded image keeps no signatures for direct calls")
        func, cfunc = self.image.signatures[name], self.functions[name]
        team = self.team

        def call(*arrays, **scalars) -> None:
            values = bind_kernel_symbols(name, func, arrays, scalars)
            bufs = (ctypes.c_void_p * max(1, len(arrays)))(*[a.ctypes.data for a in arrays])
            syms = (ctypes.c_int64 * max(1, len(values)))(*values)
            if team is not None:
                team.enter()
            try:
                status = cfunc(bufs, syms)
            finally:
                if team is not None:
                    team.leave()
            raise_for_status(status, f"kernel {name!r}", self.bad_index, self.assert_message)
        call.func = func
        return call
