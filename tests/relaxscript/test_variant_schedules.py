"""Default CPU schedules with variants: DefaultCPUSchedule gives a symbolic-row matmul a
one-row (``n == 1``) version scheduled as a GEMV (Before/Expected); ``specialize`` makes a
condition visible to the schedules; built kernels equal NumPy at the boundaries of each condition,
also for random programs (hypothesis)."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import relaxscript as rx
import tensorir as tir
from relaxscript.transform import DefaultCPUSchedule, DispatchLibrary
from relaxscript.transform.testing import dataflow_modules
from tensorir.variants import VARIANTS_ATTR, kernel_symbols, specialize
from tests.targets import COMPILED_TARGETS

BOUNDARIES = [1, 2, 7, 8, 9, 16, 17, 64, 65]

BEFORE = '''
@R.ir_module
class Before:
    @T.prim_func
    def linear(x: T.Buffer(("n", 8), "float32"), w: T.Buffer((4, 8), "float32"), y: T.Buffer(("n", 4), "float32")):
        n = T.int64()
        for i, j, k in T.grid(n, 4, 8):
            with T.block("matmul"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    y[vi, vj] = T.float32(0)
                y[vi, vj] = y[vi, vj] + x[vi, vk] * w[vj, vk]

    @R.function
    def main(x: R.Tensor(("n", 8), "float32"), w: R.Tensor((4, 8), "float32")) -> R.Tensor(("n", 4), "float32"):
        n = T.int64()
        y = R.call_tir(Before.linear, (x, w), out_sinfo=R.Tensor((n, 4), "float32"))
        return y
'''

# The default keeps the gemm rule's row tiles. w's last index is the reduction axis, so the one-row
# version is a dot product per column, the columns split over the threads, and up to 16 rows run
# inside each column (its weight row reused from L1).
EXPECTED = '''
@R.ir_module
class Expected:
    @T.prim_func
    def linear(x: T.Buffer(("n", 8), "float32"), w: T.Buffer((4, 8), "float32"), y: T.Buffer(("n", 4), "float32")):
        n = T.int64()
        T.func_attr({"tir.is_scheduled": True, "tir.variants": [["n == 1", "linear__one_row"], ["n <= 16", "linear__few_rows"]]})
        for i_0_j_0_fused in T.parallel((n + 3) // 4):
            for i_1_init, j_1_init in T.grid(4, 4):
                with T.block("matmul_init"):
                    vi_1 = T.axis.spatial(n, i_0_j_0_fused * 4 + i_1_init)
                    vj_1 = T.axis.spatial(4, j_1_init)
                    T.where(i_0_j_0_fused * 4 + i_1_init < n)
                    T.reads()
                    T.writes(y[vi_1, vj_1])
                    y[vi_1, vj_1] = 0.0
            for k in range(8):
                for i_1 in T.unroll(4):
                    for j_1 in range(4):
                        with T.block("matmul"):
                            vi = T.axis.spatial(n, i_0_j_0_fused * 4 + i_1)
                            vj = T.axis.spatial(4, j_1)
                            vk = T.axis.reduce(8, k)
                            T.where(i_0_j_0_fused * 4 + i_1 < n)
                            T.reads(y[vi, vj], x[vi, vk], w[vj, vk])
                            T.writes(y[vi, vj])
                            y[vi, vj] = y[vi, vj] + x[vi, vk] * w[vj, vk]

    @T.prim_func
    def linear__one_row(x: T.Buffer(("n", 8), "float32"), w: T.Buffer((4, 8), "float32"), y: T.Buffer(("n", 4), "float32")):
        n = T.int64()
        T.func_attr({"tir.is_scheduled": True})
        for j in T.parallel(4):
            for i, k in T.grid(1, 8):
                with T.block("matmul"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    T.reads(y[vi, vj], x[vi, vk], w[vj, vk])
                    T.writes(y[vi, vj])
                    with T.init():
                        y[vi, vj] = 0.0
                    y[vi, vj] = y[vi, vj] + x[vi, vk] * w[vj, vk]

    @T.prim_func
    def linear__few_rows(x: T.Buffer(("n", 8), "float32"), w: T.Buffer((4, 8), "float32"), y: T.Buffer(("n", 4), "float32")):
        n = T.int64(upper=16)
        T.func_attr({"tir.is_scheduled": True})
        for j in T.parallel(4):
            for i, k in T.grid(n, 8):
                with T.block("matmul"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    T.reads(y[vi, vj], x[vi, vk], w[vj, vk])
                    T.writes(y[vi, vj])
                    with T.init():
                        y[vi, vj] = 0.0
                    y[vi, vj] = y[vi, vj] + x[vi, vk] * w[vj, vk]

    @R.function
    def main(x: R.Tensor(("n", 8), "float32"), w: R.Tensor((4, 8), "float32")) -> R.Tensor(("n", 4), "float32"):
        n = T.int64()
        y = R.call_tir(Expected.linear, (x, w), out_sinfo=R.Tensor((n, 4), "float32"))
        return y
'''


def test_default_schedule_adds_a_one_row_version():
    after = DefaultCPUSchedule()(rx.from_source(BEFORE))
    rx.assert_structural_equal(after, rx.from_source(EXPECTED))


def test_variants_can_be_switched_off():
    after = DefaultCPUSchedule(variants=False)(rx.from_source(BEFORE))
    assert set(after.prim_funcs) == {"linear"} and VARIANTS_ATTR not in after["linear"].attrs


def test_a_kernel_without_symbolic_rows_gets_no_variants():
    fixed = BEFORE.replace('("n", 8)', "(3, 8)").replace('("n", 4)', "(3, 4)").replace("(n, 4)", "(3, 4)")
    after = DefaultCPUSchedule()(rx.from_source(fixed))
    assert set(after.prim_funcs) == {"linear"} and VARIANTS_ATTR not in after["linear"].attrs


SPECIALIZE_BEFORE = '''
@T.prim_func
def scale(x: T.Buffer(("n",), "float32"), y: T.Buffer(("n",), "float32")):
    n = T.int64()
    for i in range(n):
        with T.block("scale"):
            vi = T.axis.spatial(n, i)
            y[vi] = x[vi] * T.float32(2)
'''


def test_specialize_substitutes_an_equality_in_the_body_only():
    func = tir.from_source(SPECIALIZE_BEFORE)
    (n,) = kernel_symbols(func)
    expected = tir.from_source(SPECIALIZE_BEFORE.replace("range(n)", "range(1)").replace("spatial(n, i)", "spatial(1, i)"))
    tir.assert_structural_equal(specialize(func, tir.EQ(n, 1)), expected)


def test_specialize_records_a_divisibility_as_a_fact():
    func = tir.from_source(SPECIALIZE_BEFORE)
    (n,) = kernel_symbols(func)
    version = specialize(func, tir.EQ(n % 8, 0))
    assert kernel_symbols(version)[0].multiple_of == 8
    assert "n = T.int64(multiple_of=8)" in version.script()
    assert kernel_symbols(func)[0].multiple_of is None   # the input is unchanged


LINEAR = '''
@R.ir_module
class M:
    @R.function
    def main(x: R.Tensor(("n", 48), "float32"), w: R.Tensor((40, 48), "float32"), v: R.Tensor((48, 40), "float32"),
             b: R.Tensor((40,), "float32")):
        n = T.int64()
        with R.dataflow():
            h = R.nn.gelu(R.add(R.matmul(x, R.permute_dims(w)), b))
            y = R.nn.relu(R.matmul(x, v))
            out = R.add(h, y)
            R.output(out)
        return out
'''


def no_blas_pipeline(target: str = "c"):
    """What a target without a BLAS runs: every matmul is a generated kernel."""
    return [p for p in rx.get_pipeline(target) if not isinstance(p, DispatchLibrary)]


@pytest.mark.parametrize("target", COMPILED_TARGETS)
def test_built_versions_equal_numpy_at_the_boundaries(target):
    mod = rx.from_source(LINEAR)
    exe = rx.build(mod, target=target, pipeline=no_blas_pipeline(target))
    run = rx.VirtualMachine(exe)["main"]
    rng = np.random.default_rng(1)
    w, v, b = (rng.standard_normal(s).astype("float32") for s in ((40, 48), (48, 40), (40,)))
    for n in BOUNDARIES:
        x = rng.standard_normal((n, 48)).astype("float32")
        pre = x @ w.T + b
        want = 0.5 * pre * (1 + np.vectorize(__import__("math").erf)(pre / np.sqrt(2))) + np.maximum(x @ v, 0)
        np.testing.assert_allclose(run(x, w, v, b), want, rtol=1e-4, atol=1e-4, err_msg=f"n = {n}")


def test_the_c_build_has_one_row_versions_and_the_vm_selects_them():
    from relaxscript.vm import instructions as I
    exe = rx.build(rx.from_source(LINEAR), target="c", pipeline=no_blas_pipeline())
    calls = [ins for ins in exe.functions["main"].code if isinstance(ins, I.CallKernel)]
    chosen = [ins for ins in calls if ins.variants]
    regimes = sorted(tuple(name.rsplit("__", 1)[1] for _, name in ins.variants) for ins in chosen)
    # x @ w.T: weight rows contiguous along the reduction -> one row, then a few rows; x @ v: one row
    assert regimes == [("one_row",), ("one_row", "few_rows")]


def _inputs(mod, n: int, m: int, rng):
    shapes = []
    for p in mod["main"].params:
        dims = [n if d is p.struct_info.shape[0] else (m if isinstance(d, tir.Var) else d.value)
                for d in p.struct_info.shape]
        shapes.append(tuple(dims))
    return [rng.standard_normal(s).astype("float32") for s in shapes]


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mod=dataflow_modules(kinds=["matmul", "unary", "binary", "broadcast", "permute", "reduce"]),
       m=st.integers(1, 5))
def test_random_programs_with_variants_equal_the_interpreter(mod, m):
    """Random programs through the C pipeline without a BLAS: kernels with a symbolic row count
    get one-row versions; the VM's choice equals the reference interpreter at every boundary."""
    import os
    from relaxscript.interpreter.kernel_variants import CHECK_ENV
    exe = rx.build(mod, target="c", pipeline=no_blas_pipeline())
    run = rx.VirtualMachine(exe)["main"]
    rng = np.random.default_rng(0)
    previous = os.environ.get(CHECK_ENV)
    os.environ[CHECK_ENV] = "1"   # the interpreter also runs every applicable version and compares
    try:
        for n in (0, 1, 2, 7, 8, 9, 16, 17):
            args = _inputs(mod, n, m, rng)
            want = rx.interpret(mod, "main", *args)
            got = run(*args)
            for a, b in zip(want if isinstance(want, tuple) else (want,), got if isinstance(got, tuple) else (got,)):
                np.testing.assert_allclose(b, a, rtol=1e-3, atol=1e-3, err_msg=f"n = {n}, m = {m}")
    finally:
        if previous is None:
            os.environ.pop(CHECK_ENV)
        else:
            os.environ[CHECK_ENV] = previous


def test_specialize_records_an_upper_bound_as_a_fact():
    func = tir.from_source(SPECIALIZE_BEFORE)
    (n,) = kernel_symbols(func)
    assert kernel_symbols(specialize(func, tir.LE(n, 16)))[0].upper == 16
    assert kernel_symbols(specialize(func, tir.LT(n, 16)))[0].upper == 15


def test_a_column_contiguous_weight_gets_no_few_rows_version():
    source = BEFORE.replace("w: T.Buffer((4, 8)", "w: T.Buffer((8, 4)").replace("w[vj, vk]", "w[vk, vj]") \
        .replace('w: R.Tensor((4, 8)', 'w: R.Tensor((8, 4)')
    after = DefaultCPUSchedule()(rx.from_source(source))
    assert after["linear"].attrs[VARIANTS_ATTR] == [["n == 1", "linear__one_row"]]
