"""The build targets the VM tests run through: every module that builds for "c" also builds for
"opencl" (PoCL's CPU device; skipped with a reason only when pyopencl is not installed)."""
from __future__ import annotations

import functools
import importlib.util

import pytest

HAVE_OPENCL = importlib.util.find_spec("pyopencl") is not None
OPENCL_REASON = "pyopencl is not installed (pip install 'relaxscript[opencl]')"
OPENCL = pytest.param("opencl", marks=pytest.mark.skipif(not HAVE_OPENCL, reason=OPENCL_REASON))

VM_TARGETS = ["c", "interp", OPENCL]          # for parametrize
COMPILED_TARGETS = ["c", OPENCL]              # targets that generate kernels
AVAILABLE_VM_TARGETS = ("c", "interp") + (("opencl",) if HAVE_OPENCL else ())   # for loops


@functools.lru_cache(maxsize=None)
def built_main(source: str, target: str):
    """``main`` of the module (or lone function) ``source``, built for ``target`` once per pair:
    a test file's cases over many dtypes and values share their builds."""
    import relaxscript as rx
    from tests.relaxscript.tvm_compat import module_of
    return rx.VirtualMachine(rx.build(module_of(source), target=target))["main"]
