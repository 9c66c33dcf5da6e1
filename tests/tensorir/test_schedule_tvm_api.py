"""Issue 15, item 8: the Schedule API TVM code calls (``get``, ``add_unit_loop``,
``split(disable_predication=)``, ``get_block(func_name=)``), checked on results
against the interpreter and by replaying traces."""
from __future__ import annotations

import numpy as np
import pytest

import tensorir as tir
from tensorir import For, ScheduleError, from_source
from tensorir.schedule import Schedule
from tensorir.stmt import Block

SCALE = '''
@T.prim_func
def scale(a: T.handle, b: T.handle):
    A = T.match_buffer(a, (16, 8), "float32")
    B = T.match_buffer(b, (16, 8), "float32")
    for i, j in T.grid(16, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
'''

EXPECTED_AFTER = '''
@T.prim_func
def scale(A: T.Buffer((16, 8), "float32"), B: T.Buffer((16, 8), "float32")):
    for u_1 in range(1):
        for i_0, i_1, j in T.grid(4, 4, 8):
            for u in range(1):
                with T.block("B"):
                    vi = T.axis.spatial(16, i_0 * 4 + i_1)
                    vj = T.axis.spatial(8, j)
                    B[vi, vj] = A[vi, vj] * T.float32(2)
'''


def _run(func):
    a = np.arange(128, dtype="float32").reshape(16, 8)
    b = np.zeros_like(a)
    tir.interpret(func, a, b)
    return b


def test_get_returns_the_nodes_the_handles_name():
    sch = Schedule(from_source(SCALE))
    block = sch.get_block("B")
    i, j = sch.get_loops(block)
    assert isinstance(sch.get(block), Block) and sch.get(block).name == "B"
    assert isinstance(sch.get(i), For) and sch.get(i).extent.value == 16
    assert sch.get(j).loop_var.name == "j"


def test_unit_loops_and_an_exact_split_without_predicate():
    sch = Schedule(from_source(SCALE))
    block = sch.get_block("B", func_name="scale")
    i, _j = sch.get_loops(block)
    outer, _inner = sch.split(i, [None, 4], disable_predication=True)
    unit = sch.add_unit_loop(block)
    unit_outer = sch.add_unit_loop(outer)
    assert sch.get(unit).extent.value == 1 and sch.get(unit_outer).extent.value == 1
    tir.assert_structural_equal(sch.func, from_source(EXPECTED_AFTER))
    np.testing.assert_array_equal(_run(sch.func), _run(from_source(SCALE)))
    replay = Schedule(from_source(SCALE))
    sch.trace.apply_to(replay)
    tir.assert_structural_equal(replay.func, sch.func)


def test_disable_predication_is_refused_where_the_loop_would_overrun():
    sch = Schedule(from_source(SCALE))
    _i, j = sch.get_loops(sch.get_block("B"))
    before = sch.func
    with pytest.raises(ScheduleError, match="divide the extent 8 exactly"):
        sch.split(j, [3, None], disable_predication=True)
    assert sch.func is before
    sch.split(j, [3, None])  # with the predicate it is fine
    np.testing.assert_array_equal(_run(sch.func), _run(before))


def test_add_unit_loop_refuses_the_root_block():
    func = from_source('''
@T.prim_func
def f(A: T.Buffer((4,), "float32")):
    with T.block("root"):
        for i in range(4):
            with T.block("A"):
                vi = T.axis.spatial(4, i)
                A[vi] = T.float32(1)
''')
    sch = Schedule(func)
    with pytest.raises(ScheduleError, match="root block"):
        sch.add_unit_loop(sch.get_block("root"))


def test_get_block_in_another_function():
    other = from_source(SCALE.replace("def scale", "def other").replace('"B"', '"C"'))
    sch = Schedule({"scale": from_source(SCALE), "other": other}, func_name="scale")
    block = sch.get_block("C", func_name="other")
    assert sch.func.name == "other" and sch.get(block).name == "C"
    with pytest.raises(ValueError, match="no PrimFunc named 'absent'"):
        sch.get_block("C", func_name="absent")
