"""The paper's short form and read/write region inference."""
import tensorir as tir
from tensorir import BlockRealize, collect
from tensorir.script import format_node


def blocks(func):
    return {r.block.name: r for r in collect(func, lambda n: isinstance(n, BlockRealize))}


def regions(block_realize):
    b = block_realize.block
    return [format_node(r) for r in b.reads], [format_node(r) for r in b.writes]


def test_spatial_and_reduce_axes_are_inferred():
    func = tir.from_source('''
@T.prim_func
def f(X: T.Buffer((4, 5), "float32"), Y: T.Buffer((4,), "float32")):
    for i, k in T.grid(4, 5):
        with T.block():
            Y[i] += X[i, k]
''')
    realize = blocks(func)["Y"]
    assert [iv.kind for iv in realize.block.iter_vars] == ["S", "R"]
    assert [iv.var.name for iv in realize.block.iter_vars] == ["vi", "vk"]
    assert regions(realize) == (["Y[vi]", "X[vi, vk]"], ["Y[vi]"])


def test_unused_loop_vars_are_not_axes_and_names_are_unique():
    func = tir.from_source('''
@T.prim_func
def f(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for t, i in T.grid(3, 4):
        with T.block("B"):
            vi = T.axis.spatial(4, i)
            B[vi] = A[vi]
        with T.block():
            B[i] = B[i] * 2.0
        with T.block():
            A[i] = B[i]
''')
    names = sorted(blocks(func))
    assert names == ["A", "B", "B_1", "root"]
    assert len(blocks(func)["B_1"].block.iter_vars) == 1


def test_inferred_regions_are_sound_covers():
    func = tir.from_source('''
@T.prim_func
def f(A: T.Buffer((16, 8), "float32"), I: T.Buffer((4,), "int32"), B: T.Buffer((4, 8), "float32")):
    for i in range(4):
        with T.block("b"):
            vi = T.axis.spatial(4, i)
            for j in range(8):
                B[vi, j] = A[vi * 4, j] + A[vi * 4 + 2, j] + A[I[vi], 0]
''')
    realize = blocks(func)["b"]
    reads, writes = regions(realize)
    # A: dim 0 accessed at vi*4, vi*4+2 and a data-dependent row -> whole dim; dim 1 -> whole loop.
    assert reads == ["A[0:16, 0:8]", "I[vi]"]
    assert writes == ["B[vi, 0:8]"]


def test_constant_offset_windows_are_merged():
    func = tir.from_source('''
@T.prim_func
def f(A: T.Buffer((10,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("b"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi] + A[vi + 2] + A[vi + 1]
''')
    assert regions(blocks(func)["b"]) == (["A[vi:vi + 3]"], ["B[vi]"])


def test_local_allocations_are_not_regions_and_views_map_to_sources():
    func = tir.from_source('''
@T.prim_func
def f(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for o in range(2):
        with T.block("b"):
            vo = T.axis.spatial(2, o)
            tmp = T.alloc_buffer((4,), "float32")
            S = T.match_buffer(A[vo * 4:vo * 4 + 4], (4,), "float32")
            for k in range(4):
                tmp[k] = S[k]
            for k in range(4):
                B[vo * 4 + k] = tmp[k]
''')
    assert regions(blocks(func)["b"]) == (["A[vo * 4:vo * 4 + 4]"], ["B[vo * 4:vo * 4 + 4]"])


def test_short_form_with_where_keeps_loop_vars_in_predicate():
    func = tir.from_source('''
@T.prim_func
def f(A: T.Buffer(("n",), "float32")):
    n = T.int64()
    for o, i in T.grid((n + 3) // 4, 4):
        with T.block():
            T.where(o * 4 + i < n)
            A[o * 4 + i] = 1.0
''')
    realize = blocks(func)["A"]
    loop_vars = {id(f.loop_var) for f in collect(func, lambda x: isinstance(x, tir.For))}
    pred_vars = {id(v) for v in collect(realize.predicate, lambda x: isinstance(x, tir.Var))}
    assert pred_vars - {id(func.params[0].shape[0])} <= loop_vars
    assert [iv.kind for iv in realize.block.iter_vars] == ["S", "S"]


def test_a_power_of_two_int_literals_is_python_s_int():
    """s14: ``T.grid(2**40, 2)`` was refused ("expected an integer expression, got dtype float32"):
    ``**`` of two int literals became a float ``T.pow``. TVMScript evaluates it in Python."""
    func = tir.from_source('''
@T.prim_func
def grid(a: T.Buffer((1,), "float32")):
    for i, j in T.grid(2**3, 2):
        a[0] = a[0] + T.float32(i) ** 2
''')
    text = func.script()
    assert "T.grid(8, 2)" in text or "range(8)" in text, text
    assert 'T.pow(T.Cast("float32", i), 2.0)' in text, text   # a float power stays T.pow
