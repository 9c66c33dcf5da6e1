"""Fuzzed run-time arguments of built VM functions (C target and interpreter).

Arguments are drawn around each parameter's annotation: other dtypes, a rank or a
dimension off by one, empty and 0-d arrays, strided, reversed and transposed views,
NaN, lists, non-arrays, symbolic values past a declared upper bound. A call either
raises a ValueError/TypeError naming the function, or returns what the reference
interpreter (``rx.interpret``, NumPy) returns for the same arguments, NaN in the same
places; never a crash or another exception. (The VM refuses non-contiguous views the
reference accepts: "Run-time arguments".)
"""
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import relaxscript as rx
from tests.relaxscript import vm_modules as M
from tests.relaxscript.test_memory_plan import BOUNDED, module
from tests.targets import VM_TARGETS

# module name -> parameter shapes (names are symbolic vars; "shape" is an R.Shape argument)
SIGNATURES = {"ELEMENTWISE": [("n", "m"), ("m",)], "MLP": [("n", 8), (8, 16), (16,), (16, 4)],
              "NORMS": [("n", "m"), ("m",), ("m",)], "RESHAPE": [("n", "m")],
              "BOUND_FACT": [("n", 4)], "BOUND_ATTR": [("n", 4)],
              "RESHAPE_INFER": [("n", "m"), "shape"], "RESHAPE_TO_SHAPE": [("n", "m"), "shape"],
              "TOPK": [("n", "m"), "shape"], "INTEGER": [("n", "m"), ("m",)], "VIEWS": [("n", "m"), ("m",)],
              "DPS": [("n", "m"), ("n", "m")]}

# s12-fuzz: integer floor division / modulo by a tensor (zeros and negatives), view-like ops on
# symbolic dims (a squeeze that needs m = 1, a broadcast of y against a column, argmax over an
# axis that may be empty), and a direct DPS call writing into a parameter
INTEGER = M.HEADER + '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", "m"), "int32"), y: R.Tensor(("m",), "int32")):
        with R.dataflow():
            q = R.floor_divide(x, y)
            r = R.floor_mod(x, y)
            s = R.add(q, r)
            R.output(s)
        return s
'''

VIEWS = M.HEADER + '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", "m"), "float32"), y: R.Tensor(("m",), "float32")):
        n = T.int64()
        m = T.int64()
        with R.dataflow():
            a = R.argmax(x, axis=-1, keepdims=True)
            b = R.astype(a, "float32")
            c = R.broadcast_to(R.expand_dims(y, -1), R.shape([m, n]))
            d = R.permute_dims(c, [-1, -2])
            e = R.reshape(R.add(d, b), R.shape([-1]))
            R.output(e)
        return e
'''

DPS = M.HEADER + '''
@R.ir_module
class Module:
    @T.prim_func
    def double(a: T.Buffer(("n", "m"), "float32"), b: T.Buffer(("n", "m"), "float32")):
        n = T.int64()
        m = T.int64()
        for i, j in T.grid(n, m):
            with T.block("b"):
                vi, vj = T.axis.remap("SS", [i, j])
                b[vi, vj] = a[vi, vj] * T.float32(2)

    @R.function(pure=False)
    def main(x: R.Tensor(("n", "m"), "float32"), out: R.Tensor(("n", "m"), "float32")):
        _ = R.call_tir_dps(Module.double, (x, out))
        return out
'''


# A reshape whose -1 is inferred from a run-time value, and one to a shape argument: the VM used to
# return the first elements for counts that do not divide ((2, 4) as (3, -1) gave a (3, 2) result,
# as (16, -1) an empty one) or differ ((2, 4) to a shape (3, 2)), and a zero k raised a bare
# ZeroDivisionError (the reference interpreter too).
RESHAPES = M.HEADER + '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", "m"), "float32"), s: R.Shape(SHAPE)):
        k = T.int64()
        with R.dataflow():
            a = R.reshape(x, TARGET)
            b = R.multiply(a, R.const(2.0, "float32"))
            R.output(b)
        return b
