"""DispatchLibrary's choice between OpenBLAS and the generated GEMM (transform/gemm_choice.py):
Before/Expected per case, the report's reasons, the no-BLAS target, and C builds equal to the
interpreter on both sides of every run-time boundary."""
from __future__ import annotations

import numpy as np
import pytest

import relaxscript as rx
from backends import blas, get_library
from relaxscript.transform import DispatchLibrary
from relaxscript.transform.dispatch_library import gemm_dispatch_report
from relaxscript.transform import gemm_choice
from relaxscript.transform.gemm_choice import skinny_rows


def _module(rows: str, weight: str = "(16, 8)", transposed: bool = False, bias: bool = False) -> str:
    product = "R.matmul(x, R.permute_dims(w))" if transposed else "R.matmul(x, w)"
    value = f"R.add({product}, b)" if bias else product
    return f'''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(({rows}, 16), "float32"), w: R.Tensor({weight}, "float32"),
             b: R.Tensor((8,), "float32")):
        n = T.int64()
        with R.dataflow():
            y = {value}
            R.output(y)
        return y
'''


def _expected(rows: str, library: str, weight: str = "(16, 8)", bias: bool = False) -> str:
    operands = "(x, w, b)" if bias else "(x, w)"
    return f'''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(({rows}, 16), "float32"), w: R.Tensor({weight}, "float32"),
             b: R.Tensor((8,), "float32")):
        n = T.int64()
        with R.dataflow():
            y = R.call_dps_library("{library}", {operands}, out_sinfo=R.Tensor(({rows}, 8), "float32"))
            R.output(y)
        return y
'''


needs_blas = pytest.mark.skipif(blas.backend() != "openblas", reason="scipy-openblas32 is not installed")


@needs_blas
@pytest.mark.parametrize("rows, bias, library", [
    ('"n"', False, "generated.sgemm"),        # n may be 2..16: the skinny variant's range
    ('"n"', True, "generated.sgemm_bias"),
    ("1", False, "generated.sgemm"),          # one row: the generated GEMV
    ("64", True, "openblas.sgemm_bias"),      # provably above skinny_rows: OpenBLAS's packed kernels
    ("4", False, "generated.sgemm"),
])
def test_before_expected(rows, bias, library, monkeypatch):
    # a machine whose packed tile does not beat OpenBLAS (AVX2): medium and large rows go to OpenBLAS
    monkeypatch.setattr(gemm_choice, "packed_rows_beside_blas", lambda: None)
    after = DispatchLibrary()(rx.from_source(_module(rows, bias=bias)))
    rx.assert_structural_equal(after, rx.from_source(_expected(rows, library, bias=bias)))


@needs_blas
@pytest.mark.parametrize("rows, bias, library", [
    ("64", True, "generated.sgemm_bias"),     # provably past the packed rows: the packed tile, epilogue fused
    ("33", False, "generated.sgemm"),
    ("20", True, "openblas.sgemm_bias"),      # past skinny, provably short of the packed rows: OpenBLAS
    ('"n"', False, "generated.sgemm"),        # either: the run-time choice
])
def test_before_expected_where_the_packed_tile_beats_openblas(rows, bias, library, monkeypatch):
    """A machine whose medium and large variants beat OpenBLAS from 33 rows (AVX-512's 6 x 64 tile)."""
    monkeypatch.setattr(gemm_choice, "packed_rows_beside_blas", lambda: 33)
    after = DispatchLibrary()(rx.from_source(_module(rows, bias=bias)))
    rx.assert_structural_equal(after, rx.from_source(_expected(rows, library, bias=bias)))


@needs_blas
def test_transposed_weight_stays_with_openblas_and_the_report_says_why():
    mod = rx.from_source(_module('"n"', weight="(8, 16)", transposed=True))
    rx.assert_structural_equal(DispatchLibrary()(mod), rx.from_source(_expected('"n"', "openblas.sgemm_nt",
                                                                                weight="(8, 16)")))
    (choice,) = gemm_dispatch_report(mod)
    assert (choice.function, choice.binding, choice.library) == ("main", "y", "openblas.sgemm_nt")
    assert "transposed" in choice.reason
    (choice,) = gemm_dispatch_report(rx.from_source(_module('"n"')))
    assert choice.rows == "n" and f"2..{skinny_rows(8)}" in choice.reason and "GEMV" in choice.reason


def test_without_blas_every_matmul_gets_the_generated_kernel(monkeypatch):
    monkeypatch.setattr(blas, "backend", lambda: "numpy")
    for rows, transposed, library in [("1", False, "generated.sgemm"), ("64", False, "generated.sgemm"),
                                      ('"n"', True, "generated.sgemm_nt")]:
        mod = rx.from_source(_module(rows, weight="(8, 16)" if transposed else "(16, 8)", transposed=transposed))
        (choice,) = gemm_dispatch_report(mod)
        assert choice.library == library and "no BLAS" in choice.reason


@pytest.fixture
def numpy_calls(monkeypatch):
    calls = []
    for name in ("generated.sgemm", "generated.sgemm_bias", "generated.sgemm_nt", "generated.sgemm_prepacked",
                 "generated.sgemm_bias_prepacked"):
        entry = get_library(name)

        def counted(*args, _impl=entry.numpy_impl, _name=name):
            calls.append(_name)
            return _impl(*args)
        monkeypatch.setattr(entry, "numpy_impl", counted)
    return calls


