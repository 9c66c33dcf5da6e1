"""Views of another buffer's storage (``Buffer.data``): the IR field, the
interpreter's storage resolution, and the script form
``v = T.Buffer(shape, dtype, data=x.data)``."""
from __future__ import annotations

import numpy as np
import pytest

import tensorir as tir
from tensorir import Allocate, Buffer, BufferStore, PrimFunc, Var, interpret, seq, size_var
from tensorir.errors import ParseError
from tensorir.stmt import For

both_paths = pytest.mark.parametrize("vectorize", [True, False], ids=["vector", "scalar"])


def loop(var, extent, body):
    return For(var, 0, extent, "serial", body)


# ---------------------------------------------------------------- the field
def test_view_of_a_view_records_the_root_storage():
    x = Buffer("x", [4, 4])
    row = Buffer("row", [4], elem_offset=4, data=x)
    half = Buffer("half", [2], elem_offset=6, data=row)
    assert half.data is x and row.data is x
    assert half.storage is x and x.storage is x and x.data is None


def test_data_must_be_a_buffer():
    with pytest.raises(TypeError, match="must be a Buffer"):
        Buffer("v", [4], data=Var("x"))


def test_structural_equality_compares_the_storage_of_views():
    def func(second_view: bool):
        x, y, out = Buffer("x", [4]), Buffer("y", [4]), Buffer("out", [2])
        view = Buffer("v", [2], elem_offset=2, data=y if second_view else x)
        i = Var("i")
        return PrimFunc([x, y, out], loop(i, 2, BufferStore(out, view[i], [i])))
    tir.assert_structural_equal(func(False), func(False))
    assert not tir.structural_equal(func(False), func(True))
    assert tir.structural_hash(func(False)) != tir.structural_hash(func(True))


def test_substitute_of_the_storage_reaches_the_views():
    x, x2 = Buffer("x", [4]), Buffer("x2", [4])
    view = Buffer("v", [2], data=x)
    assert tir.substitute(view, {x: x2}).data is x2


# ---------------------------------------------------------------- interpreter
@both_paths
def test_two_dimensional_view_of_an_allocation(vectorize):
    # t (8 floats) is written through a 2x4 view and read back flat.
    n = size_var("n")
    out = Buffer("out", [n])
    t = Buffer("t", [8])
    grid = Buffer("grid", [2, 4], data=t)
    i, j, k = Var("i"), Var("j"), Var("k")
    body = Allocate(t, seq(
        loop(i, 2, loop(j, 4, BufferStore(grid, tir.Cast("float32", i * 10 + j), [i, j]))),
        loop(k, n, BufferStore(out, t[k % 8], [k]))))
    result = np.zeros(11, np.float32)
    interpret(PrimFunc([out], body), result, vectorize=vectorize)
    np.testing.assert_array_equal(result, [0, 1, 2, 3, 10, 11, 12, 13, 0, 1, 2])


@both_paths
def test_view_of_a_reentered_allocation_sees_the_fresh_storage(vectorize):
    # Allocations are zeroed on each entry; a cached view must not keep the old storage.
    out = Buffer("out", [3])
    t = Buffer("t", [1])
    alias = Buffer("alias", [1], data=t)
    r = Var("r")
    body = loop(r, 3, Allocate(t, seq(BufferStore(alias, alias[0] + 1.0, [0]),
                                      BufferStore(out, t[0], [r]))))
    result = np.full(3, 7.0, np.float32)
    interpret(PrimFunc([out], body), result, vectorize=vectorize)
    np.testing.assert_array_equal(result, [1, 1, 1])


def test_view_whose_storage_is_not_in_scope_is_a_clear_error():
    x, out = Buffer("x", [4]), Buffer("out", [4])
    view = Buffer("v", [4], data=Buffer("elsewhere", [4]))
    i = Var("i")
    f = PrimFunc([x, out], loop(i, 4, BufferStore(out, view[i], [i])))
    with pytest.raises(ValueError, match="view of 'elsewhere'"):
        interpret(f, np.zeros(4, np.float32), np.zeros(4, np.float32))


def test_undefined_buffer_with_a_parameters_name_is_not_its_storage():
    x, out = Buffer("x", [4]), Buffer("out", [4])
    impostor = Buffer("x", [4])  # same name, no data=: storage is never looked up by name
    i = Var("i")
    f = PrimFunc([x, out], loop(i, 4, BufferStore(out, impostor[i], [i])))
    with pytest.raises(ValueError, match="never defined"):
        interpret(f, np.zeros(4, np.float32), np.zeros(4, np.float32))


def test_view_may_not_change_the_element_type():
    x, out = Buffer("x", [4]), Buffer("out", [4], "int32")
    view = Buffer("v", [4], "int32", data=x)
    i = Var("i")
    f = PrimFunc([x, out], loop(i, 4, BufferStore(out, view[i], [i])))
    with pytest.raises(ValueError, match="element type"):
        interpret(f, np.zeros(4, np.float32), np.zeros(4, np.int32))


