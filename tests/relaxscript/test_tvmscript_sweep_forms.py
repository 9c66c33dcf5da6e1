"""TVMScript forms found failing by ``tools/tvmscript_sweep.py`` on public TVM test
modules (see docs/ARCHITECTURE.md, "s9-tvms"). Every source here is written for
this project: each parses, round-trips, and where it computes something runs in
the interpreter and the VMs equal to NumPy; forms out of scope are ParseErrors
that name the construct and its line."""
from __future__ import annotations

import numpy as np
import pytest

import relaxscript as rx
import tensorir as tir
from tensorir.errors import ParseError

from .tvm_compat import assert_round_trip, assert_runs_alike, module_of

RNG = np.random.default_rng(7)


def _f32(*shape):
    return RNG.standard_normal(shape).astype("float32")


# ---------------------------------------------------------------- operators on graph values
OPERATORS = '''
@R.function
def main(x: R.Tensor((2, 3), "float32"), y: R.Tensor((2, 3), "float32"), s: R.Prim("float32")):
    a = -x
    b = x + y
    c = (x - y) * b
    d = c / (y * y + R.const(1.0, "float32"))
    e = x // (y * y + R.const(1.0, "float32"))
    f = (x * x) ** R.const(0.5, "float32")
    g = x > y
    h = x <= y
    k = x * s
    return (a, d, e, f, g, h, k)
'''


def test_python_operators_are_the_r_functions():
    mod = module_of(OPERATORS)
    text = assert_round_trip(mod)
    for op in ("R.negative(", "R.add(", "R.subtract(", "R.multiply(", "R.divide(", "R.floor_divide(",
               "R.power(", "R.greater(", "R.less_equal("):
        assert op in text
    x, y = _f32(2, 3), _f32(2, 3)
    s = 1.5
    den = y * y + 1
    expected = (-x, (x - y) * (x + y) / den, np.floor_divide(x, den), np.abs(x), x > y, x <= y,
                (x * np.float32(s)).astype("float32"))
    assert_runs_alike(mod, x, y, s, expected=expected, tol=1e-5)


def test_operator_misuse_is_a_parse_error():
    for body, message in (("z = x + 1.0", "convert a number with R.const"),
                          ("z = x % x", "not defined on graph-level values"),
                          ("z = x < x < x", "chained comparisons")):
        with pytest.raises(ParseError, match=message) as err:
            rx.from_source(f'@R.function\ndef main(x: R.Tensor((2,), "float32")):\n    {body}\n    return z\n')
        assert err.value.lineno == 3


# ---------------------------------------------------------------- value forms and methods
VALUE_FORMS = '''
@I.ir_module
class Module:
    @T.prim_func(private=True, s_tir=True)
    def add_one(a: T.Buffer((T.int64(4),), "float32"), b: T.Buffer((T.int64(4),), "float32")):
        T.func_attr({"tirx.noalias": True})
        for i in T.serial(T.int64(4)):
            with T.sblock("b"):
                vi = T.axis.spatial(T.int64(4), i)
                b[vi] = a[vi] + T.float32(1)

    @R.function
    def main(x: R.Tensor((4,), "float32"), t: R.Tuple(R.Tensor((4,), "float32"), R.Tensor((2,), "int32"))):
        cls = Module
        y = R.call_tir(cls.add_one, x, R.Tensor((4,), dtype="float32"))
        z = R.call_pure_packed("test_sweep.twice", y, sinfo_args=[y.struct_info])
        w = z.astype("float64")
        first = R.TupleGetItem(t, 1)
        kept = R.builtin.stop_lift_params(first)
        one = R.const(1)
        ids = kept + one
        empty = ()
        return (w, ids, empty)
'''


@pytest.fixture
def twice():
    rx.register_func("test_sweep.twice")(lambda x: x * 2)
    yield
    rx.unregister_func("test_sweep.twice")


def test_value_forms_and_methods(twice):
    mod = module_of(VALUE_FORMS)
    assert mod["add_one"].attrs.get("tir.noalias") is True  # "tirx." keys are TVM's renamed "tir."
    assert_round_trip(mod)
    x = _f32(4)
    ids = np.array([3, -1], "int32")
    got = assert_runs_alike(mod, x, (_f32(4), ids),
                            expected=(((x + 1) * 2).astype("float64"), ids + 1, ()))
    assert got[1].dtype == np.int32  # R.const(1) is int32, as TVM's relax.const


CALL_PACKED_LITERALS = '''
@R.function(pure=False)
def main(x: R.Tensor((3,), "float32")):
    r = R.call_packed("test_sweep.record", x, 2, "mode", sinfo_args=R.Tuple())
    return x
'''


