"""backends.c.work.nest_iterations: the work estimate behind each parallel loop's `if` clause."""
from __future__ import annotations

import pytest

from backends.c.work import PARALLEL_MIN_ITERATIONS, nest_iterations
from tensorir import expr as E
from tensorir import stmt as S
from tensorir.arith import simplify
from tensorir.buffer import decl_buffer
from tensorir.functor import collect, substitute


def _at(estimate, n_var, n: int) -> int:
    value = simplify(substitute(estimate, {n_var: E.IntImm(n)}))
    assert isinstance(value, E.IntImm), value
    return value.value


def _tiled_nest(n):
    """for i (parallel, 8 * ceil(n/64)): for k in 64: if (i % ceil(n/64)) * 64 + k < n: out[...] = 0."""
    i, k = E.Var("i"), E.Var("k")
    tiles = E.floordiv(n + 63, 64)
    out = decl_buffer("out", [8 * n])
    store = S.BufferStore(out, E.FloatImm(0.0, "float32"), [E.floordiv(i, tiles) * n + E.floormod(i, tiles) * 64 + k])
    guarded = S.IfThenElse(E.LT(E.floormod(i, tiles) * 64 + k, n), store)
    return S.For(i, 0, 8 * tiles, "parallel", S.For(k, 0, 64, "serial", guarded))


def test_guarded_tile_counts_the_trips_that_run():
    n = E.size_var("n")
    estimate = nest_iterations(_tiled_nest(n))
    # a tile of 64 guarded by k < n runs once at n = 1: the nest must not fork
    assert _at(estimate, n, 1) == 8
    assert _at(estimate, n, 1) < PARALLEL_MIN_ITERATIONS
    assert _at(estimate, n, 64) == 8 * 64
    assert _at(estimate, n, 4096) == 8 * 64 * 64 >= PARALLEL_MIN_ITERATIONS


def test_unguarded_nest_counts_every_iteration():
    i, j = E.Var("i"), E.Var("j")
    n = E.size_var("n")
    out = decl_buffer("out", [n, 32])
    loop = S.For(i, 0, n, "parallel", S.For(j, 0, 32, "serial",
                                           S.BufferStore(out, E.FloatImm(1.0, "float32"), [i, j])))
    assert _at(nest_iterations(loop), n, 10) == 320


@pytest.mark.parametrize("n", [0, 1])
def test_guard_bound_never_divides_by_a_symbolic_value(n):
    # at n = 0 ceil(n/64) is 0: the estimate is evaluated before the loop, so it must stay safe
    n_var = E.size_var("n")
    estimate = nest_iterations(_tiled_nest(n_var))
    assert not collect(estimate, lambda d: isinstance(d, (E.Div, E.FloorDiv, E.FloorMod))
                       and not isinstance(d.b, E.IntImm))
    assert _at(estimate, n_var, n) == 8 * n



def test_triangular_guard_keeps_the_full_extent():
    # k < i + 1 runs once at i = 0 but n times at the last i: the first iteration is no estimate
    i, k = E.Var("i"), E.Var("k")
    n = E.size_var("n")
    out = decl_buffer("out", [n, n])
    store = S.BufferStore(out, E.FloatImm(0.0, "float32"), [i, k])
    loop = S.For(i, 0, n, "parallel", S.For(k, 0, n, "serial", S.IfThenElse(E.LT(k, i + 1), store)))
    assert _at(nest_iterations(loop), n, 200) == 200 * 200
    # k + i < n is largest at i = 0: capping there never undercounts the rows
    shrinking = S.For(i, 0, n, "parallel", S.For(k, 0, 64, "serial", S.IfThenElse(E.LT(k + i, n), store)))
    assert _at(nest_iterations(shrinking), n, 8) == 8 * 8
