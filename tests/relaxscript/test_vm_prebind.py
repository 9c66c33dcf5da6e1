"""vm/prebind.py: static storages and views are made once per frame and never run per call."""
from __future__ import annotations

import numpy as np
import pytest

import relaxscript as rx
from relaxscript.vm import instructions as I
from relaxscript.vm.prebind import next_pcs, prebind_static_allocations
from tests.relaxscript.vm_modules import chain_module

F32 = "float32"


def _function(code, params=("x",), num_regs=6):
    return I.VMFunction("main", params, num_regs, 1, code, {})


def _prebind(func):
    template, ptrs = [None] * func.num_regs, [None] * func.num_regs
    return prebind_static_allocations(func, template, ptrs), template, ptrs


def _view(dst, storage, shape, offset=0):
    return I.AllocTensor(dst=dst, shape_code=("tuple", *[("int", d) for d in shape]), dtype=F32,
                         storage=storage, offset_code=("int", offset), static=True)


def test_static_storage_and_its_views_are_bound_in_the_template():
    func = _function([I.AllocStorage(dst=1, size_code=("int", 128), static_size=128),
                      _view(2, 1, (4, 4)), _view(3, 1, (2, 8), offset=64), I.Ret(src=3, copy_escaping=True)])
    skipped, template, ptrs = _prebind(func)
    assert skipped == {0, 1, 2}
    assert template[2].shape == (4, 4) and template[3].shape == (2, 8) and template[2].dtype == F32
    assert np.shares_memory(template[2], template[1]) and ptrs[3] == ptrs[1] + 64 == ptrs[2] + 64


def test_register_written_twice_is_left_to_its_instructions():
    func = _function([I.AllocStorage(dst=1, size_code=("int", 64), static_size=64), _view(2, 1, (4, 4)),
                      I.Move(dst=2, src=0), I.Ret(src=2)])
    skipped, template, _ = _prebind(func)
    assert skipped == {0} and template[2] is None


def test_view_past_its_storage_runs_and_reports_its_own_error():
    func = _function([I.AllocStorage(dst=1, size_code=("int", 64), static_size=64), _view(2, 1, (8, 8)),
                      I.Ret(src=2)])
    skipped, template, _ = _prebind(func)
    assert skipped == {0} and template[2] is None


def test_backward_jump_disables_prebinding():
    func = _function([I.AllocStorage(dst=1, size_code=("int", 64), static_size=64), I.Goto(target=0),
                      I.Ret(src=1)])
    assert _prebind(func)[0] == frozenset()


def test_next_pcs_skips_runs_of_prebound_instructions():
    assert next_pcs(6, frozenset({0, 1, 3})) == [2, 2, 2, 4, 4, 5, 6]


@pytest.fixture(scope="module")
def chain_vm():
    skip = {"FuseOps", "FuseTIR"}   # every op its own kernel, so there are many static views
    pipeline = [p for p in rx.get_pipeline("c") if type(p).__name__ not in skip]
    return rx.VirtualMachine(rx.build(chain_module(8, 4), target="c", pipeline=pipeline))


def test_a_call_never_runs_a_prebound_instruction(chain_vm):
    run = chain_vm["main"]
    x = np.full(4, 0.5, F32)
    first = run(x)
    runtime = chain_vm.function("main")
    frame = runtime.pool[-1]
    assert frame.fixed_ptr_regs, "the chain's planned storages should be prebound"
    skipped = {pc for pc, ins in enumerate(runtime.func.code)
               if isinstance(ins, (I.AllocStorage, I.AllocTensor)) and ins.dst in frame.fixed_ptr_regs}
    visited = []
    original = list(frame.steps)

    def recorder(pc):
        def step():
            visited.append(pc)
            return original[pc]()
        return step
    frame.steps[:] = [recorder(pc) for pc in range(len(original))]
    try:
        second = run(np.full(4, 2.0, F32))
    finally:
        frame.steps[:] = original
    assert not skipped & set(visited[1:])   # pc 0 is where every call starts
    want = np.full(4, 0.5, F32)
    for i in range(8):
        want = want + want if i % 2 else want * want
    np.testing.assert_allclose(first, want, rtol=1e-6)   # not overwritten by the second call
    assert not np.allclose(second, first)


def test_prebind_switch_off_runs_every_allocation_with_the_same_results(chain_vm):
    plain = rx.VirtualMachine(chain_vm.exe, prebind=False)
    x = np.full(4, 0.75, F32)
    got = plain["main"](x)
    frame = plain.function("main").pool[-1]
    assert not frame.fixed_ptr_regs   # nothing bound ahead: every allocation runs per call
    np.testing.assert_array_equal(got, chain_vm["main"](x))
    np.testing.assert_array_equal(plain["main"](x), got)   # a second call on the pooled frame


def test_prebind_switch_must_be_a_bool(chain_vm):
    with pytest.raises(TypeError, match="prebind must be True or False"):
        rx.VirtualMachine(chain_vm.exe, prebind="no")
