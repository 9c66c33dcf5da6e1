"""Bit-level intrinsics in GPU kernels: T.reinterpret (float16/32/64 and integers of their width),
T.popcount and T.clz, run on OpenCL (PoCL) against the interpreter on random bits, and compiled for
CUDA with NVRTC."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorir as tir

from .gpu_launch import check_on_opencl, require_opencl

pytestmark = pytest.mark.usefixtures("_opencl")


@pytest.fixture
def _opencl():
    require_opencl()


BITS = '''
@T.prim_func
def bits(F: T.Buffer((N,), "float32"), D: T.Buffer((N,), "float64"), H: T.Buffer((N,), "float16"),
         U: T.Buffer((N,), "uint16"), I: T.Buffer((N,), "int32"), B: T.Buffer((N,), "int8"),
         L: T.Buffer((N,), "int64"),
         fi: T.Buffer((N,), "int32"), fu: T.Buffer((N,), "uint32"), if_: T.Buffer((N,), "float32"),
         dl: T.Buffer((N,), "int64"), ld: T.Buffer((N,), "float64"), hu: T.Buffer((N,), "uint16"),
         hs: T.Buffer((N,), "int16"), uh: T.Buffer((N,), "float16"), pc: T.Buffer((N,), "int32"),
         cz: T.Buffer((N,), "int32"), pc8: T.Buffer((N,), "int8"), cz8: T.Buffer((N,), "int32"),
         cz64: T.Buffer((N,), "int32"), pc64: T.Buffer((N,), "int64")):
    T.func_attr({"tir.is_scheduled": True})
    for b in T.thread_binding((N + 31) // 32, thread="blockIdx.x"):
        for t in T.thread_binding(32, thread="threadIdx.x"):
            with T.block("bits"):
                i = T.axis.spatial(N, b * 32 + t)
                T.where(b * 32 + t < N)
                fi[i] = T.reinterpret("int32", F[i])
                fu[i] = T.reinterpret("uint32", F[i])
                if_[i] = T.reinterpret("float32", I[i])
                dl[i] = T.reinterpret("int64", D[i])
                ld[i] = T.reinterpret("float64", L[i])
                hu[i] = T.reinterpret("uint16", H[i])
                hs[i] = T.reinterpret("int16", H[i])
                uh[i] = T.reinterpret("float16", U[i])
                pc[i] = T.popcount(I[i])
                cz[i] = T.clz(I[i])
                pc8[i] = T.popcount(B[i])
                cz8[i] = T.clz(B[i])
                cz64[i] = T.clz(L[i])
                pc64[i] = T.popcount(L[i])
'''


def _inputs(n, rng):
    finite = rng.standard_normal(n)
    ints = rng.integers(-2 ** 31, 2 ** 31, n).astype("int32")
    ints[: n // 4] = 0                                    # clz of 0 is the width
    ints[n // 4: n // 2] = rng.integers(0, 300, n // 2 - n // 4)
    ubits = rng.integers(0, 2 ** 16, n).astype("uint16")
    ubits[(ubits & 0x7C00) == 0x7C00] &= 0xBFFF           # no inf/NaN bit patterns: NaN payloads may differ
    longs = rng.integers(-2 ** 62, 2 ** 62, n).astype("int64")
    longs[::3] = rng.integers(0, 5, len(longs[::3]))
    longs[(longs.view("uint64") >> 52 & 0x7FF) == 0x7FF] = 7
    bytes_ = rng.integers(-128, 128, n).astype("int8")
    outs = [np.zeros(n, d) for d in ("int32", "uint32", "float32", "int64", "float64", "uint16", "int16",
                                      "float16", "int32", "int32", "int8", "int32", "int32", "int64")]
    floats_from_ints = ints.copy()
    floats_from_ints[(floats_from_ints.view("uint32") >> 23 & 0xFF) == 0xFF] = 1   # no inf/NaN patterns
    return [finite.astype("float32"), finite, finite.astype("float16"), ubits, floats_from_ints, bytes_,
            longs, *outs]


@settings(max_examples=8, deadline=None)
@given(n=st.integers(1, 100), seed=st.integers(0, 2 ** 16))
def test_bit_intrinsics_match_the_interpreter(n, seed):
    func = tir.from_source(BITS.replace("N", str(n)))
    rng = np.random.default_rng(seed)
    check_on_opencl(func, lambda _: _inputs(n, rng), [n])