'''


def _modules():
    mods = {name: M.parse(M.MODULES[name]) for name in ("ELEMENTWISE", "MLP", "NORMS", "RESHAPE")}
    mods["BOUND_FACT"] = module(BOUNDED.replace("UPPER", "upper=64").replace("ATTR", ""))
    mods["BOUND_ATTR"] = module(BOUNDED.replace("UPPER", "").replace(
        "ATTR", 'R.func_attr({"relax.memory_upper_bound": {"n": 64}})'))
    mods["RESHAPE_INFER"] = M.parse(RESHAPES.replace("SHAPE", '["k"]').replace("TARGET", "R.shape([2, -1, k])"))
    mods["RESHAPE_TO_SHAPE"] = M.parse(RESHAPES.replace("SHAPE", '["k", "j"]').replace("TARGET", "s"))
    mods["INTEGER"], mods["VIEWS"], mods["DPS"] = M.parse(INTEGER), M.parse(VIEWS), M.parse(DPS)
    # topk of an axis shorter than k: the kernel padded with zeros where the reference raises
    mods["TOPK"] = M.parse(RESHAPES.replace("SHAPE", "[]").replace("R.reshape(x, TARGET)", "R.topk(x, 3, axis=-1)[0]"))
    return mods


@pytest.fixture(scope="module")
def machines():
    mods = _modules()
    return mods, {(name, target): rx.VirtualMachine(rx.build(mod, target=target))
                  for name, mod in mods.items() for target in ("c", "interp")}


@st.composite
def argument(draw, shape, env, default="float32"):
    if shape == "shape":   # an R.Shape argument: 0-2 values, zero and negative ones included
        return tuple(draw(st.lists(st.sampled_from([0, 1, 2, 3, 4, 5, 8, 16, -1]), min_size=0, max_size=3)))
    dims = [env[d] if isinstance(d, str) else d for d in shape]
    change = draw(st.sampled_from(["none"] * 6 + ["rank+", "rank-", "dim"]))
    if change == "rank+":
        dims = dims + [1]
    elif change == "rank-" and dims:
        dims = dims[:-1]
    elif change == "dim" and dims:
        at = draw(st.integers(0, len(dims) - 1))
        dims[at] = max(0, dims[at] + draw(st.sampled_from([-1, 1, 5])))
    view = draw(st.sampled_from(["plain"] * 5 + ["strided", "reversed", "transposed", "fortran", "read-only",
                                                 "byte-swapped"]))
    seed = draw(st.integers(0, 2 ** 16))
    rng = np.random.default_rng(seed)
    array = rng.standard_normal([2 * d for d in dims] if view == "strided" else dims)
    if view == "strided":
        array = array[tuple(slice(None, None, 2) for _ in dims)]
    elif view == "reversed" and array.ndim:
        array = array[::-1]
    elif view == "transposed":
        array = array.T
    if draw(st.integers(0, 9)) == 0 and array.size:
        array = array.copy()
        array.reshape(-1)[rng.integers(array.size)] = draw(st.sampled_from([np.nan, np.inf, -np.inf]))
    dtype = draw(st.sampled_from([default] * 8 + ["float32", "float64", "float16", "int32", "int64", "bool",
                                                  "complex64"]))
    with np.errstate(invalid="ignore"):   # NaN cast to an integer dtype: any value
        array = array.astype(dtype) if dtype[0] != "i" else np.trunc(array * 4).astype(dtype)
    if view == "fortran":
        array = np.asfortranarray(array)
    elif view == "read-only":
        array = np.array(array)     # an array even for 0-d (a NumPy scalar has no flags to set)
        array.flags.writeable = False
    elif view == "byte-swapped":    # the same values in the other byte order (s13)
        array = np.asarray(array).astype(np.asarray(array).dtype.newbyteorder())
    form = draw(st.sampled_from(["array"] * 12 + ["list", "none", "int", "tuple", "str", "float", "0-d",
                                                  "array-like"]))
    return {"array": array, "list": array.tolist(), "none": None, "int": 3, "tuple": (array,), "str": "x",
            "float": 2.5, "0-d": np.asarray(1.5, "float64"), "array-like": _ArrayLike(array)}[form]


class _ArrayLike:
    """Not an array, but NumPy can make one of it (``__array__``), as of a torch tensor."""

    def __init__(self, array):
        self.array = array

    def __array__(self, dtype=None, copy=None):
        return self.array if dtype is None else self.array.astype(dtype)


@st.composite
def calls(draw):
    name = draw(st.sampled_from(sorted(SIGNATURES)))
    env = {"n": draw(st.sampled_from([0, 1, 2, 3, 7, 64, 65, 300])), "m": draw(st.sampled_from([0, 1, 2, 5, 17]))}
    default = "int32" if name == "INTEGER" else "float32"
    return name, draw(st.sampled_from(["c", "interp"])), [draw(argument(s, env, default)) for s in SIGNATURES[name]]


def _outcome(fn, args):
    try:
        return "value", fn(*args)
    # MemoryError's AllocationError is a ValueError too; an integer division by zero in a kernel
    # is a ZeroDivisionError (the reference gives NumPy's 0)
    except (ValueError, TypeError, ZeroDivisionError) as err:
        return "error", err


def check_call(machines, name, target, args):
    mods, vms = machines
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        kind, got = _outcome(vms[name, target]["main"], args)
        ref_kind, want = _outcome(lambda *a: rx.interpret(mods[name], "main", *a), args)
    if ref_kind == "error":   # the reference's errors name the function too (s13: a byte-swapped
        assert "main" in str(want), want   # array reached a NumPy ufunc's bare TypeError)
    if kind == "error":   # the VM may be stricter (it refuses non-contiguous views), never looser
        assert "main" in str(got), got
        return
    if ref_kind == "error" and "writeable" in str(want):   # the VM writes a copy of a read-only view
        return
    assert ref_kind == "value", (got, want)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-4, atol=2e-4, equal_nan=True)


def test_nan_reaches_the_output_through_a_fused_relu(machines):
    # the generated GEMM's relu epilogue was (v > 0 ? v : 0): NaN became 0 in C, NaN in NumPy
    rng = np.random.default_rng(0)
    x, w1, b1, w2 = (rng.standard_normal(s).astype("float32") for s in [(3, 8), (8, 16), (16,), (16, 4)])
    x[1, 2] = np.nan
    b1[5] = np.nan
    for target in ("c", "interp"):
        got = machines[1]["MLP", target]["main"](x, w1, b1, w2)
        assert np.isnan(got).all()
    x = x[::-1].copy()   # only row 1 (now row 1 of 3 reversed) holds the NaN x value
    b1[5] = 1.0
    check_call(machines, "MLP", "c", [x, w1, b1, w2])


@pytest.mark.parametrize("target", ["c", "interp"])
def test_views_empty_and_zero_d_arguments(machines, target):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 10)).astype("float32")
    y = rng.standard_normal(5).astype("float32")
    for args in ([x[:, ::2], y], [x[::-1, :5], y[::-1]], [x[:0, :5], y], [np.float32(1.0), y],
                 [x[:3, :5].T, y], [x[:3, :0], y[:0]]):
        check_call(machines, "ELEMENTWISE", target, args)
    check_call(machines, "BOUND_ATTR", target, [np.ones((65, 4), "float32")])
    check_call(machines, "BOUND_FACT", target, [np.ones((300, 4), "float32")])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(call=calls())
def test_drawn_arguments(machines, call):
    check_call(machines, *call)


@pytest.mark.fuzz
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(call=calls())
def test_drawn_arguments_many(machines, call):
    check_call(machines, *call)


NAN_MODULE = '''from relaxscript import R
from tensorir import T
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 6), "float32"), w: R.Tensor((6, 5), "float32")):
        with R.dataflow():
            y = EXPR
            R.output(y)
        return y
