"""Edge cases of run-time arguments, on every level: the reference interpreter (rx.interpret)
and the VM of both targets. Values beyond int64 never wrap, an ndarray subclass cannot send
a kernel past its buffer, lists take the annotated dtype, impossible shapes raise the
project's AllocationError, and empty reductions give the identity everywhere."""
import numpy as np
import pytest

import relaxscript as rx
from tensorir.errors import AllocationError, ShapeMismatchError
from tests.relaxscript import vm_modules as M
from tests.targets import VM_TARGETS

RUNNERS = ("interpret", *VM_TARGETS)
_BUILT: dict = {}


def main_of(text: str, runner: str):
    """``main`` of the module ``text`` run by ``runner`` (VMs built once per module)."""
    mod = M.parse(text)
    if runner == "interpret":
        return lambda *args: rx.interpret(mod, "main", *args)
    key = (text, runner)
    if key not in _BUILT:
        _BUILT[key] = rx.VirtualMachine(rx.build(mod, target=runner))
    return _BUILT[key]["main"]


def expect_error(call, *parts, kind=ShapeMismatchError):
    with pytest.raises(kind) as info:
        call()
    for part in parts:
        assert part in str(info.value), f"{part!r} not in {str(info.value)!r}"
    return info.value


SHAPE_PARAM = M.HEADER + '''
@R.ir_module
class Module:
    @R.function
    def main(s: R.Shape(["n", "m"]), x: R.Tensor(("n", "m"), "float32")):
        with R.dataflow():
            a = R.exp(x)
            R.output(a)
        return a
'''

SCALARS = M.HEADER + '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n",), "float32"), k: R.Prim("int64"), j: R.Prim("int32"),
             f: R.Prim("float32")):
        with R.dataflow():
            a = R.exp(x)
            R.output(a)
        return a
'''

UNARY = M.HEADER + '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n",), "float32")):
        with R.dataflow():
            a = R.exp(x)
            R.output(a)
        return a
'''

TYPED = M.HEADER + '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n",), "float32"), i: R.Tensor(("n",), "int32"), b: R.Tensor(("n",), "bool"),
             s: R.Tensor((), "float32")):
        with R.dataflow():
            fi = R.astype(i, "float32")
            fb = R.astype(b, "float32")
            a = R.add(R.add(x, fi), R.add(fb, s))
            R.output(a)
        return a
'''

TUPLE_PARAM = M.HEADER + '''
@R.ir_module
class Module:
    @R.function
    def main(t: R.Tuple(R.Tensor(("n",), "float32"), R.Tensor(("n",), "float32"))):
        a = t[0]
        b = t[1]
        with R.dataflow():
            c = R.add(a, b)
            R.output(c)
        return c
'''

SQUARE_ZEROS = M.HEADER + '''
@R.ir_module
class Module:
    @R.function
    def main(s: R.Shape(["n"])):
        n = T.int64()
        with R.dataflow():
            a = R.zeros(R.shape([n, n]), "float32")
            b = R.add(a, R.const(1, "float32"))
            R.output(b)
        return b
'''

SHRINKING = M.HEADER + '''
@R.ir_module
class Module:
    @R.function
    def main(s: R.Shape(["n"])):
        n = T.int64()
        with R.dataflow():
            a = R.zeros(R.shape([n - 5, 2]), "float32")
            b = R.add(a, R.const(1, "float32"))
            R.output(b)
        return b
'''

REDUCTIONS = M.HEADER + '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", "m"), "float32"), i: R.Tensor(("n", "m"), "int32")):
        with R.dataflow():
            s = R.sum(x, axis=[1])
            p = R.prod(x, axis=[1])
            hi = R.max(x, axis=[1])
            lo = R.min(x, axis=[1])
            mean = R.mean(x, axis=[1])
            var = R.variance(x, axis=[1])
            ihi = R.max(i, axis=[1])
            ilo = R.min(i, axis=[1], keepdims=True)
            isum = R.sum(i, axis=[1])
            total = R.sum(x)
            R.output(s, p, hi, lo, mean, var, ihi, ilo, isum, total)
        return (s, p, hi, lo, mean, var, ihi, ilo, isum, total)
'''

ARG_REDUCTIONS = M.HEADER + '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", "m"), "float32")):
        with R.dataflow():
            am = R.argmax(x, axis=1)
            an = R.argmin(x, axis=-1, keepdims=True)
            a0 = R.argmax(x, axis=0)
            whole = R.argmin(x)
            R.output(am, an, a0, whole)
        return (am, an, a0, whole)
