"""VM code generation folds field accesses of tuples built in the same function:
the access is the field's own register (no GetItem), a tuple nothing else reads
is not built (no MakeTuple), jumps stay right, and instruments still see the
accessed names."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relaxscript as rx
from relaxscript.vm import instructions as I
from relaxscript.vm.instrument import CheckAgainstInterpreter
from tests.relaxscript import vm_modules as M
from tests.relaxscript.test_vm_run import assert_same
from tests.targets import VM_TARGETS

TARGETS = VM_TARGETS

TUPLES = M.HEADER + '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 4), "float32"), y: R.Tensor(("n", 4), "float32"), flag: R.Prim("bool")):
        n = T.int64()
        pair = (R.add(x, y), R.multiply(x, y))
        kept = (pair[1], x)
        if flag:
            inner = (R.exp(pair[0]), y)
            r = R.subtract(inner[0], kept[1])
        else:
            r = R.negative(pair[1])
        return (r, kept)
'''

PARAM_TUPLE = M.HEADER + '''
@R.ir_module
class Module:
    @R.function
    def main(t: R.Tuple(R.Tensor(("n",), "float32"), R.Tensor(("n",), "float32"))):
        n = T.int64()
        a = t[0]
        b = t[1]
        c = R.add(a, b)
        return c
'''


def _kinds(exe, func="main"):
    return [type(ins) for ins in exe.functions[func].code]


@pytest.mark.parametrize("target", TARGETS)
@settings(max_examples=6, deadline=None)
@given(n=st.integers(0, 6), flag=st.booleans(), seed=st.integers(0, 2**16))
def test_folded_tuples_match_the_interpreter_on_both_branches(target, n, flag, seed):
    mod = M.parse(TUPLES)
    vm = rx.VirtualMachine(rx.build(mod, target=target))
    rng = np.random.default_rng(seed)
    x, y = (rng.standard_normal((n, 4)).astype("float32") for _ in range(2))
    assert_same(vm["main"](x, y, flag), rx.interpret(mod, "main", x, y, flag))


def test_only_tuples_that_are_read_whole_are_built():
    exe = rx.build(M.parse(TUPLES), target="c")
    kinds = _kinds(exe)
    assert I.GetItem not in kinds
    # `pair` and `inner` are only indexed: not built; `kept` is returned, and so is the result
    assert kinds.count(I.MakeTuple) == 2
    code = exe.functions["main"].code
    branch = next(ins for ins in code if isinstance(ins, I.If))
    jump = next(ins for ins in code if isinstance(ins, I.Goto))
    assert code[branch.else_pc - 1] is jump   # the else branch starts right after the then branch's jump
    assert isinstance(code[jump.target - 1], I.Move) and code[jump.target - 1].name == "r"


def _lifting_every_workspace():
    """The C pipeline with LiftWorkspace lifting row statistics too (the C default keeps them in
    their kernels, tensorir.transform.localize_allocations): kernels with workspace tuples."""
    return [rx.transform.LiftWorkspace() if p.name == "LiftWorkspace" else p for p in rx.get_pipeline("c")]


def test_workspace_tuples_of_lifted_kernels_are_not_built():
    exe = rx.build(M.parse(M.NORMS), target="c", pipeline=_lifting_every_workspace())
    assert "_ws_out1" in exe.as_text()   # the kernels' row statistics were lifted to workspaces
    kinds = _kinds(exe)
    assert I.GetItem not in kinds and kinds.count(I.MakeTuple) == 1   # the returned (out, s)


def test_tuple_parameters_still_use_get_item():
    mod = M.parse(PARAM_TUPLE)
    exe = rx.build(mod, target="c")
    assert _kinds(exe).count(I.GetItem) == 2
    a, b = np.arange(3, dtype="float32"), np.ones(3, "float32")
    np.testing.assert_array_equal(rx.VirtualMachine(exe)["main"]((a, b)), a + b)


@pytest.mark.parametrize("target", TARGETS)
def test_instruments_see_the_names_of_folded_accesses(target):
    mod = M.parse(M.NORMS)
    vm = rx.VirtualMachine(rx.build(mod, target=target))
    seen = []
    vm.set_instrument(lambda func, index, name, value: seen.append(name))
    args = M.inputs_for("NORMS", np.random.default_rng(0), 3, 5)
    try:
        vm["main"](*args)
    finally:
        vm.set_instrument(None)
    assert {"s", "out"} <= set(seen)
    check = CheckAgainstInterpreter(mod)
    check.run(vm, "main", *args)
    assert check.compared >= 2


def test_saved_executables_keep_the_aliases(tmp_path):
    exe = rx.build(M.parse(M.NORMS), target="c", pipeline=_lifting_every_workspace())
    exe.save(tmp_path / "norms.rsx")
    loaded = rx.Executable.load(tmp_path / "norms.rsx")
    assert loaded.functions["main"].reg_aliases == exe.functions["main"].reg_aliases == {3: ("s",), 10: ("out",)}