'''
# argmax/argmin gave index 2**63 - 1 for a row holding NaN (NaN equals no maximum), sign(nan) gave 0;
# NumPy gives the first NaN's index and nan. The GEMM's fused silu epilogue gave -inf for -inf (a
# clamped exp), where x * sigmoid(x) is -inf * 0 = NaN.
NAN_EXPRS = ["R.argmax(x, axis=1)", "R.argmin(x, axis=0)", "R.argmax(x)", "R.sign(x)", "R.max(x, axis=1)",
             "R.min(x, axis=[0])", "R.nn.softmax(x, axis=-1)", "R.clip(x, 0.0, 1.0)", "R.nn.relu(R.matmul(x, w))",
             "R.maximum(x, R.const(0.0, 'float32'))", "R.cumsum(x, axis=1)", "R.nn.log_softmax(x, axis=1)",
             "R.topk(x, 2, axis=1)", "R.argsort(x, axis=1)", "R.variance(x, axis=1)", "R.round(x)",
             "R.nn.rms_norm(x, R.ones((6,), 'float32'), axes=[-1])", "R.nn.gelu(x)", "R.sigmoid(x)",
             "R.nn.silu(R.matmul(x, w))", "R.nn.silu(x)", "R.sigmoid(R.matmul(x, w))"]


@pytest.mark.parametrize("expr", NAN_EXPRS)
def test_nan_and_inf_agree_with_numpy(expr):
    mod = rx.from_source(NAN_MODULE.replace("EXPR", expr))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 6)).astype("float32")
    x[1, 2] = x[1, 4] = np.nan
    x[3, 0], x[2, 5], x[0, 1] = np.inf, -np.inf, -0.0
    w = rng.standard_normal((6, 5)).astype("float32")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = rx.interpret(mod, "main", x, w)
        for target in ("c", "interp"):
            got = rx.VirtualMachine(rx.build(mod, target=target))["main"](x, w)
            for g, r in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
                np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=1e-4, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("target", ["c", "interp"])
@pytest.mark.parametrize("name,x_shape,shape", [
    ("RESHAPE_INFER", (2, 4), (1,)), ("RESHAPE_INFER", (2, 4), (4,)), ("RESHAPE_INFER", (2, 4), (3,)),
    ("RESHAPE_INFER", (2, 4), (16,)), ("RESHAPE_INFER", (2, 4), (0,)), ("RESHAPE_INFER", (0, 4), (0,)),
    ("RESHAPE_TO_SHAPE", (2, 4), (4, 2)), ("RESHAPE_TO_SHAPE", (2, 4), (3, 2)),
    ("RESHAPE_TO_SHAPE", (2, 4), (2**62, 0)), ("RESHAPE_TO_SHAPE", (0, 4), (5, 0))])
def test_reshape_counts_are_checked_at_run_time(machines, target, name, x_shape, shape):
    x = np.arange(np.prod(x_shape), dtype="float32").reshape(x_shape)
    check_call(machines, name, target, [x, shape])
    try:
        want = np.reshape(x, (2, -1, shape[0]) if name == "RESHAPE_INFER" else shape) * 2
    except ValueError:
        # k = 0 divides the count by zero: a ShapeDivisionByZeroError (also a ZeroDivisionError)
        error = rx.ShapeDivisionByZeroError if name == "RESHAPE_INFER" and shape[0] == 0 else rx.ShapeMismatchError
        with pytest.raises(error, match="function 'main'"):
            machines[1][name, target]["main"](x, shape)
    else:
        np.testing.assert_array_equal(machines[1][name, target]["main"](x, shape), want)


@pytest.mark.parametrize("target", ["c", "interp"])
@pytest.mark.parametrize("m", [0, 2, 3, 7])
def test_topk_of_an_axis_shorter_than_k_is_an_error(machines, target, m):
    x = np.random.default_rng(m).standard_normal((2, m)).astype("float32")
    check_call(machines, "TOPK", target, [x, ()])
    if m < 3:
        with pytest.raises(rx.ShapeMismatchError, match="function 'main'.*topk.*expected >= 3"):
            machines[1]["TOPK", target]["main"](x, ())
    else:
        want = -np.sort(-x, axis=-1)[:, :3] * 2
        np.testing.assert_allclose(machines[1]["TOPK", target]["main"](x, ()), want, rtol=1e-6)


@pytest.mark.parametrize("target", VM_TARGETS)
def test_integer_division_by_zero_names_the_function_and_kernel_on_every_target(target):
    """The interp target raised the loop interpreter's bare ``InterpretError('integer division
    by zero in FloorDiv')`` (no function, no kernel, not a ZeroDivisionError) where the C and
    OpenCL targets raise ``KernelDivisionByZeroError`` naming both."""
    vm = rx.VirtualMachine(rx.build(M.parse(INTEGER), target=target))
    x, y = np.array([[5, -7], [3, 4]], "int32"), np.array([0, 2], "int32")
    with pytest.raises(rx.KernelDivisionByZeroError, match="function 'main': kernel '.*floor_divide.*': integer "
                                                           "division by zero"):
        vm["main"](x, y)
    y = np.array([-3, 2], "int32")
    np.testing.assert_array_equal(vm["main"](x, y), x // y + x % y)


CAST_MODULE = M.HEADER + '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n",), "float32")):
        with R.dataflow():
            w = R.multiply(x, R.const(SCALE, "float32"))
            i = R.astype(w, "DTYPE")
            y = R.astype(i, "float32")
            R.output(y)
        return y
'''


