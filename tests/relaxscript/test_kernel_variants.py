"""Multi-version kernels (tensorir/variants.py): a prim_func's ``tir.variants`` attribute prints and
re-parses, and every executor (reference interpreter, the VM on each target, a saved executable)
runs the version whose condition holds first, at and around each condition's boundary.

The versions here add different constants on purpose, so the result shows which one ran."""
import numpy as np
import pytest

import relaxscript as rx
from relaxscript.vm.instructions import VMBuildError
from tests.targets import VM_TARGETS


def _kernel(name: str, constant: float, attr: str = "") -> str:
    return f'''
    @T.prim_func
    def {name}(x: T.Buffer(("n", 4), "float32"), out: T.Buffer(("n", 4), "float32")):
        n = T.int64()
        {attr}
        for i, j in T.grid(n, 4):
            with T.block("add"):
                vi, vj = T.axis.remap("SS", [i, j])
                out[vi, vj] = x[vi, vj] + T.float32({constant})
'''


VARIANTS = '[["n == 1", "add_one"], ["n % 8 == 0", "add_eight"], ["n <= 64", "add_small"]]'
SOURCE = ("@R.ir_module\nclass M:" + _kernel("add_default", 1000.0, 'T.func_attr({"tir.variants": ' + VARIANTS + '})')
          + _kernel("add_one", 1.0) + _kernel("add_eight", 8.0) + _kernel("add_small", 64.0) + '''
    @R.function
    def main(x: R.Tensor(("n", 4), "float32")) -> R.Tensor(("n", 4), "float32"):
        n = T.int64()
        with R.dataflow():
            y = R.call_tir(M.add_default, (x,), out_sinfo=R.Tensor((n, 4), "float32"))
            z = R.multiply(y, R.const(2.0, "float32"))
            R.output(z)
        return z
''')


def chosen_constant(n: int) -> float:
    """What the first holding condition of VARIANTS adds."""
    if n == 1:
        return 1.0
    if n % 8 == 0:
        return 8.0
    if n <= 64:
        return 64.0
    return 1000.0


BOUNDARIES = [1, 2, 7, 8, 9, 63, 64, 65, 72, 73]


def test_prints_and_reparses():
    mod = rx.from_source(SOURCE)
    text = mod.script()
    assert '"tir.variants": [["n == 1", "add_one"], ["n % 8 == 0", "add_eight"]' in text
    again = rx.from_source(text)
    rx.assert_structural_equal(again, mod)
    assert again.script() == text


@pytest.mark.parametrize("target", ["reference"] + VM_TARGETS)
def test_the_first_holding_condition_selects(target):
    mod = rx.from_source(SOURCE)
    run = (lambda x: rx.interpret(mod, "main", x)) if target == "reference" else \
        rx.VirtualMachine(rx.build(mod, target=target))["main"]
    for n in BOUNDARIES:
        x = np.arange(n * 4, dtype="float32").reshape(n, 4)
        np.testing.assert_allclose(run(x), (x + chosen_constant(n)) * 2, err_msg=f"n = {n}")


def test_saved_executable_keeps_the_variants(tmp_path):
    path = tmp_path / "variants.rsx"
    rx.build(rx.from_source(SOURCE), target="c").save(path)
    run = rx.VirtualMachine(rx.Executable.load(path))["main"]
    for n in (1, 8, 9, 65):
        x = np.ones((n, 4), "float32")
        np.testing.assert_allclose(run(x), (x + chosen_constant(n)) * 2)


def test_dead_code_elimination_keeps_variants():
    mod = rx.transform.DeadCodeElimination()(rx.from_source(SOURCE))
    assert {"add_one", "add_eight", "add_small", "add_default"} <= set(mod.functions)


def test_checking_mode_finds_versions_that_disagree(monkeypatch):
    from relaxscript.interpreter.kernel_variants import CHECK_ENV, VariantMismatchError
    monkeypatch.setenv(CHECK_ENV, "1")
    with pytest.raises(VariantMismatchError, match="'add_default'.*'add_one'|'add_small'"):
        rx.interpret(rx.from_source(SOURCE), "main", np.ones((1, 4), "float32"))


def test_a_missing_variant_is_a_build_error():
    text = SOURCE.replace('"n <= 64", "add_small"', '"n <= 64", "add_tiny"')
    with pytest.raises(VMBuildError, match="variant 'add_tiny' is not a prim_func"):
        rx.build(rx.from_source(text), target="c")


