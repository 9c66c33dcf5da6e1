"""R.call_tir_inplace: parse/print, deduction, interpreter and C VM update the argument in place."""
import numpy as np
import pytest

import relaxscript as rx
from relaxscript.op import OpDeductionError
from tests.targets import VM_TARGETS

SOURCE = '''
@R.ir_module
class M:
    @T.prim_func
    def write_rows(cache: T.Buffer((8, 2), "float32"), new: T.Buffer(("n", 2), "float32"), t: T.int64):
        n = T.int64()
        for i, j in T.grid(n, 2):
            with T.block("write"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.where(t + i < 8)
                cache[t + vi, vj] = new[vi, vj]

    @R.function
    def main(cache: R.Tensor((8, 2), "float32"), x: R.Tensor(("n", 2), "float32"),
             pos: R.Shape(["t"])) -> R.Tensor((8, 2), "float32"):
        n = T.int64()
        t = T.int64()
        with R.dataflow():
            y = R.multiply(x, R.const(2.0, "float32"))
            updated = R.call_tir_inplace(M.write_rows, (cache, y), inplace_indices=[0],
                                         out_sinfo=R.Tensor((8, 2), "float32"), tir_vars=R.shape([t]))
            s = R.add(updated, R.const(1.0, "float32"))
            R.output(s)
        return s
'''


def expected(cache, x, t):
    cache = cache.copy()
    rows = x[: max(0, min(len(x), 8 - t))] * 2
    cache[t:t + len(rows)] = rows
    return cache


def test_prints_and_reparses():
    mod = rx.from_source(SOURCE)
    text = mod.script()
    assert "R.call_tir_inplace(cls.write_rows, (cache, y)" in text and "inplace_indices=(0,)" in text
    again = rx.from_source(text)
    rx.assert_structural_equal(again, mod)
    assert again.script() == text


@pytest.mark.parametrize("target", ["reference"] + VM_TARGETS)
@pytest.mark.parametrize("n,t", [(3, 2), (1, 7), (4, 6), (0, 0)])
def test_updates_the_argument_in_place(target, n, t):
    mod = rx.from_source(SOURCE)
    rng = np.random.default_rng(n * 10 + t)
    cache = rng.standard_normal((8, 2)).astype("float32")
    x = rng.standard_normal((n, 2)).astype("float32")
    want = expected(cache, x, t)
    if target == "reference":
        out = rx.interpret(mod, "main", cache, x, (t,))
    else:   # a device target copies NumPy arguments in: what it updates in place must come back
        out = rx.VirtualMachine(rx.build(mod, target=target))["main"](cache, x, (t,))
    np.testing.assert_array_equal(cache, want)    # the caller's array was updated; rows past 8 dropped
    np.testing.assert_allclose(out, want + 1, rtol=1e-6)


def test_output_must_be_the_updated_argument():
    text = SOURCE.replace('out_sinfo=R.Tensor((8, 2), "float32"), tir_vars',
                          'out_sinfo=R.Tensor((8, 3), "float32"), tir_vars')
    with pytest.raises((OpDeductionError, rx.ParseError), match="must be the annotation of argument 0"):
        rx.from_source(text)


def test_inplace_index_out_of_range():
    text = SOURCE.replace("inplace_indices=[0]", "inplace_indices=[5]")
    with pytest.raises((OpDeductionError, rx.ParseError), match="not an argument position"):
        rx.from_source(text)


TWO_CACHES = '''
@R.ir_module
class M:
    @T.prim_func
    def write_both(a: T.Buffer((8, 2), "float32"), b: T.Buffer((8, 2), "float32"),
                   new: T.Buffer(("n", 2), "float32"), t: T.int64):
        n = T.int64()
        for i, j in T.grid(n, 2):
            with T.block("write_a"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.where(t + i < 8)
                a[t + vi, vj] = new[vi, vj]
        for i, j in T.grid(n, 2):
            with T.block("write_b"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.where(t + i < 8)
                b[t + vi, vj] = new[vi, vj] * T.float32(-1)

    @R.function
    def main(a: R.Tensor((8, 2), "float32"), b: R.Tensor((8, 2), "float32"), x: R.Tensor(("n", 2), "float32"),
             pos: R.Shape(["t"])) -> R.Tensor((8, 2), "float32"):
        n = T.int64()
        t = T.int64()
        with R.dataflow():
            both = R.call_tir_inplace(M.write_both, (a, b, x), inplace_indices=[0, 1],
                                      out_sinfo=[R.Tensor((8, 2), "float32"), R.Tensor((8, 2), "float32")],
                                      tir_vars=R.shape([t]))
            new_a = both[0]
            new_b = both[1]
            s = R.add(new_a, new_b)
            R.output(s)
        return s
'''


@pytest.mark.parametrize("target", ["reference"] + VM_TARGETS)
def test_two_updated_arguments_read_field_by_field(target):
    mod = rx.from_source(TWO_CACHES)
    rng = np.random.default_rng(5)
    a, b = (rng.standard_normal((8, 2)).astype("float32") for _ in range(2))
    x = rng.standard_normal((3, 2)).astype("float32")
    want_a, want_b = a.copy(), b.copy()
    want_a[6:8], want_b[6:8] = x[:2], -x[:2]
    if target == "reference":
        out = rx.interpret(mod, "main", a, b, x, (6,))
    else:
        exe = rx.build(mod, target=target)
        # the result tuple is only read field by field: no tuple is built at run time
        assert not any(type(ins).__name__ == "MakeTuple" for ins in exe.functions["main"].code)
        out = rx.VirtualMachine(exe)["main"](a, b, x, (6,))
    np.testing.assert_array_equal(a, want_a)
    np.testing.assert_array_equal(b, want_b)
    np.testing.assert_allclose(out, want_a + want_b, rtol=1e-6)


