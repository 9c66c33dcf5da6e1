"""What a build keeps callable: every entry function of the module, as TVM's build keeps every public
function (vm/build.py's mark_entry_functions), not only what ``main`` reaches."""
from __future__ import annotations

import numpy as np
import pytest

import relaxscript as rx
from relaxscript.vm.build import mark_entry_functions

SOURCE = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n",), "float32")):
        y = Module.double(x)
        return y

    @R.function
    def double(x: R.Tensor(("n",), "float32")):
        y = R.add(x, x)
        return y

    @R.function
    def square(x: R.Tensor(("n",), "float32")):
        y = R.multiply(x, x)
        return y
'''


@pytest.mark.parametrize("target", ["interp", "c"])
def test_a_second_entry_beside_main_stays_callable(target):
    vm = rx.VirtualMachine(rx.build(rx.from_source(SOURCE), target=target))
    for n in (1, 5):
        x = np.arange(n, dtype=np.float32) - 2
        np.testing.assert_array_equal(vm["main"](x), x + x)
        np.testing.assert_array_equal(vm["square"](x), x * x)


def test_entries_are_the_functions_nothing_refers_to():
    mod = rx.from_source(SOURCE)
    marked = mark_entry_functions(mod)
    assert {n for n, f in marked.relax_functions.items() if "global_symbol" in f.attrs} == {"main", "square"}
    assert "global_symbol" not in mod["square"].attrs      # the user's module is left as it was
    # the helper main calls is not an entry: inlined into main, it leaves the executable
    vm = rx.VirtualMachine(rx.build(mod, target="interp"))
    with pytest.raises(KeyError, match="double"):
        vm["double"]


def test_a_module_that_names_its_public_functions_keeps_its_choice():
    mod = rx.from_source(SOURCE.replace('''    def square(x: R.Tensor(("n",), "float32")):''', '''    def square(x: R.Tensor(("n",), "float32")):
        R.func_attr({"global_symbol": "square"})'''))
    assert mark_entry_functions(mod) is mod
    vm = rx.VirtualMachine(rx.build(mod, target="interp"))
    x = np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(vm["square"](x), x * x)
    with pytest.raises(KeyError, match="main"):
        vm["main"]


PRIVATE_BEFORE = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n",), "float32")):
        y = Module.double(x)
        return y

    @R.function(private=True)
    def double(x: R.Tensor(("n",), "float32")):
        y = R.add(x, x)
        return y

    @R.function(private=True)
    def unused(x: R.Tensor(("n",), "float32")):
        y = R.subtract(x, x)
        return y

    @R.function
    def square(x: R.Tensor(("n",), "float32")):
        y = Module.double(x)
        z = R.multiply(y, x)
        return z
'''

PRIVATE_EXPECTED = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n",), "float32")):
        R.func_attr({"global_symbol": "main"})
        y = Module.double(x)
        return y

    @R.function(private=True)
    def double(x: R.Tensor(("n",), "float32")):
        y = R.add(x, x)
        return y

    @R.function
    def square(x: R.Tensor(("n",), "float32")):
        R.func_attr({"global_symbol": "square"})
        y = Module.double(x)
        z = R.multiply(y, x)
        return z
'''


def test_a_private_function_is_no_entry_but_stays_callable_by_others():
    """s13: ``@R.function(private=True)`` was read and ignored, so the unreferenced private
    ``unused`` became an entry (TVM's build drops it). Now private functions are never entries;
    ``double``, private but called by main and square, stays for them."""
    from relaxscript.transform import DeadCodeElimination
    before = rx.from_source(PRIVATE_BEFORE)
    assert before["unused"].is_private and not before["square"].is_private
    after = DeadCodeElimination()(mark_entry_functions(before))
    rx.assert_structural_equal(after, rx.from_source(PRIVATE_EXPECTED))
    assert "private=True" in before.script() and rx.from_source(before.script())["unused"].is_private


@pytest.mark.parametrize("target", ["interp", "c"])
def test_a_build_keeps_no_private_entry(target):
    vm = rx.VirtualMachine(rx.build(rx.from_source(PRIVATE_BEFORE), target=target))
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(vm["main"](x), x + x)
    np.testing.assert_array_equal(vm["square"](x), (x + x) * x)
    for name in ("unused", "double"):
        with pytest.raises(KeyError, match=name):
            vm[name]


def test_a_private_main_is_no_entry_either():
    source = PRIVATE_BEFORE.replace('''    @R.function
    def main(''', '''    @R.function(private=True)
    def main(''')
    vm = rx.VirtualMachine(rx.build(rx.from_source(source), target="interp"))
    with pytest.raises(KeyError, match="main"):
        vm["main"]
    x = np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(vm["square"](x), (x + x) * x)


PRIVATE_MATMULS = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 4), "float32"), w1: R.Tensor((4, 3), "float32"), w2: R.Tensor((4, 3), "float32")):
        y = Module.pair(x, w1, w2)
        return y

    @R.function(private=True)
    def pair(x: R.Tensor((2, 4), "float32"), w1: R.Tensor((4, 3), "float32"),
             w2: R.Tensor((4, 3), "float32")):
        with R.dataflow():
            a = R.matmul(x, w1)
            b = R.matmul(x, w2)
            c = R.add(a, b)
            R.output(c)
        return c

    @R.function(private=True)
    def unused(x: R.Tensor(("n",), "float32")):
        def local(y: R.Tensor(("n",), "float32")):
            z = R.add(y, y)
            return z
        y = R.subtract(x, x)
        return y
'''


def _user_passes():
    from relaxscript import transform as T
    weights = {"w1": np.ones((4, 3), np.float32), "w2": np.full((4, 3), 2, np.float32)}
    # MergeParallelMatmul rebuilds ``pair`` into a copy taking the joined weight once main passes constants
    merge = T.Sequential([T.BindParams("main", weights), T.MergeParallelMatmul()], name="BindMerge")
    return [T.LegalizeOps(), T.DispatchLibrary(), merge, T.LambdaLift(), T.BindParams("pair", weights),
            T.CanonicalizeBindings(), T.FoldConstant(), T.InlineFunctions(), T.Sequential(rx.get_pipeline("c"))]


@pytest.mark.parametrize("pass_", _user_passes(), ids=lambda p: p.name)
def test_a_users_pass_keeps_a_function_private(pass_):
    """s14: passes that rebuilt a function (the shared mutator's visit_Function, BindParams,
    MergeParallelMatmul) dropped ``is_private``, so after a user's own LegalizeOps the unreferenced
    private ``unused`` became a build's entry again. Each pass keeps the flag of every function it
    keeps; the lifted local function is private too (TVM's LambdaLift)."""
    before = rx.from_source(PRIVATE_MATMULS)
    after = pass_(before)
    for name, func in after.relax_functions.items():
        assert func.is_private == (before[name].is_private if name in before else True), name


def test_a_build_after_a_users_legalize_keeps_no_private_entry():
    from relaxscript.transform import LegalizeOps
    vm = rx.VirtualMachine(rx.build(LegalizeOps()(rx.from_source(PRIVATE_BEFORE)), target="interp"))
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(vm["square"](x), (x + x) * x)
    with pytest.raises(KeyError, match="unused"):
        vm["unused"]