'''

MATMUL = M.HEADER + '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", "k"), "float32"), w: R.Tensor(("k", 4), "float32")):
        with R.dataflow():
            y = R.matmul(x, w)
            z = R.add(y, R.const(1, "float32"))
            R.output(z)
        return z
'''


class LyingShape(np.ndarray):
    """An ndarray subclass whose ``shape`` property claims far more than its buffer holds."""

    @property
    def shape(self):
        return (1000,) + tuple(super().shape[1:])


# ---------------------------------------------------------------- int64 range
@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("value", [2**64 + 3, 2**63, -2**63 - 1])
def test_shape_values_beyond_int64_are_errors_not_wrapped(runner, value):
    main = main_of(SHAPE_PARAM, runner)
    x = np.ones((3, 4), "float32")
    expect_error(lambda: main((value, 4), x), "function 'main'", "parameter 's'", "[0]",
                 str(value), "outside the int64 range")
    # the largest int64 is a value like any other: it just does not match x
    expect_error(lambda: main((2**63 - 1, 4), x), "parameter 'x'", "symbolic var n")
    np.testing.assert_allclose(main((3, 4), x), np.exp(x), rtol=1e-6)


@pytest.mark.parametrize("runner", RUNNERS)
def test_integer_scalars_must_fit_their_dtype(runner):
    main = main_of(SCALARS, runner)
    x = np.zeros(2, "float32")
    expect_error(lambda: main(x, 2**64 + 3, 1, 0.5), "parameter 'k'", "outside the int64 range")
    expect_error(lambda: main(x, 1, 2**31, 0.5), "parameter 'j'", "2147483648", "outside the int32 range")
    expect_error(lambda: main(x, 1, np.int64(-2**40), 0.5), "parameter 'j'", "outside the int32 range")
    expect_error(lambda: main(x, 1, 1, 2**2000), "parameter 'f'", "expected a float32 scalar")
    np.testing.assert_allclose(main(x, 2**63 - 1, -2**31, 2**70), np.ones(2, "float32"))


# ---------------------------------------------------------------- ndarray subclasses
@pytest.mark.parametrize("runner", RUNNERS)
def test_a_subclass_lying_about_its_shape_is_read_as_its_buffer(runner):
    main = main_of(UNARY, runner)
    real = np.arange(4, dtype="float32")
    liar = real.view(LyingShape)
    assert liar.shape == (1000,)   # what the subclass claims
    got = main(liar)
    assert type(got) is np.ndarray and got.shape == (4,)
    np.testing.assert_allclose(got, np.exp(real), rtol=1e-6)


@pytest.mark.parametrize("runner", RUNNERS)
def test_a_lying_subclass_inside_a_tuple_argument_is_read_as_its_buffer(runner):
    main = main_of(TUPLE_PARAM, runner)
    liar = np.ones(3, "float32").view(LyingShape)
    np.testing.assert_allclose(main((liar, np.arange(3, dtype="float32"))), [1.0, 2.0, 3.0])
    expect_error(lambda: main((liar, np.ones(1000, "float32"))), "parameter 't'", "symbolic var n")


# ---------------------------------------------------------------- lists and scalars
@pytest.mark.parametrize("runner", RUNNERS)
def test_lists_and_scalars_take_the_annotated_dtype(runner):
    main = main_of(TYPED, runner)
    got = main([0.5, 1.5], [1, 2], [True, False], 2.0)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, [0.5 + 1 + 1 + 2, 1.5 + 2 + 0 + 2])
    # ints for a float tensor, 0/1 and whole floats for int and bool tensors fit exactly
    np.testing.assert_allclose(main([1, 2], [3.0, 4.0], [1, 0], 0), [5.0, 6.0])


@pytest.mark.parametrize("runner", RUNNERS)
def test_list_values_the_dtype_cannot_hold_are_errors(runner):
    main = main_of(TYPED, runner)
    x = [0.0, 0.0]
    expect_error(lambda: main(x, [1.5, 2], [True, True], 0.0),
                 "function 'main'", "parameter 'i'", "1.5", "int32 tensor cannot hold")
    expect_error(lambda: main(x, [2**40, 0], [True, True], 0.0), "parameter 'i'", str(2**40))
    expect_error(lambda: main(x, [0, 0], [2, 0], 0.0), "parameter 'b'", "bool tensor cannot hold")
    expect_error(lambda: main(x, [0, 2**70], [1, 1], 0.0), "parameter 'i'", "not a list of numbers")
    expect_error(lambda: main(["a", "b"], [0, 0], [1, 1], 0.0), "parameter 'x'", "not a list of numbers")
    # an explicit array of another dtype is still the caller's to cast, as before
    expect_error(lambda: main(np.zeros(2), [0, 0], [1, 1], 0.0), "parameter 'x'",
                 "expected dtype float32", "float64")