def test_call_packed_takes_literal_arguments():
    seen = []
    rx.register_func("test_sweep.record")(lambda x, n, mode: seen.append((n, mode)))
    try:
        mod = module_of(CALL_PACKED_LITERALS)
        text = assert_round_trip(mod)
        assert 'R.prim_value(2)' in text and 'R.str("mode")' in text
        x = _f32(3)
        assert_runs_alike(mod, x, expected=x)
        assert seen and all(entry == (2, "mode") for entry in seen)
    finally:
        rx.unregister_func("test_sweep.record")


# ---------------------------------------------------------------- layouts
LAYOUTS = '''
@R.function
def main(x: R.Tensor((1, 6, 5, 3), "float32"), w: R.Tensor((4, 3, 3, 3), "float32")):
    with R.dataflow():
        y = R.nn.conv2d(x, w, strides=[1, 1], padding=[1, 1, 1, 1], data_layout="NHWC",
                        kernel_layout="OHWI", out_dtype="float32")
        z = R.nn.max_pool2d(y, pool_size=[2, 2], strides=[2, 2], layout="NHWC")
        u = R.nn.conv2d(x, R.permute_dims(w, axes=[1, 2, 3, 0]), data_layout="NHWC",
                        kernel_layout="HWIO", out_layout="NCHW")
        R.output(y, z, u)
    return (y, z, u)
'''


def _conv_nhwc_ohwi(x, w, pad):
    x = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    n, h, wd, _ = x.shape
    o, kh, kw, _ = w.shape
    out = np.zeros((n, h - kh + 1, wd - kw + 1, o), "float32")
    for i in range(out.shape[1]):
        for j in range(out.shape[2]):
            out[:, i, j, :] = np.einsum("nhwc,ohwc->no", x[:, i:i + kh, j:j + kw, :], w)
    return out


def test_permuted_layouts_are_transposes_around_the_default_op():
    mod = module_of(LAYOUTS)
    sinfo = {b.var.name_hint: b.var.struct_info for blk in mod["main"].body.blocks for b in blk.bindings}
    assert [d.value for d in sinfo["y"].shape] == [1, 6, 5, 4]
    assert [d.value for d in sinfo["u"].shape] == [1, 4, 4, 3]
    assert_round_trip(mod)
    x, w = _f32(1, 6, 5, 3), _f32(4, 3, 3, 3)
    y = _conv_nhwc_ohwi(x, w, 1)
    z = y[:, :6, :4, :].reshape(1, 3, 2, 2, 2, 4).max(axis=(2, 4))
    u = _conv_nhwc_ohwi(x, w, 0).transpose(0, 3, 1, 2)
    assert_runs_alike(mod, x, w, expected=(y, z, u), tol=1e-4)


def test_a_split_layout_needs_its_split_axis():
    """Split layouts run since s13 (test_tvm_corpus_s13); a 4-d kernel is not OIHW4o (5 axes)."""
    src = LAYOUTS.replace('kernel_layout="OHWI"', 'kernel_layout="OIHW4o"')
    with pytest.raises(ParseError, match="OIHW4o' has 5 axes but the operand has 4 dims"):
        rx.from_source(src)


# ---------------------------------------------------------------- control flow
BRANCHES = '''
@R.function(pure=False)
def main(cond: R.Tensor((), "bool"), x: R.Tensor((3,), "float32"), flag: R.Prim("bool")):
    if cond:
        y = R.add(x, x)
    else:
        y = R.multiply(x, x)
    if flag:
        R.print(y, format="y: {}")
    else:
        R.print(x, format="x: {}")
    if flag:
        z = R.match_cast(y, R.Tensor((3,), "float32"))
    else:
        z = x
    return z
'''


def test_branches_in_tvm_forms(capfd):
    mod = module_of(BRANCHES)
    assert_round_trip(mod)
    x = _f32(3)
    for cond, flag in ((True, True), (False, False)):
        y = x + x if cond else x * x
        assert_runs_alike(mod, np.array(cond), x, flag, expected=y if flag else x)
    assert "y: " in capfd.readouterr().out


# ---------------------------------------------------------------- signatures, asserts, slices
SIGNATURE = '''
@R.function(pure=False)
def main(x: R.Tensor(("m + 1",), "float32"), y: R.Tensor(("m",), "float32", "llvm")):
    m = T.int64()
    _ = R.assert_op(m % 2 == 0, format="m must be even")
    head = R.strided_slice(x, (R.prim_value(0),), (R.prim_value(0),), (R.prim_value(m),),
                           assume_inbound=False)
    s = R.add(head, y)
    return s
'''


def test_signature_and_assert_forms():
    mod = module_of(SIGNATURE)
    assert_round_trip(mod)
    x, y = _f32(5), _f32(4)
    assert_runs_alike(mod, x, y, expected=x[:4] + y)
    with pytest.raises(Exception, match="m must be even"):
        rx.interpret(mod, "main", _f32(4), _f32(3))


def test_other_devices_are_refused():
    with pytest.raises(ParseError, match="vdevice .cuda:0. is not supported") as err:
        rx.from_source('@R.function\ndef main(x: R.Tensor((2,), "float32", "cuda:0")):\n    return x\n')
    assert err.value.lineno == 2