def test_view_past_the_end_of_its_storage_is_out_of_bounds():
    x, out = Buffer("x", [4]), Buffer("out", [2])
    view = Buffer("v", [2], elem_offset=3, data=x)
    i = Var("i")
    f = PrimFunc([x, out], loop(i, 2, BufferStore(out, view[i], [i])))
    with pytest.raises(tir.interpreter.OutOfBoundsError):
        interpret(f, np.zeros(4, np.float32), np.zeros(2, np.float32))


# ---------------------------------------------------------------- script form
VIEWS_OF_ALLOCATIONS = '''
@T.prim_func
def views(x: T.Buffer(("n", 4), "float32"), y: T.Buffer(("n",), "float32")):
    n = T.int64()
    x_rows = T.Buffer((n * 4,), "float32", data=x.data)
    with T.decl_buffer((8,), "float32") as t:
        t_grid = T.Buffer((2, 4), "float32", data=t.data)
        for i in range(4):
            t_grid[1, i] = x_rows[i]
        T.evaluate(0)
    s = T.decl_buffer((2,), "float32")
    s_tail = T.Buffer((1,), "float32", elem_offset=1, data=s.data)
    s_tail[0] = 2.0
    for i in range(n):
        y[i] = x[i, 0] * s[1]
'''


def test_views_of_parameters_and_allocations_round_trip():
    f = tir.from_source(VIEWS_OF_ALLOCATIONS)
    stores = tir.collect(f.body, lambda n: isinstance(n, BufferStore))
    allocs = [a.buffer for a in tir.collect(f.body, lambda n: isinstance(n, Allocate))]
    assert stores[0].buffer.data is allocs[0] and stores[1].buffer.data is allocs[1]
    assert tir.collect(stores[0].value, lambda n: isinstance(n, tir.BufferLoad))[0].buffer.data \
        is f.params[0]
    text = f.script()
    back = tir.from_source(text)
    tir.assert_structural_equal(back, f)
    assert back.script() == text
    assert "t_grid = T.Buffer((2, 4), \"float32\", data=t.data)" in text
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = np.zeros(3, np.float32)
    interpret(f, x, y)
    np.testing.assert_array_equal(y, x[:, 0] * 2)


def test_view_of_a_block_alloc_buffer_round_trips():
    f = tir.from_source('''
@T.prim_func
def blocky(x: T.Buffer((4,), "float32"), y: T.Buffer((4,), "float32")):
    t = T.alloc_buffer((2, 2), "float32")
    t_flat = T.Buffer((4,), "float32", data=t.data)
    for i in range(4):
        with T.block("copy"):
            vi = T.axis.spatial(4, i)
            T.reads(x[vi])
            T.writes(t[vi // 2, vi % 2])
            t_flat[vi] = x[vi]
    for i in range(4):
        with T.block("out"):
            vi = T.axis.spatial(4, i)
            T.reads(t[vi // 2, vi % 2])
            T.writes(y[vi])
            y[vi] = t[vi // 2, vi % 2] + 1.0
''')
    assert f.root_block.alloc_buffers[0] is tir.collect(
        f.body, lambda n: isinstance(n, BufferStore))[0].buffer.data
    tir.assert_structural_equal(tir.from_source(f.script()), f)
    y = np.zeros(4, np.float32)
    interpret(f, np.arange(4, dtype=np.float32), y)
    np.testing.assert_array_equal(y, np.arange(4) + 1)


def _parse_body(line: str):
    return tir.from_source(f'''
@T.prim_func
def f(x: T.Buffer((4,), "float32"), y: T.Buffer((4,), "float32")):
    n = T.int64()
    {line}
    y[0] = 1.0
''')


@pytest.mark.parametrize("line, message", [
    ('v = T.Buffer((4,), "float32")', "needs data=|data=x.data"),
    ('v = T.Buffer((4,), "float32", data=x)', "written x.data"),
    ('v = T.Buffer((4,), "float32", data=z.data)', "undefined buffer 'z'"),
    ('v = T.Buffer((4,), "float32", data=n.data)', "'n' is not a buffer"),
])
def test_view_declaration_errors(line, message):
    with pytest.raises(ParseError, match=message):
        _parse_body(line)


def test_parameters_cannot_be_views():
    with pytest.raises(ParseError, match="unknown argument 'data'"):
        tir.from_source('''
@T.prim_func
def f(x: T.Buffer((4,), "float32"), y: T.Buffer((4,), "float32", data=x.data)):
    y[0] = 1.0
''')


def test_lowering_re_points_views_at_the_flattened_allocation():
    f = tir.from_source(VIEWS_OF_ALLOCATIONS)
    lowered = tir.lower(f)
    allocs = {id(a.buffer) for a in tir.collect(lowered.body, lambda n: isinstance(n, Allocate))}
    views = [b for b in tir.collect(lowered.body, lambda n: isinstance(n, Buffer)) if b.data is not None]
    assert {id(v.data) for v in views} <= allocs | {id(p) for p in lowered.buffer_params}
    assert len({id(v.data) for v in views} & allocs) == 2  # both allocations are still viewed
    text = lowered.script()
    tir.assert_structural_equal(tir.from_source(text), lowered)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    want, got = np.zeros(3, np.float32), np.zeros(3, np.float32)
    interpret(f, x, want)
    interpret(lowered, x, got)
    np.testing.assert_array_equal(got, want)