# ---------------------------------------------------------------- impossible shapes
@pytest.mark.parametrize("runner", RUNNERS)
def test_shapes_beyond_the_address_space_raise_allocation_error(runner):
    main = main_of(SQUARE_ZEROS, runner)
    # refused before any kernel runs: by the allocation check naming the shape, or (where the
    # zeros fuse into a kernel whose loop nest is checked first) by the loop-count check
    with pytest.raises(ShapeMismatchError, match=r"function 'main'.*(\(n, n\).*float32|more than int64 counts)"
                                                 r".*n = 1099511627776") as info:
        main((2**40,))
    assert "too big" not in str(info.value)   # NumPy's own words stay out
    np.testing.assert_allclose(main((3,)), np.ones((3, 3)))


@pytest.mark.parametrize("runner", RUNNERS)
def test_negative_dimensions_raise_allocation_error(runner):
    main = main_of(SHRINKING, runner)
    expect_error(lambda: main((2,)), "function 'main'", "(n - 5, 2) = (-3, 2)", "negative",
                 "symbolic var n = 2", "s[0]", kind=AllocationError)
    np.testing.assert_allclose(main((7,)), np.ones((2, 2)))


@pytest.mark.parametrize("runner", RUNNERS + ("interpret legalized",))
def test_running_out_of_memory_is_an_allocation_error(runner, monkeypatch):
    if runner == "interpret legalized":   # outputs of call_tir, allocated by the interpreter
        mod = rx.transform.LegalizeOps()(M.parse(SQUARE_ZEROS))
        main = lambda *args: rx.interpret(mod, "main", *args)  # noqa: E731
    else:
        _BUILT.pop((SQUARE_ZEROS, runner), None)   # a fresh VM: it links (binds np.empty) at its first call
        main = main_of(SQUARE_ZEROS, runner)

    def out_of_memory(*args, **kwargs):
        raise MemoryError("Unable to allocate")
    if runner == "opencl":   # device memory runs out, not the host's
        from backends.opencl.memory import OpenCLMemory
        monkeypatch.setattr(OpenCLMemory, "_buffer", out_of_memory)
    else:
        monkeypatch.setattr(np, "empty", out_of_memory)
        monkeypatch.setattr(np, "full", out_of_memory)
    expect_error(lambda: main((3,)), "function 'main'", "(n, n) = (3, 3)", "more than is available",
                 "symbolic var n = 3", "s[0]", kind=AllocationError)
    monkeypatch.undo()
    _BUILT.pop((SQUARE_ZEROS, runner), None)


# ---------------------------------------------------------------- empty reductions
def expected_reductions(x, i):
    with np.errstate(all="ignore"):
        return (x.sum(1), x.prod(1), np.max(x, 1, initial=-np.inf), np.min(x, 1, initial=np.inf),
                np.full(x.shape[0], np.nan, "float32"), np.full(x.shape[0], np.nan, "float32"),
                np.max(i, 1, initial=np.iinfo(np.int32).min), np.min(i, 1, keepdims=True, initial=np.iinfo(np.int32).max),
                i.sum(1, dtype="int32"), np.float32(x.sum()))


@pytest.mark.parametrize("runner", RUNNERS)
def test_empty_reductions_give_the_identity_on_every_level(runner):
    main = main_of(REDUCTIONS, runner)
    x, i = np.zeros((3, 0), "float32"), np.zeros((3, 0), "int32")
    got = main(x, i)
    names = ["sum", "prod", "max", "min", "mean", "variance", "int max", "int min", "int sum", "total"]
    for name, value, want in zip(names, got, expected_reductions(x, i)):
        assert value.shape == np.shape(want), name
        np.testing.assert_array_equal(value, want, err_msg=name)
    assert got[2][0] == -np.inf and got[3][0] == np.inf and got[1][0] == 1.0
    # an empty tensor reduced as a whole, and the same module on a non-empty input
    got = main(np.zeros((0, 0), "float32"), np.zeros((0, 0), "int32"))
    assert got[-1] == 0.0 and got[0].shape == (0,)
    rng = np.random.default_rng(0)
    x, i = rng.standard_normal((3, 5)).astype("float32"), rng.integers(-9, 9, (3, 5)).astype("int32")
    got = main(x, i)
    np.testing.assert_allclose(got[2], x.max(1))