# ---------------------------------------------------------------- lowered memory forms
LOWERED = '''
@I.ir_module
class Module:
    @T.prim_func
    def double(a: T.Buffer((T.int64(4),), "float32"), b: T.Buffer((T.int64(4),), "float32")):
        for i in range(4):
            with T.block("b"):
                vi = T.axis.remap("S", [i])
                b[vi] = a[vi] * T.float32(2)

    @R.function(pure=False)
    def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        cls = Module
        storage: R.Object = R.vm.alloc_storage(R.shape([16]), R.prim_value(0), R.dtype("uint8"))
        tmp: R.Tensor((4,), dtype="float32") = R.vm.alloc_tensor(storage, R.prim_value(0), R.shape([4]), R.dtype("float32"))
        _: R.Tuple = cls.double(x, tmp)
        out: R.Tensor((4,), dtype="float32") = R.builtin.alloc_tensor(R.shape([4]), R.dtype("float32"), R.prim_value(0))
        _1: R.Tuple = cls.double(tmp, out)
        _2 = R.vm.kill_object(tmp)
        _3 = R.vm.kill_object(storage)
        return out
'''


def test_vm_kill_object():
    mod = module_of(LOWERED)
    text = assert_round_trip(mod)
    assert "R.memory.kill_tensor(tmp)" in text and "R.memory.kill_storage(storage)" in text
    x = _f32(4)
    np.testing.assert_allclose(rx.interpret(mod, "main", x), x * 4)


# ---------------------------------------------------------------- loop level
EXTERN = '''
@T.prim_func
def main(a: T.handle):
    A = T.match_buffer(a, (4, 4), "float32")
    for i in range(4):
        T.evaluate(T.call_extern("log_row", A.data, i, dtype="int32"))
'''


def test_call_extern_with_dtype_keyword_and_buffer_data():
    func = tir.from_source(EXTERN)
    text = func.script()
    assert 'T.call_extern("int32", "log_row", T.address_of(A[' in text
    tir.assert_structural_equal(tir.from_source(text), func)
    with pytest.raises(ParseError, match=r"A\.data \(a pointer\) is usable only as a T\.call_extern"):
        tir.from_source(EXTERN.replace("T.evaluate(T.call_extern(\"log_row\", A.data, i, dtype=\"int32\"))",
                                       "A[i, 0] = A.data"))


SBLOCK = '''
@T.prim_func(s_tir=True)
def main(a: T.Buffer((8,), "float32"), b: T.Buffer((8,), "float32")):
    T.func_attr({"tirx.noalias": True})
    for i in range(8):
        with T.sblock("b"):
            vi = T.axis.remap("S", [i])
            b[vi] = a[vi] * a[vi]
'''


def test_sblock_is_block():
    func = tir.from_source(SBLOCK)
    assert func.attrs["tir.noalias"] is True
    again = tir.from_source(func.script())
    tir.assert_structural_equal(again, func)
    a, b = _f32(8), np.zeros(8, "float32")
    tir.interpret(func, a, b)
    np.testing.assert_allclose(b, a * a)


# ---------------------------------------------------------------- out of scope: named, located
@pytest.mark.parametrize("line, construct", [
    ("y = R.call_tir_with_grad(cls.f, (x,), R.Tensor((2,), \"float32\"), te_grad_name=\"g\")",
     "R.call_tir_with_grad is not supported: gradients"),
    ("y = R.emit_te(topi.add, x, x)", "R.emit_te is not supported"),
    ("y = R.dist.redistribute(x, device_mesh=\"mesh[0]\", placement=\"R\")", "R.dist.redistribute is not supported: distributed"),
    ("y = R.ccl.allreduce(x)", "R.ccl.allreduce is not supported"),
    ("y = R.vm.call_tir_dyn(\"f\", (x,))", "R.vm.call_tir_dyn is not supported"),
])
def test_out_of_scope_constructs_are_named(line, construct):
    src = f'@R.function\ndef main(x: R.Tensor((2,), "float32")):\n    {line}\n    return y\n'
    with pytest.raises(ParseError, match=construct) as err:
        rx.from_source(src)
    assert err.value.lineno == 3


def test_device_intrinsics_are_named():
    src = '''
@T.prim_func
def main(a: T.Buffer((16, 16), "float32")):
    T.evaluate(T.tvm_fill_fragment(a.data, 16, 16, 16, 0, 0, dtype="handle"))
'''
    with pytest.raises(ParseError, match="T.tvm_fill_fragment") as err:
        tir.from_source(src)
    assert err.value.lineno == 4


def test_relax_module_prefix_reads_as_r():
    src = VALUE_FORMS.replace("R.call_tir(cls.add_one", "relax.call_tir(cls.add_one")
    assert "relax.call_tir" in src
    mod = module_of(src)
    rx.assert_structural_equal(mod, module_of(VALUE_FORMS))