CAST_VALUES = [np.nan, np.inf, -np.inf, 1e10, -1e10, 3e9, -3e9, 300.0, -300.0, 200.7, -129.5, 65536.5,
               -2.5, 2.5, 127.9, 2**31, -2**31, 2**32, 2**63, -2**63, 2**64, 1e30, -0.9, 0.0, 2147483904.0,
               -70000.0, 4e9]


def numpy_element_loop(x, dtype):
    """NumPy's conversion of each value alone (its element loop; a contiguous run takes a SIMD
    loop whose uint32 answer for NaN, -inf and values past +-2**31 differs)."""
    return np.array([x[i:i + 1].astype(dtype)[0] for i in range(len(x))], dtype)


@pytest.mark.parametrize("target", VM_TARGETS)
@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"])
@pytest.mark.parametrize("scale", [1.0, 1e30])
def test_floats_out_of_an_integer_range_convert_as_numpy_does(target, dtype, scale):
    """Found by the random programs (wide_cast): fused float32 -> int16 -> float32 gave -2**31 on
    OpenCL (the compiler dropped the narrowing of an undefined conversion) where NumPy gives 0.
    s13: float -> uint32 / uint64 of a negative or too large value gave all ones on C (AVX-512's
    vcvttss2usi) where NumPy wraps (-1 -> 2**32 - 1, -1e10 -> 2884901888, 1e10 -> 1410065408
    for uint32), and the reference (NumPy's ``astype``) gave 2**31 or 0 for the same values in
    a contiguous run of 4 or more. Every level now takes NumPy's element-loop answer
    (``tensorir.float_casts``)."""
    mod = M.parse(CAST_MODULE.replace("SCALE", repr(scale)).replace("DTYPE", dtype))
    x = np.array(CAST_VALUES * 3, "float32")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = numpy_element_loop(x * np.float32(scale), dtype).astype("float32")
        got = rx.VirtualMachine(rx.build(mod, target=target))["main"](x)
        reference = rx.interpret(mod, "main", x)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(reference, want)


