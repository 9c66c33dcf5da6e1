"""The VM's native library calls (backends.library.NativeCall): a C build calls
OpenBLAS through the shim's C entry, with no Python implementation in between;
results equal the interpreter's; operands that do not fit take the NumPy path
and its clear errors."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relaxscript as rx
from backends import blas, get_library
from backends.library import NativeCall, register_library, unregister_library
from tensorir.errors import ShapeMismatchError

WIDE = '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 512), "float32"), w1: R.Tensor((512, 640), "float32"),
             b1: R.Tensor((640,), "float32"), w2: R.Tensor((640, 24), "float32")):
        n = T.int64()
        with R.dataflow():
            lv0 = R.add(R.matmul(x, w1), b1)
            lv1 = R.nn.relu(lv0)
            lv2 = R.matmul(lv1, w2)
            R.output(lv2)
        return lv2
'''


def _direct(out_sinfo: str) -> str:
    return f'''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 16), "float32"), w: R.Tensor((16, 8), "float32")):
        n = T.int64()
        lv0 = R.call_dps_library("openblas.sgemm", [x, w], {out_sinfo})
        return lv0
'''


@pytest.fixture
def counted_numpy_impls(monkeypatch):
    """Counts calls of the sgemm entries' NumPy implementations (the VM's Python path)."""
    calls = []
    for name in ("openblas.sgemm", "openblas.sgemm_bias", "generated.sgemm", "generated.sgemm_bias",
                 "generated.sgemm_bias.relu"):
        entry = get_library(name)
        impl = entry.numpy_impl

        def counted(*args, _impl=impl, _name=name):
            calls.append(_name)
            return _impl(*args)
        monkeypatch.setattr(entry, "numpy_impl", counted)
    return calls


def _wide_args(n: int, rng) -> list[np.ndarray]:
    return [rng.standard_normal(s).astype(np.float32) for s in [(n, 512), (512, 640), (640,), (640, 24)]]


@settings(max_examples=12, deadline=None)
@given(sizes=st.lists(st.integers(1, 40), min_size=1, max_size=4), threads=st.sampled_from([1, 2, 3]))
def test_native_matmuls_match_the_interpreter_for_every_n(sizes, threads):
    mod = rx.from_source(WIDE)
    original = blas.num_threads
    blas.num_threads = lambda: threads   # the params read the thread count when a shape changes
    try:
        vm = rx.VirtualMachine(rx.build(mod, target="c"))
        rng = np.random.default_rng(sum(sizes))
        for n in sizes + sizes[:1]:   # shapes change and come back: params are recomputed
            args = _wide_args(n, rng)
            want = rx.interpret(mod, "main", *args)
            np.testing.assert_allclose(vm["main"](*args), want, rtol=1e-4, atol=1e-3)
    finally:
        blas.num_threads = original


def test_c_build_calls_blas_natively_and_interp_does_not(counted_numpy_impls):
    mod = rx.from_source(WIDE)
    exe = rx.build(mod, target="c")
    # symbolic n: the generated GEMM's entries (transform/gemm_choice.py), called natively too
    # (the relu is the first GEMM's fused epilogue)
    assert "generated.sgemm_bias.relu" in exe.as_text() and "generated.sgemm'" in exe.as_text()
    args = _wide_args(3, np.random.default_rng(0))
    rx.VirtualMachine(exe)["main"](*args)
    assert counted_numpy_impls == []
    rx.VirtualMachine(rx.build(mod, target="interp"))["main"](*args)
    assert sorted(counted_numpy_impls) == ["generated.sgemm", "generated.sgemm_bias.relu"]


def test_unfit_output_takes_the_numpy_path_and_its_error(counted_numpy_impls):
    vm = rx.VirtualMachine(rx.build(rx.from_source(_direct('R.Tensor((n, 8), "float64")')), target="c"))
    x, w = np.ones((3, 16), np.float32), np.ones((16, 8), np.float32)
    with pytest.raises(ShapeMismatchError, match="c must be a float32 array"):
        vm["main"](x, w)
    assert counted_numpy_impls == ["openblas.sgemm"]


def test_wrong_output_shape_names_the_function():
    vm = rx.VirtualMachine(rx.build(rx.from_source(_direct('R.Tensor((n, 7), "float32")')), target="c"))
    x, w = np.ones((3, 16), np.float32), np.ones((16, 8), np.float32)
    with pytest.raises(ShapeMismatchError, match=r"function 'main': sgemm: shapes \(3, 16\) @ \(16, 8\) "
                                                 r"do not give \(3, 7\)"):
        vm["main"](x, w)


def test_direct_library_call_runs_natively(counted_numpy_impls):
    vm = rx.VirtualMachine(rx.build(rx.from_source(_direct('R.Tensor((n, 8), "float32")')), target="c"))
    rng = np.random.default_rng(5)
    for n in (1, 4, 1):
        x, w = rng.standard_normal((n, 16)).astype(np.float32), rng.standard_normal((16, 8)).astype(np.float32)
        np.testing.assert_allclose(vm["main"](x, w), x @ w, rtol=1e-5, atol=1e-5)
    assert counted_numpy_impls == []


def test_native_params_check_shapes():
    assert blas.native_params((2, 3, 5), (5, 7), (2, 3, 7))[:3] == (6, 7, 5)
    with pytest.raises(ShapeMismatchError, match="do not give"):
        blas.native_params((2, 5), (5, 7), (2, 8))
    with pytest.raises(ShapeMismatchError, match="b must be 2-D"):
        blas.native_params((2, 5), (1, 5, 7), (2, 7))
    bias_params = get_library("openblas.sgemm_bias").native.params
    assert bias_params((2, 5), (5, 7), (1, 7), (2, 7))[:3] == (2, 7, 5)
    with pytest.raises(ShapeMismatchError, match="bias"):
        bias_params((2, 5), (5, 7), (2, 7), (2, 7))


def test_a_native_call_needs_a_dps_numpy_implementation():
    native = NativeCall(lambda: None, lambda *shapes: (), "float32")
    try:
        with pytest.raises(ValueError, match="DPS"):
            register_library("test.native_only", native=native)
        with pytest.raises(ValueError, match="DPS"):
            register_library("test.native_only", np.negative, native=native)
        entry = register_library("test.native_only", lambda x, out: None, dps=True, native=native)
        assert entry.native is native
        with pytest.raises(ValueError, match="already has a native call"):
            register_library("test.native_only", native=NativeCall(lambda: None, lambda *s: (), "float32"),
                             numpy_impl=entry.numpy_impl, dps=True)
    finally:
        unregister_library("test.native_only")


def test_unavailable_native_entry_falls_back_to_numpy():
    calls = []
    native = NativeCall(lambda: None, lambda *shapes: (), "float32")

    def negate(x, out):
        calls.append(x.shape)
        np.negative(x, out=out)
    register_library("test.negate_native", negate, dps=True, native=native)
    try:
        src = '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 4), "float32")):
        n = T.int64()
        lv0 = R.call_dps_library("test.negate_native", [x], R.Tensor((n, 4), "float32"))
        return lv0
'''
        vm = rx.VirtualMachine(rx.build(rx.from_source(src), target="c"))
        x = np.arange(8, dtype=np.float32).reshape(2, 4)
        np.testing.assert_array_equal(vm["main"](x), -x)
        assert calls == [(2, 4)]
    finally:
        unregister_library("test.negate_native")
