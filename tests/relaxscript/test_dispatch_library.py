"""DispatchLibrary: matmul (+ bias) to OpenBLAS library calls; same
interpreter results, printable/parsable output, user-registered patterns."""
from __future__ import annotations

import numpy as np
import pytest

import relaxscript as rx
from backends.library import register_library, unregister_library
from relaxscript.analysis import check_well_formed
from relaxscript.expr import Call
from relaxscript.transform import DispatchLibrary, LibraryRegistry, register_library_pattern
from relaxscript.transform.dispatch_library import (LibraryPatternError, SGEMM_BIAS_PATTERN,
                                                     SGEMM_PATTERN, is_op, wildcard)

MLP = '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("b", "n", 16), "float32"), w1: R.Tensor((16, 32), "float32"),
             b1: R.Tensor((32,), "float32"), w2: R.Tensor((32, 8), "float32")):
        b = T.int64()
        n = T.int64()
        with R.dataflow():
            lv0 = R.matmul(x, w1)
            lv1 = R.add(b1, lv0)
            lv2 = R.nn.relu(lv1)
            lv3 = R.matmul(lv2, w2)
            R.output(lv3)
        return lv3
'''

SHARED = '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 16), "float32"), w: R.Tensor((16, 8), "float32"),
             bias: R.Tensor((8,), "float32"), y: R.Tensor((16, 8), "float64"),
             z: R.Tensor(("n", 16), "float64")):
        n = T.int64()
        with R.dataflow():
            lv0 = R.matmul(x, w)
            lv1 = R.add(lv0, bias)
            lv2 = R.multiply(lv0, lv1)
            lv3 = R.matmul(z, y)
            R.output(lv2, lv3)
        return (lv2, lv3)
'''


def _library_calls(mod) -> list[str]:
    import tensorir as tir
    calls = tir.collect(mod["main"], lambda e: isinstance(e, Call) and getattr(e.op, "name", "") ==
                        "relax.call_dps_library")
    return sorted(c.args[0].global_symbol for c in calls)


def _ops(mod) -> list[str]:
    import tensorir as tir
    return sorted(c.op.name for c in tir.collect(mod["main"], lambda e: isinstance(e, Call)))


def _check_roundtrip(mod):
    check_well_formed(mod)
    rx.assert_structural_equal(rx.from_source(mod.script()), mod)


def _run(mod, args):
    out = rx.interpret(mod, "main", *args)
    return out if isinstance(out, tuple) else (out,)


def test_matmul_and_bias_add_become_one_library_call_each():
    mod = rx.from_source(MLP)
    after = DispatchLibrary()(mod)
    # rows b * n may be 2..16: the generated kernel (which hands 1 and > 16 rows to OpenBLAS at run time)
    # and the relu after the bias add is the generated kernel's fused epilogue (test_gemm_epilogue.py)
    assert _library_calls(after) == ["generated.sgemm", "generated.sgemm_bias.relu"]
    assert "relax.matmul" not in _ops(after) and "relax.add" not in _ops(after)
    assert "relax.nn.relu" not in _ops(after)
    _check_roundtrip(after)
    rng = np.random.default_rng(0)
    weights = [rng.standard_normal(s).astype(np.float32) for s in [(16, 32), (32,), (32, 8)]]
    for b, n in [(1, 1), (2, 3), (3, 7)]:
        args = [rng.standard_normal((b, n, 16)).astype(np.float32), *weights]
        for got, want in zip(_run(after, args), _run(mod, args)):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_shared_product_and_float64_are_not_folded():
    mod = rx.from_source(SHARED)
    after = DispatchLibrary()(mod)
    # lv0 is used twice: it stays a plain sgemm and the add stays an add; float64 stays matmul
    assert _library_calls(after) == ["generated.sgemm"]
    assert _ops(after).count("relax.add") == 1 and _ops(after).count("relax.matmul") == 1
    _check_roundtrip(after)
    rng = np.random.default_rng(1)
    for n in (1, 4, 9):
        args = [rng.standard_normal((n, 16)).astype(np.float32),
                rng.standard_normal((16, 8)).astype(np.float32),
                rng.standard_normal(8).astype(np.float32), rng.standard_normal((16, 8)),
                rng.standard_normal((n, 16))]
        for got, want in zip(_run(after, args), _run(mod, args)):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_input_module_is_not_mutated_and_empty_registry_changes_nothing():
    mod = rx.from_source(MLP)
    text = mod.script()
    DispatchLibrary()(mod)
    assert mod.script() == text
    rx.assert_structural_equal(DispatchLibrary(LibraryRegistry())(mod), mod)


def test_user_registered_pattern_in_own_registry():
    name = "test.scaled_relu"
    register_library(name, lambda x, s: np.maximum(x * s, 0).astype(x.dtype))
    try:
        registry = LibraryRegistry([SGEMM_BIAS_PATTERN, SGEMM_PATTERN])
        register_library_pattern("scaled_relu", name,
                                 is_op("relax.nn.relu",
                                       is_op("relax.multiply", wildcard("x"), wildcard("s"))),
                                 ["x", "s"], registry=registry)
        mod = rx.from_source('''
@R.function
def main(x: R.Tensor(("n", 4), "float32"), s: R.Tensor((4,), "float32"), w: R.Tensor((4, 4), "float32")):
    n = T.int64()
    with R.dataflow():
        lv0 = R.multiply(x, s)
        lv1 = R.nn.relu(lv0)
        lv2 = R.matmul(lv1, w)
        R.output(lv2)
    return lv2
''')
        mod = mod if hasattr(mod, "functions") else rx.IRModule({"main": mod})
        after = DispatchLibrary(registry)(mod)
        assert _library_calls(after) == ["generated.sgemm", name]
        _check_roundtrip(after)
        rng = np.random.default_rng(2)
        args = [rng.standard_normal((5, 4)).astype(np.float32), rng.standard_normal(4).astype(np.float32),
                rng.standard_normal((4, 4)).astype(np.float32)]
        np.testing.assert_allclose(_run(after, args)[0], _run(mod, args)[0], rtol=1e-5, atol=1e-6)
    finally:
        unregister_library(name)