@pytest.mark.parametrize("no_blas", [False, True])
def test_c_build_equals_the_interpreter_across_the_run_time_boundaries(no_blas, monkeypatch, numpy_calls):
    if no_blas:
        monkeypatch.setattr(blas, "backend", lambda: "numpy")
    transposed = rx.from_source(_module('"n"', weight="(8, 16)", transposed=True, bias=True))
    plain = rx.from_source(_module('"n"', bias=True))
    s = skinny_rows(8)
    rng = np.random.default_rng(0)
    for module, weight in ((plain, (16, 8)), (transposed, (8, 16))):
        exe = rx.build(module, target="c")
        vm = rx.VirtualMachine(exe)
        for n in (1, 2, s, s + 1, 3 * s + 5):
            args = [rng.standard_normal((n, 16)).astype(np.float32), rng.standard_normal(weight).astype(np.float32),
                    rng.standard_normal(8).astype(np.float32)]
            np.testing.assert_allclose(vm["main"](*args), rx.interpret(module, "main", *args), rtol=1e-4, atol=1e-4)
    assert numpy_calls == []    # the VM called the native entries


def _bound(rows: str, bias: bool, seed: int = 0):
    """``_module`` with its weight and bias bound as constants, and their values."""
    rng = np.random.default_rng(seed)
    weight = rng.standard_normal((16, 8)).astype(np.float32)
    bias_value = rng.standard_normal(8).astype(np.float32)
    mod = rx.transform.BindParams("main", {"w": weight, "b": bias_value})(rx.from_source(_module(rows, bias=bias)))
    return mod, weight, bias_value


@pytest.mark.parametrize("bias", [False, True])
def test_constant_weight_is_packed_once_for_the_prepacked_entry(bias):
    """Before/Expected: a bound weight goes to generated.sgemm[_bias]_prepacked whatever the rows,
    with the weight replaced by its packed panels; a weight passed at run time does not."""
    from backends.c.gemm.prepacked import pack_weight
    from backends.library_gemm import pack_constant_weight
    from relaxscript.expr import Constant
    for rows in ('"n"', "1", "64"):
        mod, weight, _ = _bound(rows, bias)
        after = DispatchLibrary()(mod)
        (binding,) = after["main"].body.blocks[0].bindings
        library, operands = binding.value.args[0].global_symbol, binding.value.args[1].fields
        assert library == ("generated.sgemm_bias_prepacked" if bias else "generated.sgemm_prepacked")
        assert isinstance(operands[1], Constant) and isinstance(operands[2], Constant)
        np.testing.assert_array_equal(operands[1].data, pack_constant_weight(weight))
        np.testing.assert_array_equal(operands[1].data, pack_weight(weight, operands[1].data.shape[-1]))
        np.testing.assert_array_equal(operands[2].data, weight)   # beside it, for OpenBLAS's rows
        assert len(operands) == (4 if bias else 3)
        (choice,) = gemm_dispatch_report(mod)
        assert "constant weight" in choice.reason
    (choice,) = gemm_dispatch_report(rx.from_source(_module('"n"', bias=bias)))
    assert "prepacked" not in choice.library


@needs_blas
def test_constant_weight_with_rows_provably_above_the_prepacked_limit_goes_to_openblas_unpacked():
    from backends.library_gemm import prepacked_rows
    PREPACKED_ROWS = prepacked_rows()
    from backends.library_gemm import packed_rows_beside_blas
    above = "openblas.sgemm" if packed_rows_beside_blas() is None else "generated.sgemm"   # unpacked, either way
    for rows, library in ((PREPACKED_ROWS, "generated.sgemm_prepacked"), (PREPACKED_ROWS + 1, above)):
        mod, weight, _ = _bound(str(rows), bias=False)
        (binding,) = DispatchLibrary()(mod)["main"].body.blocks[0].bindings
        assert binding.value.args[0].global_symbol == library
        if library != "generated.sgemm_prepacked":
            np.testing.assert_array_equal(binding.value.args[1].fields[1].data, weight)   # not packed


def test_prepacked_c_build_equals_numpy_across_the_run_time_boundaries(numpy_calls):
    """A bound weight's C build (the prepacked entry's native call) at the row counts where its
    paths change: one row, one register tile and one more, A packed, OpenBLAS from PREPACKED_ROWS
    + 1 rows (the generated kernel's row split over threads from 2 * mc is reached only without
    BLAS: test_prepacked.py)."""
    from backends.c.gemm.driver import prepacked_rows
    from backends.c.gemm.params import gemm_params
    p = gemm_params()
    PREPACKED_ROWS = prepacked_rows(p)
    mod, weight, bias = _bound('"n"', bias=True, seed=1)
    vm = rx.VirtualMachine(rx.build(mod, target="c"))
    rng = np.random.default_rng(2)
    for n in (1, 2, p.mr, p.mr + 1, p.skinny_rows + 1, PREPACKED_ROWS, PREPACKED_ROWS + 1, 2 * p.mc + 1, 2 * p.packed_mc + 1):
        x = rng.standard_normal((n, 16)).astype(np.float32)
        expected = x.astype(np.float64) @ weight + bias
        np.testing.assert_allclose(vm["main"](x), expected, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(rx.interpret(mod, "main", x), expected, rtol=1e-4, atol=1e-4)
    assert numpy_calls == []