def test_a_condition_over_an_unknown_symbol_is_a_build_error():
    text = SOURCE.replace('"n <= 64"', '"m <= 64"')
    with pytest.raises(VMBuildError, match="undefined name 'm'.*symbols are n"):
        rx.build(rx.from_source(text), target="c")


def test_a_variant_with_another_signature_is_refused():
    text = SOURCE.replace('def add_small(x: T.Buffer(("n", 4)', 'def add_small(x: T.Buffer(("n", 5)')
    with pytest.raises(VMBuildError, match="variant 'add_small': parameter 'x' has shape"):
        rx.build(rx.from_source(text), target="c")


SCALAR_SOURCE = '''
@R.ir_module
class S:
    @T.prim_func
    def shift(x: T.Buffer(("n",), "float32"), out: T.Buffer(("n",), "float32"), t: T.int64):
        n = T.int64()
        T.func_attr({"tir.variants": [["t == 0 and n > 2", "shift_marked"]]})
        for i in range(n):
            with T.block("shift"):
                vi = T.axis.spatial(n, i)
                out[vi] = x[vi] + T.cast(t, "float32")

    @T.prim_func
    def shift_marked(x: T.Buffer(("n",), "float32"), out: T.Buffer(("n",), "float32"), t: T.int64):
        n = T.int64()
        for i in range(n):
            with T.block("shift"):
                vi = T.axis.spatial(n, i)
                out[vi] = x[vi] - T.float32(100)

    @R.function
    def main(x: R.Tensor(("n",), "float32"), s: R.Shape(["t"])) -> R.Tensor(("n",), "float32"):
        n = T.int64()
        t = T.int64()
        y = R.call_tir(S.shift, (x,), out_sinfo=R.Tensor((n,), "float32"), tir_vars=R.shape([t]))
        return y
'''


@pytest.mark.parametrize("target", ["reference"] + VM_TARGETS)
def test_a_condition_over_a_scalar_parameter_and_a_dim(target):
    mod = rx.from_source(SCALAR_SOURCE)
    run = (lambda *a: rx.interpret(mod, "main", *a)) if target == "reference" else \
        rx.VirtualMachine(rx.build(mod, target=target))["main"]
    for n, t in [(3, 0), (3, 1), (2, 0), (5, 0), (5, 4)]:
        x = np.ones(n, "float32")
        want = x - 100 if (t == 0 and n > 2) else x + t
        np.testing.assert_allclose(run(x, (t,)), want, err_msg=f"n = {n}, t = {t}")


@pytest.mark.parametrize("rows, kernel", [(1, "add_one"), (16, "add_eight"), (9, "add_small"), (65, "add_default")])
def test_a_condition_known_at_build_time_picks_the_kernel_without_a_test(rows, kernel):
    from relaxscript.vm import instructions as I
    text = SOURCE.replace('def main(x: R.Tensor(("n", 4), "float32")) -> R.Tensor(("n", 4), "float32"):\n        n = T.int64()',
                          f'def main(x: R.Tensor(({rows}, 4), "float32")) -> R.Tensor(({rows}, 4), "float32"):')
    text = text.replace("R.Tensor((n, 4)", f"R.Tensor(({rows}, 4)")
    exe = rx.build(rx.from_source(text), target="c")
    (call,) = [ins for ins in exe.functions["main"].code if isinstance(ins, I.CallKernel) and "add" in ins.kernel]
    assert call.kernel == kernel and call.variants == ()
    x = np.ones((rows, 4), "float32")
    np.testing.assert_allclose(rx.VirtualMachine(exe)["main"](x), (x + chosen_constant(rows)) * 2)


def test_the_cuda_target_builds_every_variant():
    """NVRTC compiles without a GPU: the image holds a launch plan, in PTX, for every version."""
    from tests.backends.gpu_launch import require_nvrtc
    require_nvrtc()
    exe = rx.build(rx.from_source(SOURCE), target="cuda -arch=sm_90")
    ptx = exe.kernels.ptx.decode()
    assert {"add_default", "add_one", "add_eight", "add_small"} <= set(exe.kernels.plans)
    for plan in exe.kernels.plans.values():
        for launch in plan.launches:
            assert f".entry {launch.symbol}(" in ptx