WIDE_CAST = M.HEADER + '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n",), "SRC")):
        with R.dataflow():
            y = R.astype(x, "DTYPE")
            R.output(y)
        return y
'''


@pytest.mark.parametrize("target", VM_TARGETS)
@pytest.mark.parametrize("src", ["float16", "float64"])
@pytest.mark.parametrize("dtype", ["int16", "int32", "int64", "uint8", "uint32", "uint64"])
def test_float64_and_float16_out_of_an_integer_range_convert_as_numpy_does(target, src, dtype):
    """The float64 helpers (rs_d2i32, rs_d2i64, rs_d2u64) and float16 (through float32; C's
    ``(uint32_t)`` of a negative _Float16 gave all ones), odd lengths and the lengths of a SIMD
    run, against NumPy's element loop."""
    mod = M.parse(WIDE_CAST.replace("DTYPE", dtype).replace("SRC", src))
    vm = rx.VirtualMachine(rx.build(mod, target=target))
    values = CAST_VALUES + [3000000001.0, -3000000001.0, 2.0**63 + 2.0**40, -2.0**63 - 2**11,
                            1.8446744073709550e19, 65504.0, -65504.0, -1.0, 70.5]
    for n in (1, 3, 4, 8, 16, len(values)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            x = np.resize(np.array(values, src), n)
            want = numpy_element_loop(x, dtype)
        got = vm["main"](x)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(rx.interpret(mod, "main", x), want)


SQUEEZE = M.HEADER + '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(SHAPE)):
        with R.dataflow():
            y = R.squeeze(x)
            z = R.add(y, R.const(1, "float32"))
            R.output(z)
        return z
'''


@pytest.mark.parametrize("shape, known", [('("n", 1, "m"), "float32"', True), ('"float32", ndim=3', False)])
def test_squeeze_without_axes_keeps_a_symbolic_dim_on_every_level(shape, known):
    """s13: ``R.squeeze(x)`` of an (n, 1, m) tensor at n = 1 gave (m,) on every level (NumPy's
    squeeze: the rank was unknown) where TVM's build keeps the symbolic dims, (1, m). Now the
    dims the annotation holds as a literal 1 are dropped, on every level, the VM's NumPy fallback
    (no LegalizeOps in the pipeline) included. An input of unknown shape keeps NumPy's meaning."""
    from relaxscript.transform import CallTIRRewrite
    mod = M.parse(SQUEEZE.replace("SHAPE", shape))
    runs = [("interpret", lambda a: rx.interpret(mod, "main", a))]
    for target in ("c", "interp"):
        runs.append((target, rx.VirtualMachine(rx.build(mod, target=target))["main"]))
        runs.append((target + " fallback", rx.VirtualMachine(rx.build(mod, target=target,
                                                                       pipeline=[CallTIRRewrite()]))["main"]))
    for dims in [(2, 1, 3), (1, 1, 3), (2, 1, 1), (1, 1, 1)]:
        x = np.arange(np.prod(dims), dtype="float32").reshape(dims)
        want = (x.reshape(dims[0], dims[2]) if known else np.squeeze(x)) + 1
        for level, run in runs:
            got = run(x)
            assert got.shape == want.shape, (level, dims, got.shape)
            np.testing.assert_array_equal(got, want)
