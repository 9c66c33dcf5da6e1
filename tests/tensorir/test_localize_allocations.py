"""localize_allocations: a root scratch buffer that each iteration of one loop uses apart moves
into the loop at the size of one iteration's window (Before/Expected, the cases it must leave
alone, interpreter equality), and the C pipeline keeps such buffers in the kernel."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import relaxscript as rx
import tensorir as tir
from tensorir import T, prim_func
from tensorir.transform.localize_allocations import localize_allocations, loop_local_buffers
from tests.tensorir.test_schedule_util import assert_same_results


@prim_func
def row_stats_before(x: T.Buffer(("n", 8), "float32"), y: T.Buffer(("n", 8), "float32")):
    n = T.int64()
    x_flat = T.Buffer((n * 8,), "float32", data=x.data)
    y_flat = T.Buffer((n * 8,), "float32", data=y.data)
    s = T.decl_buffer((n,), "float32")
    for i in T.parallel(n):
        s[i] = T.float32(1.0)
        for k in range(8):
            s[i] = s[i] + x_flat[i * 8 + k] * x_flat[i * 8 + k]
        for j in range(8):
            y_flat[i * 8 + j] = x_flat[i * 8 + j] / s[i]


@prim_func
def row_stats_expected(x: T.Buffer(("n", 8), "float32"), y: T.Buffer(("n", 8), "float32")):
    n = T.int64()
    x_flat = T.Buffer((n * 8,), "float32", data=x.data)
    y_flat = T.Buffer((n * 8,), "float32", data=y.data)
    for i in T.parallel(n):
        s = T.decl_buffer((1,), "float32")
        s[0] = T.float32(1.0)
        for k in range(8):
            s[0] = s[0] + x_flat[i * 8 + k] * x_flat[i * 8 + k]
        for j in range(8):
            y_flat[i * 8 + j] = x_flat[i * 8 + j] / s[0]


def test_row_statistics_move_into_the_row_loop():
    out = localize_allocations(row_stats_before)
    tir.assert_structural_equal(out, row_stats_expected)
    assert loop_local_buffers(row_stats_before) == {"s"}
    assert_same_results(row_stats_before, [out], [{"n": 1}, {"n": 5}])


@prim_func
def pair_window_before(x: T.Buffer(("n", 4), "float32"), y: T.Buffer(("n",), "float32")):
    n = T.int64()
    x_flat = T.Buffer((n * 4,), "float32", data=x.data)
    t = T.decl_buffer((n * 2,), "float32")
    for i in range(n):
        t[i * 2] = x_flat[i * 4] + x_flat[i * 4 + 1]
        t[i * 2 + 1] = x_flat[i * 4 + 2] + x_flat[i * 4 + 3]
        y[i] = t[i * 2] * t[i * 2 + 1]


@prim_func
def pair_window_expected(x: T.Buffer(("n", 4), "float32"), y: T.Buffer(("n",), "float32")):
    n = T.int64()
    x_flat = T.Buffer((n * 4,), "float32", data=x.data)
    for i in range(n):
        t = T.decl_buffer((2,), "float32")
        t[0] = x_flat[i * 4] + x_flat[i * 4 + 1]
        t[1] = x_flat[i * 4 + 2] + x_flat[i * 4 + 3]
        y[i] = t[0] * t[1]


def test_a_window_of_two_elements_per_iteration():
    out = localize_allocations(pair_window_before)
    tir.assert_structural_equal(out, pair_window_expected)
    assert_same_results(pair_window_before, [out], [{"n": 1}, {"n": 6}])


@prim_func
def nested_before(x: T.Buffer((3, "n", 4), "float32"), y: T.Buffer((3, "n"), "float32")):
    n = T.int64()
    x_flat = T.Buffer((n * 12,), "float32", data=x.data)
    y_flat = T.Buffer((n * 3,), "float32", data=y.data)
    m = T.decl_buffer((n * 3,), "float32")
    for b in range(3):
        for i in T.parallel(n):
            m[b * n + i] = T.float32(-1e30)
            for k in range(4):
                m[b * n + i] = T.max(m[b * n + i], x_flat[(b * n + i) * 4 + k])
            y_flat[b * n + i] = m[b * n + i] * T.float32(2)


def test_a_two_loop_nest_whose_windows_are_disjoint_moves_into_the_inner_loop():
    out = localize_allocations(nested_before)
    (alloc,) = tir.collect(out.body, lambda node: isinstance(node, tir.Allocate))
    assert [int(d.value) for d in alloc.buffer.shape] == [1]
    inner = [f for f in tir.collect(out.body, lambda node: isinstance(node, tir.For)) if f.loop_var.name == "i"]
    assert inner[0].body is alloc
    assert_same_results(nested_before, [out], [{"n": 1}, {"n": 4}])


# ------------------------------------------------------------ what must stay where it is

@prim_func
def stencil(x: T.Buffer(("n",), "float32"), y: T.Buffer(("n",), "float32")):
    n = T.int64()
    t = T.decl_buffer((n + 1,), "float32")
    t[0] = T.float32(0)
    for i in range(n):
        t[i + 1] = t[i] + x[i]          # reads what the previous iteration wrote
        y[i] = t[i + 1]


@prim_func
def two_loops(x: T.Buffer(("n",), "float32"), y: T.Buffer(("n",), "float32")):
    n = T.int64()
    t = T.decl_buffer((n,), "float32")
    for i in range(n):
        t[i] = x[i] * T.float32(2)
    for i in range(n):
        y[i] = t[n - 1 - i]             # another loop reads it: no loop holds every use


@prim_func
def same_cell_every_iteration(x: T.Buffer(("n",), "float32"), y: T.Buffer(("n",), "float32")):
    n = T.int64()
    acc = T.decl_buffer((1,), "float32")
    for _o in range(2):
        for i in range(n):
            acc[0] = T.if_then_else(i == 0, T.float32(0), acc[0]) + x[i]
            y[i] = y[i] + acc[0]        # a running sum carried across iterations of i


@prim_func
def squared_index(x: T.Buffer(("n",), "float32"), y: T.Buffer(("n",), "float32")):
    n = T.int64()
    t = T.decl_buffer((n * n,), "float32")
    for i in range(n):
        t[i * i] = x[i]
        y[i] = t[i * i]


@prim_func
def large_window(x: T.Buffer(("n", 2048), "float32"), y: T.Buffer(("n", 2048), "float32")):
    n = T.int64()
    x_flat = T.Buffer((n * 2048,), "float32", data=x.data)
    y_flat = T.Buffer((n * 2048,), "float32", data=y.data)
    t = T.decl_buffer((n * 2048,), "float32")
    for i in range(n):
        for j in range(2048):
            t[i * 2048 + j] = x_flat[i * 2048 + j] + T.float32(1)
        for j in range(2048):
            y_flat[i * 2048 + j] = t[i * 2048 + 2047 - j]


@pytest.mark.parametrize("func", [stencil, two_loops, same_cell_every_iteration, squared_index, large_window],
                         ids=lambda f: f.name)
def test_buffers_shared_between_iterations_or_too_large_stay_at_the_root(func):
    assert localize_allocations(func) is func
    assert loop_local_buffers(func) == set()


def test_a_buffer_whose_address_is_taken_stays_at_the_root():
    text = row_stats_before.script().replace(
        "for j in range(8):", "T.evaluate(T.call_extern(\"int32\", \"touch\", T.address_of(s[i])))\n        for j in range(8):", 1)
    func = tir.from_source(text)
    assert localize_allocations(func) is func


# ------------------------------------------------------------ the C pipeline keeps row scratch inside

ROW_OPS = {
    "layer_norm": "R.nn.layer_norm({x}, g, b, axes=-1, epsilon=1e-05)",
    "rms_norm": "R.nn.rms_norm({x}, g, axes=-1, epsilon=1e-05)",
    "softmax": "R.nn.softmax({x}, axis=-1)",
    "log_softmax": "R.nn.log_softmax({x}, axis=-1)",
    "center": "R.subtract({x}, R.mean({x}, axis=-1, keepdims=True))",
    "max_shift": "R.subtract({x}, R.max({x}, axis=-1, keepdims=True))",
    "scale": "R.multiply({x}, R.const(0.5, \"float32\"))",
}


def _row_module(ops: list[str], width: int, batch: bool) -> str:
    lines, x = [], "x"
    for k, op in enumerate(ops):
        lines.append(f"        v{k} = {ROW_OPS[op].format(x=x)}")
        x = f"v{k}"
    shape = '(2, "n", %d)' % width if batch else '("n", %d)' % width
    return (f'@R.function\ndef main(x: R.Tensor({shape}, "float32"), g: R.Tensor(({width},), "float32"), '
            f'b: R.Tensor(({width},), "float32")):\n    with R.dataflow():\n' + "\n".join(lines)
            + f"\n        R.output({x})\n    return {x}\n")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(st.sampled_from(sorted(ROW_OPS)), min_size=1, max_size=4),
       width=st.sampled_from([1, 3, 8, 33, 64]), batch=st.booleans(), seed=st.integers(0, 2**16))
def test_row_programs_on_c_match_the_interpreter_with_no_graph_level_scratch(ops, width, batch, seed):
    mod = rx.from_source(_row_module(ops, width, batch))
    exe = rx.build(mod, target="c")
    run = rx.VirtualMachine(exe)["main"]
    rng = np.random.default_rng(seed)
    g = rng.uniform(0.5, 1.5, width).astype("float32")
    b = rng.uniform(-1, 1, width).astype("float32")
    for n in (1, 2, 7):
        x = rng.standard_normal((2, n, width) if batch else (n, width)).astype("float32")
        expected = rx.interpret(mod, None, x, g, b)
        np.testing.assert_allclose(run(x, g, b), expected, rtol=2e-4, atol=2e-5, err_msg=f"n={n}")
    # every row statistic stayed in its kernel: the VM allocates only results, no workspaces
    assert "_ws_" not in exe.as_text()