@pytest.mark.parametrize("target", ["reference"] + VM_TARGETS)
@pytest.mark.parametrize("form", ["read-only", "frombuffer", "bound"])
def test_read_only_argument_is_refused(target, form):
    # the C kernel wrote into a read-only array, and into the immutable bytes under np.frombuffer
    mod = rx.from_source(SOURCE)
    data = bytes(64)
    cache = np.frombuffer(data, "float32").reshape(8, 2)
    if form == "read-only":
        cache = np.zeros((8, 2), "float32")
        cache.flags.writeable = False
    x = np.ones((3, 2), "float32")
    with pytest.raises(rx.ShapeMismatchError, match="function 'main'.*writeable"):
        if target == "reference":
            rx.interpret(mod, "main", cache, x, (2,))
        elif form == "bound":
            rx.VirtualMachine(rx.build(mod, target=target)).bind("main", {0: cache})(x, (2,))
        else:
            rx.VirtualMachine(rx.build(mod, target=target))["main"](cache, x, (2,))
    assert not cache.any() and data == bytes(64)


DPS_SOURCE = '''
@R.ir_module
class Module:
    @T.prim_func
    def neg(a: T.Buffer(("n",), "float32"), b: T.Buffer(("n",), "float32")):
        n = T.int64()
        for i in T.serial(n):
            with T.block("b"):
                vi = T.axis.spatial(n, i)
                b[vi] = T.float32(0) - a[vi]

    @R.function(pure=False)
    def main(x: R.Tensor(("n",), "float32"), out: R.Tensor(("n",), "float32"),
             out2: R.Tensor(("n",), "float32")):
        n = T.int64()
        _ = R.call_tir_dps(Module.neg, (x, out))
        _1 = R.call_dps_library_dps("numpy.negative", (out,), (out2,))
        return out2
'''


@pytest.mark.parametrize("target", ["reference"] + VM_TARGETS)
@pytest.mark.parametrize("read_only", ["out", "out2", "x", None])
def test_read_only_output_of_a_direct_dps_call_is_refused(target, read_only):
    """A parameter a direct DPS call writes (``R.call_tir_dps``'s kernel stores into it, or it is
    an output of ``R.call_dps_library_dps``) was written even when read-only (the C kernel into
    an immutable buffer); now refused before any kernel runs, naming the function and the
    parameter. A read-only parameter the calls only read is fine."""
    mod = rx.from_source(DPS_SOURCE)
    args = {"x": np.arange(4, dtype="float32"), "out": np.zeros(4, "float32"), "out2": np.zeros(4, "float32")}
    if read_only is not None:
        args[read_only] = np.frombuffer(bytes(16), "float32")    # read-only: immutable bytes below
    run = (lambda *a: rx.interpret(mod, "main", *a)) if target == "reference" else \
        rx.VirtualMachine(rx.build(mod, target=target))["main"]
    if read_only in ("out", "out2"):
        with pytest.raises(rx.ShapeMismatchError, match=f"function 'main'.*parameter '{read_only}'.*writeable"):
            run(args["x"], args["out"], args["out2"])
        assert not args["out"].any() and not args["out2"].any()
    else:
        got = run(args["x"], args["out"], args["out2"])
        np.testing.assert_array_equal(np.asarray(got), args["x"])
        np.testing.assert_array_equal(args["out"], -args["x"])


ALIASED_DPS_SOURCE = '''
@R.ir_module
class Module:
    @T.prim_func
    def neg(a: T.Buffer(("n",), "float32"), b: T.Buffer(("n",), "float32")):
        n = T.int64()
        for i in T.serial(n):
            with T.block("b"):
                vi = T.axis.spatial(n, i)
                b[vi] = T.float32(0) - a[vi]

    @R.function(pure=False)
    def main(x: R.Tensor(("n",), "float32"), out: R.Tensor(ndim=1, dtype="float32")):
        n = T.int64()
        o = R.match_cast(out, R.Tensor((n,), "float32"))
        o2 = o
        _ = R.call_tir_dps(Module.neg, (x, o2))
        return o
'''


@pytest.mark.parametrize("target", ["reference"] + VM_TARGETS)
def test_read_only_output_reached_through_a_match_cast_is_refused(target):
    """The written argument is a match_cast (and a copy) of the parameter: the C kernel wrote
    into the immutable bytes under it (the register check saw another register)."""
    mod = rx.from_source(ALIASED_DPS_SOURCE)
    data = bytes(16)
    out = np.frombuffer(data, "float32")
    run = (lambda *a: rx.interpret(mod, "main", *a)) if target == "reference" else \
        rx.VirtualMachine(rx.build(mod, target=target))["main"]
    with pytest.raises(rx.ShapeMismatchError, match="function 'main'.*parameter 'out'.*writeable"):
        run(np.ones(4, "float32"), out)
    assert data == bytes(16)
    writeable = np.zeros(4, "float32")
    run(np.ones(4, "float32"), writeable)
    np.testing.assert_array_equal(writeable, -np.ones(4, "float32"))