@pytest.mark.parametrize("runner", RUNNERS)
def test_argmax_and_argmin_of_an_empty_axis_are_errors(runner):
    """No element to point at: every level gave index 2**63 - 1 (the identity of the compiled
    first-index search) where NumPy raises; now each raises naming the op."""
    main = main_of(ARG_REDUCTIONS, runner)
    for shape in [(3, 0), (0, 0), (0, 4)]:
        with pytest.raises(ShapeMismatchError, match="function 'main'.*arg(max|min)"):
            main(np.zeros(shape, "float32"))
    x = np.random.default_rng(0).standard_normal((3, 5)).astype("float32")
    want = (x.argmax(1), x.argmin(-1, keepdims=True), x.argmax(0), x.argmin())
    for got, expected in zip(main(x), want):
        np.testing.assert_array_equal(got, expected)
    # (1, 4): every reduced axis is non-empty
    x = x[:1, :4]
    for got, expected in zip(main(x), (x.argmax(1), x.argmin(-1, keepdims=True), x.argmax(0), x.argmin())):
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("n", [1, 3])
def test_matmul_over_an_empty_inner_dimension_is_zero(runner, n):
    """Found by the random-program test drawing k = 0: a single-row product (BLAS's sgemv)
    left the VM's reused intermediate holding the previous call's values."""
    main = main_of(MATMUL, runner)
    main(np.ones((n, 2), "float32"), np.ones((2, 4), "float32"))   # the intermediate now holds 2s
    got = main(np.zeros((n, 0), "float32"), np.zeros((0, 4), "float32"))
    np.testing.assert_array_equal(got, np.ones((n, 4), "float32"))


SOFTMAX = M.HEADER + '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 3), "float32")):
        with R.dataflow():
            s = R.nn.softmax(x, axis=0)
            ls = R.nn.log_softmax(x, axis=0)
            R.output(s, ls)
        return (s, ls)
'''


@pytest.mark.parametrize("runner", RUNNERS)
def test_softmax_over_an_empty_axis_is_empty(runner):
    """Found by the random-program test drawing n = 0: NumPy's max of an empty axis raised."""
    main = main_of(SOFTMAX, runner)
    s, ls = main(np.zeros((0, 3), "float32"))
    assert s.shape == ls.shape == (0, 3)
    s, ls = main(np.zeros((2, 3), "float32"))
    np.testing.assert_allclose(s, 0.5)
    np.testing.assert_allclose(ls, np.log(0.5), rtol=1e-6)


KERNEL_SCALAR = M.HEADER + '''
@R.ir_module
class Module:
    @T.prim_func
    def fill(x: T.Buffer((4,), "float32"), y: T.Buffer((4,), "float32"), k: T.int64):
        for i in range(4):
            with T.block("fill"):
                vi = T.axis.spatial(4, i)
                y[vi] = x[vi] + T.Cast("float32", k % 1000)

    @R.function
    def main(x: R.Tensor((4,), "float32"), s: R.Shape(["n"])):
        n = T.int64()
        y = R.call_tir(Module.fill, [x], R.Tensor((4,), "float32"), tir_vars=R.shape([n * n + 1]))
        return y
'''


@pytest.mark.parametrize("runner", RUNNERS)
def test_a_kernel_scalar_beyond_int64_is_an_error_not_wrapped(runner):
    main = main_of(KERNEL_SCALAR, runner)
    x = np.zeros(4, "float32")
    # n * n + 1 = 2**64 + 1 would reach the kernel as 1 through the VM's int64 table
    where = ("fill: scalar parameter 'k'",) if runner == "interpret" else ("function 'main'", "n * n + 1")
    expect_error(lambda: main(x, (2**32,)), *where, "18446744073709551617", "outside the int64 range")
    np.testing.assert_array_equal(main(x, (3,)), np.full(4, 10.0))


def test_the_vm_tensor_check_converts_with_the_annotated_dtype_and_never_trusts_subclasses():
    from relaxscript.vm.sym_code import SymCodeError, render_checks
    lines = render_checks([("load", 1, 0), ("tensor", 1, 0, 0, 2)]).splitlines()
    assert lines[2:] == ["    if type(v1) is not _ndarray:",
                         "        v1 = _as_tensor(v1, 0, _dt[2]); regs[0] = v1"]
    # a tuple field cannot be written back: only a subclass is viewed, a list is rejected
    assert "_as_tensor(v1, 0, convert=False)" in render_checks([("load", 1, 0), ("tensor", 1, 0, None)])
    with pytest.raises(SymCodeError, match="a dtype index"):
        render_checks([("tensor", 1, 0, 0, "float32')); import os; (('")])