def test_malformed_patterns_are_rejected():
    with pytest.raises(LibraryPatternError, match="not wildcards"):
        register_library_pattern("bad", "x.y", is_op("relax.add", wildcard("a"), wildcard("b")), ["c"],
                                 registry=LibraryRegistry())
    with pytest.raises(LibraryPatternError, match="already registered"):
        LibraryRegistry([SGEMM_PATTERN, SGEMM_PATTERN])
    with pytest.raises(LibraryPatternError, match="not a pattern"):
        is_op("relax.add", "a")


def test_dispatched_module_built_for_c_matches_interpreter():
    mod = rx.from_source(MLP)
    vm = rx.VirtualMachine(rx.build(DispatchLibrary()(mod), target="c"))
    rng = np.random.default_rng(3)
    weights = [rng.standard_normal(s).astype(np.float32) for s in [(16, 32), (32,), (32, 8)]]
    for b, n in [(1, 1), (2, 5)]:
        args = [rng.standard_normal((b, n, 16)).astype(np.float32), *weights]
        np.testing.assert_allclose(vm["main"](*args), _run(mod, args)[0], rtol=1e-5, atol=1e-5)


ATTENTION = '''
@R.ir_module
class Module:
    @R.function
    def main(q: R.Tensor((4, "n", 16), "float32"), k: R.Tensor((4, 16, "n"), "float32"),
             v: R.Tensor((4, "n", 16), "float32"), w: R.Tensor((1, 16, "n"), "float32"),
             d: R.Tensor((4, "n", 16), "float64"), e: R.Tensor((4, 16, 3), "float64")):
        n = T.int64()
        with R.dataflow():
            scores = R.matmul(q, k)
            probs = R.nn.softmax(scores, axis=-1)
            out = R.matmul(probs, v)
            broadcast = R.matmul(q, w)
            wide = R.matmul(d, e)
            R.output(out, broadcast, wide)
        return (out, broadcast, wide)
'''


def test_batched_products_with_equal_batch_dims_go_to_batched_sgemm():
    mod = rx.from_source(ATTENTION)
    after = DispatchLibrary()(mod)
    # q @ k and probs @ v; a broadcast batch dim (w) and float64 stay matmuls
    assert _library_calls(after) == ["openblas.sgemm_batched", "openblas.sgemm_batched"]
    assert _ops(after).count("relax.matmul") == 2
    _check_roundtrip(after)
    vm = rx.VirtualMachine(rx.build(mod, target="c"))
    rng = np.random.default_rng(4)
    for n in (1, 5, 33):
        args = [rng.standard_normal(s).astype(dtype) for s, dtype in
                [((4, n, 16), "float32"), ((4, 16, n), "float32"), ((4, n, 16), "float32"),
                 ((1, 16, n), "float32"), ((4, n, 16), "float64"), ((4, 16, 3), "float64")]]
        want = _run(mod, args)
        for got, expected in zip(_run(after, args), want):
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
        for got, expected in zip(vm["main"](*args), want):
            np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


TRANSPOSED_WEIGHT = '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 16), "float32"), w: R.Tensor((8, 16), "float32"),
             v: R.Tensor((16, 8), "float32")) -> R.Tensor(("n", 16), "float32"):
        n = T.int64()
        with R.dataflow():
            wt = R.permute_dims(w)
            y = R.matmul(x, wt)
            vt = R.permute_dims(v, axes=[1, 0])
            z = R.matmul(R.nn.relu(y), vt)
            R.output(z)
        return z
'''

TRANSPOSED_WEIGHT_EXPECTED = '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 16), "float32"), w: R.Tensor((8, 16), "float32"),
             v: R.Tensor((16, 8), "float32")) -> R.Tensor(("n", 16), "float32"):
        n = T.int64()
        with R.dataflow():
            y = R.call_dps_library("openblas.sgemm_nt", (x, w), out_sinfo=R.Tensor((n, 8), "float32"))
            lv = R.nn.relu(y)
            z = R.call_dps_library("openblas.sgemm_nt", (lv, v), out_sinfo=R.Tensor((n, 16), "float32"))
            R.output(z)
        return z
'''


def test_linear_layer_weight_is_read_transposed_by_blas():
    """``x @ w.T`` (nn.Linear's (out, in) weight) goes to sgemm_nt with no transposed copy."""
    mod = rx.from_source(TRANSPOSED_WEIGHT)
    after = DispatchLibrary()(mod)
    assert _library_calls(after) == ["openblas.sgemm_nt", "openblas.sgemm_nt"]
    rx.assert_structural_equal(after, rx.from_source(TRANSPOSED_WEIGHT_EXPECTED))
    assert "relax.permute_dims" not in _ops(after)
    _check_roundtrip(after)
    rng = np.random.default_rng(3)
    args = [rng.standard_normal(s).astype(np.float32) for s in [(5, 16), (8, 16), (16, 8)]]
    np.testing.assert_allclose(_run(after, args)[0], _run(mod, args)[0], rtol=1e-5, atol=1e-5)
    exe_out = rx.VirtualMachine(rx.build(mod, target="c"))["main"](*args)
    np.testing.assert_allclose(exe_out, _run(mod, args)[0], rtol=1e-4, atol=1e-4)
