"""``T.checked_index``: an index read from data is checked on every target, never clamped.

NumPy's negative indices wrap; any other value outside the axis raises ``IndexOutOfRangeError``
naming the value and the axis size: in the loop interpreter at once, in C and on the GPU
targets through the kernel's status word after the kernel (backends/c/status.py).
"""
from __future__ import annotations

import numpy as np
import pytest

import tensorir as tir
from backends.target import build_kernels
from tensorir import expr as E
from tensorir.errors import IndexOutOfRangeError, ShapeMismatchError
from tensorir.structural import assert_structural_equal
from tests.targets import COMPILED_TARGETS

GATHER_ROWS = '''
@T.prim_func
def gather_rows(x: T.Buffer(("n", 64), "float32"), ids: T.Buffer(("m",), "int64"),
                out: T.Buffer(("m", 64), "float32")):
    n = T.int64()
    m = T.int64()
    for i in T.parallel(m):
        for j in range(64):
            out[i, j] = x[T.checked_index(ids[i], n), j]
'''

# the check sits in a select's branch: only rows whose flag is set read (and check) their id
CHOSEN_ROWS = '''
@T.prim_func
def chosen_rows(x: T.Buffer(("n", 8), "float32"), ids: T.Buffer(("m",), "int64"),
                use: T.Buffer(("m",), "int32"), out: T.Buffer(("m", 8), "float32")):
    n = T.int64()
    m = T.int64()
    for i in range(m):
        for j in range(8):
            out[i, j] = T.if_then_else(use[i] != 0, x[T.checked_index(ids[i], n), j], T.float32(-1))
'''


def test_checked_index_prints_and_parses_back():
    func = tir.from_source(GATHER_ROWS)
    text = func.script()
    assert "T.checked_index(ids[i], n)" in text
    assert_structural_equal(tir.from_source(text), func)


def test_checked_index_takes_integers_only():
    with pytest.raises(TypeError, match="the index must be an integer"):
        E.checked_index(E.FloatImm(1.0, "float32"), 4)
    with pytest.raises(tir.ParseError, match="T.checked_index: the extent must be an integer"):
        tir.from_source(GATHER_ROWS.replace("T.checked_index(ids[i], n)", "T.checked_index(ids[i], T.float32(2))"))


def test_the_error_is_a_shape_mismatch_and_an_index_error():
    assert issubclass(IndexOutOfRangeError, ShapeMismatchError) and issubclass(IndexOutOfRangeError, IndexError)


def _rows(target: str):
    func = tir.from_source(GATHER_ROWS)
    if target == "interp":
        return lambda *arrays: tir.interpret(func, *arrays)
    return build_kernels(target, func)[func.name]


@pytest.mark.parametrize("target", ["interp", *COMPILED_TARGETS])
def test_in_range_and_negative_indices_read_numpy_rows(target):
    x = np.arange(5 * 64, dtype="float32").reshape(5, 64)
    ids = np.array([0, 4, -1, -5, 2], "int64")
    out = np.zeros((5, 64), "float32")
    _rows(target)(x, ids, out)
    np.testing.assert_array_equal(out, x[ids])


@pytest.mark.parametrize("target", ["interp", *COMPILED_TARGETS])
@pytest.mark.parametrize("bad", [5, -6, 2 ** 40])
def test_an_index_outside_the_axis_raises_with_its_value(target, bad):
    x = np.ones((5, 64), "float32")
    ids = np.array([1, bad, 0], "int64")
    with pytest.raises(IndexOutOfRangeError, match=f"index {bad} is out of range for an axis of size 5"):
        _rows(target)(x, ids, np.zeros((3, 64), "float32"))


@pytest.mark.parametrize("target", ["interp", *COMPILED_TARGETS])
def test_many_bad_indices_in_a_parallel_loop_report_one_of_them(target):
    """Threads race to report: one claims the status word, and its value is reported whole."""
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 7, 4096).astype("int64")
    bad = {7 + k for k in range(0, 4096, 97)}
    for k in range(0, 4096, 97):
        ids[k] = 7 + k
    with pytest.raises(IndexOutOfRangeError) as caught:
        _rows(target)(np.ones((7, 64), "float32"), ids, np.zeros((4096, 64), "float32"))
    value = int(str(caught.value).split("index ")[1].split(" ")[0])
    assert value in bad


def test_the_c_kernel_checks_a_row_index_once_outside_its_inner_loop():
    """Hoisted where the body is certain to check it: the row copy has no check per element."""
    source = build_kernels("c", tir.from_source(GATHER_ROWS)).source
    body = source[source.index("int32_t rs_kernel_gather_rows"):]
    lines = [line.strip() for line in body.splitlines()]
    checks = [k for k, line in enumerate(lines) if "rs_checked_index(" in line]
    inner = next(k for k, line in enumerate(lines) if line.startswith("for (int64_t j"))
    assert len(checks) == 1 and checks[0] < inner and lines[checks[0]].startswith("const int64_t rs_h")


@pytest.mark.parametrize("target", ["interp", *COMPILED_TARGETS])
def test_an_index_in_a_branch_not_taken_is_not_checked(target):
    """Never computed ahead of the select that guards it (the hoisting must not move it)."""
    func = tir.from_source(CHOSEN_ROWS)
    run = (lambda *a: tir.interpret(func, *a)) if target == "interp" else build_kernels(target, func)[func.name]
    x = np.arange(16, dtype="float32").reshape(2, 8)
    ids = np.array([1, 99, -2], "int64")
    out = np.zeros((3, 8), "float32")
    run(x, ids, np.array([1, 0, 1], "int32"), out)
    np.testing.assert_array_equal(out, np.stack([x[1], np.full(8, -1, "float32"), x[0]]))
    with pytest.raises(IndexOutOfRangeError, match="index 99 is out of range for an axis of size 2"):
        run(x, ids, np.array([1, 1, 1], "int32"), out)


def test_cuda_kernels_with_checks_compile():
    from .gpu_launch import require_nvrtc
    require_nvrtc()
    from backends.cuda.codegen import cuda_source
    from backends.cuda.nvrtc import compile_ptx
    from backends.gpu import lower_for_gpu
    sch = tir.Schedule(tir.from_source(GATHER_ROWS))
    ptx = compile_ptx(cuda_source([lower_for_gpu("gather_rows", sch.func)])).decode()
    assert "atom.global.cas" in ptx or "atom.cas" in ptx
