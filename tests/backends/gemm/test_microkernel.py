"""The emitted micro-kernel against NumPy: packed and unpacked operands, ragged tiles, accumulate."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backends.c.compiler import compile_shared
from backends.c.gemm.machine import AVX2, AVX512, SSE, MachineParams
from backends.c.gemm.microkernel import emit_microkernel, vector_typedefs
from backends.c.gemm.params import derive_params

PARAMS = {isa.name: derive_params(MachineParams(isa, 32 << 10, 512 << 10, 8 << 20, 2))
          for isa in (AVX2, AVX512, SSE)}


def _harness(params) -> ctypes.CDLL:
    source = vector_typedefs(params)
    for a_packed in (True, False):
        for b_packed in (True, False):
            name = f"mk_{int(a_packed)}{int(b_packed)}"
            source += emit_microkernel(name, params, a_packed, b_packed)
            a_args = "a" if a_packed else "a, lda"
            b_args = "b" if b_packed else "b, ldb"
            source += (f"void call_{int(a_packed)}{int(b_packed)}(int kc, const float* a, int lda, const float* b, "
                       f"int ldb, float* c, int ldc, int rows, int cols, int acc) {{ "
                       f"{name}(kc, {a_args}, {b_args}, c, ldc, rows, cols, acc); }}\n")
    path, _ = compile_shared(source)
    return ctypes.CDLL(str(path))


_LIBS: dict[str, ctypes.CDLL] = {}


def _lib(isa: str) -> ctypes.CDLL:
    if isa not in _LIBS:
        _LIBS[isa] = _harness(PARAMS[isa])
    return _LIBS[isa]


def _ptr(x: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(x.ctypes.data)


@settings(max_examples=30, deadline=None)
@given(isa=st.sampled_from(sorted(PARAMS)), kc=st.integers(0, 70), data=st.data(),
       a_packed=st.booleans(), b_packed=st.booleans(), accumulate=st.booleans())
def test_microkernel_matches_numpy(isa, kc, data, a_packed, b_packed, accumulate):
    params = PARAMS[isa]
    mr, nr = params.mr, params.nr
    rows = data.draw(st.integers(1, mr), label="rows")
    cols = nr if not b_packed else data.draw(st.integers(1, nr), label="cols")  # unpacked B reads nr columns
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31), label="seed"))
    a = rng.standard_normal((rows, kc)).astype(np.float32)
    b = rng.standard_normal((kc, cols)).astype(np.float32)
    ldc = cols + 3
    c = rng.standard_normal((rows + 1, ldc)).astype(np.float32)   # padding must stay untouched
    expected = c.copy()
    expected[:rows, :cols] = (c[:rows, :cols] if accumulate else 0) + a @ b
    if a_packed:
        a_buf = np.zeros((max(kc, 1), mr), np.float32)
        a_buf[:kc, :rows] = a.T
        lda = 0
    else:
        lda = kc + 5
        a_buf = np.full((rows, lda), np.nan, np.float32)   # only the first kc of each row are read
        a_buf[:, :kc] = a
    if b_packed:
        b_buf = np.zeros((max(kc, 1), nr), np.float32)
        b_buf[:kc, :cols] = b
        ldb = 0
    else:
        ldb = nr + 2
        b_buf = np.full((max(kc, 1), ldb), np.nan, np.float32)
        b_buf[:kc, :nr] = b
    fn = getattr(_lib(isa), f"call_{int(a_packed)}{int(b_packed)}")
    fn(kc, _ptr(a_buf), lda, _ptr(b_buf), ldb, _ptr(c), ldc, rows, cols, int(accumulate))
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("isa", sorted(PARAMS))
def test_register_tile_uses_the_register_file(isa):
    params = PARAMS[isa]
    source = emit_microkernel("mk", params)
    accumulators = params.mr * params.vectors_per_row
    assert source.count(" = {0}") == accumulators
    assert accumulators + params.vectors_per_row + 1 <= {"avx2": 16, "avx512": 32, "sse": 16}[isa]


def test_b_vectors_stay_in_registers_on_this_machine(tmp_path):
    """The register pin: compiled for this machine, the 4-row tile (where GCC had folded B's loads
    into every row's FMA) multiplies registers only, one load per B vector and k step."""
    import re
    import subprocess
    from dataclasses import replace

    from backends.c.compiler import DEFAULT_FLAGS, find_compiler
    from backends.c.gemm.params import gemm_params
    params = gemm_params()
    if params.isa not in ("avx2", "avx512"):
        pytest.skip(f"FMA tiles are x86 AVX2/AVX-512 only; this machine has {params.isa}")
    source = vector_typedefs(params) + emit_microkernel("mk", replace(params, mr=4), a_packed=False,
                                                        b_packed=False)
    source += "void call(int kc, const float* a, int lda, const float* b, int ldb, float* c, int ldc) " \
              "{ mk(kc, a, lda, b, ldb, c, ldc, 4, " + str(params.nr) + ", 1); }\n"
    (tmp_path / "mk.c").write_text(source)
    flags = [f for f in DEFAULT_FLAGS if f not in ("-shared", "-fopenmp")]
    subprocess.run([find_compiler(), *flags, "-S", "-o", str(tmp_path / "mk.s"), str(tmp_path / "mk.c")],
                   check=True, capture_output=True)
    fmas = [line for line in (tmp_path / "mk.s").read_text().splitlines() if re.search(r"\bvfmadd\w*ps\b", line)]
    assert fmas and not [line for line in fmas if "(" in line]   # no memory operand
