"""The build targets the VM tests run through: every module that builds for "c" also builds for
"opencl" (PoCL's CPU device; skipped with a reason only when pyopencl is not installed)."""
from __future__ import annotations

import importlib.util

import pytest

HAVE_OPENCL = importlib.util.find_spec("pyopencl") is not None
OPENCL_REASON = "pyopencl is not installed (pip install 'relaxscript[opencl]')"
OPENCL = pytest.param("opencl", marks=pytest.mark.skipif(not HAVE_OPENCL, reason=OPENCL_REASON))

VM_TARGETS = ["c", "interp", OPENCL]          # for parametrize
COMPILED_TARGETS = ["c", OPENCL]              # targets that generate kernels
AVAILABLE_VM_TARGETS = ("c", "interp") + (("opencl",) if HAVE_OPENCL else ())   # for loops
