"""match_accumulation (backends/c/accumulate.py) on loops whose body holds more than the
accumulation: a vectorized loop may hold other statements, as long as exactly one of
its statements accumulates and no other one touches the accumulator."""
from __future__ import annotations

import numpy as np
import pytest

import tensorir as tir
from backends.target import build_kernels
from backends.c.accumulate import match_accumulation
from tensorir import expr as E
from tensorir import stmt as S
from tensorir.functor import collect

SIG = '''
@T.prim_func
def {name}(x: T.Buffer((16,), "float32"), y: T.Buffer((16,), "float32"), s: T.Buffer((2,), "float32"),
           t: T.Buffer((2,), "float32")):
'''

MATCHING = {
    "stage_then_sum": ('''
    for j in T.vectorized(16):
        y[j] = T.exp(x[j])
        s[0] = s[0] + y[j]
''', E.Add),
    "sum_then_stage": ('''
    for j in T.vectorized(16):
        s[0] = s[0] + x[j]
        y[j] = x[j] * 2.0
''', E.Add),
    "max_between_stages": ('''
    for j in T.vectorized(16):
        y[j] = x[j] * 2.0
        s[1] = T.max(s[1], y[j])
        t[j % 2] = x[0]
''', E.Max),
    "plain_serial": ('''
    for j in range(16):
        s[0] = s[0] * x[j]
''', E.Mul),
    "plain_vectorized": ('''
    for j in T.vectorized(16):
        s[0] = T.min(x[j], s[0])
''', E.Min),
}

NOT_MATCHING = {
    "two_accumulations": '''
    for j in T.vectorized(16):
        s[0] = s[0] + x[j]
        t[0] = t[0] + x[j] * x[j]
''',
    "other_statement_reads_the_accumulator": '''
    for j in T.vectorized(16):
        s[0] = s[0] + x[j]
        y[j] = x[j] / s[0]
''',
    "other_statement_reads_another_element_of_it": '''
    for j in T.vectorized(16):
        y[j] = x[j] * s[1]
        s[0] = s[0] + y[j]
''',
    "other_statement_writes_the_accumulator": '''
    for j in T.vectorized(16):
        s[0] = s[0] + x[j]
        s[1] = x[j]
''',
    "serial_loop_with_a_seq_body": '''
    for j in range(16):
        y[j] = T.exp(x[j])
        s[0] = s[0] + y[j]
''',
    "parallel_loop": '''
    for j in T.parallel(16):
        s[0] = s[0] + x[j]
''',
    "accumulator_index_moves": '''
    for j in T.vectorized(16):
        y[j] = x[j] * 2.0
        y[j] = y[j] + x[j]
''',
    "operand_reads_the_accumulator": '''
    for j in T.vectorized(16):
        y[j] = x[j] * 2.0
        s[0] = s[0] + s[0] * x[j]
''',
    "no_accumulation": '''
    for j in T.vectorized(16):
        y[j] = x[j] * 2.0
        t[0] = x[j]
''',
}


def _func(name: str, body: str):
    return tir.from_source(SIG.format(name=name) + body)


def _loop(func) -> S.For:
    (loop,) = collect(func.body, lambda n: isinstance(n, S.For))
    return loop


@pytest.mark.parametrize("name", sorted(MATCHING))
def test_the_one_accumulation_is_found(name):
    body, op = MATCHING[name]
    loop = _loop(_func(name, body))
    acc = match_accumulation(loop)
    assert acc is not None and acc.op is op
    stores = loop.body.seq if isinstance(loop.body, S.SeqStmt) else (loop.body,)
    (expected,) = [st for st in stores if st.buffer.name == "s"]
    assert acc.store is expected
    # the operand is the other side of the combiner, never the accumulator itself
    assert not collect(acc.operand, lambda n: isinstance(n, E.BufferLoad) and n.buffer.name == "s")
    assert collect(acc.operand, lambda n: isinstance(n, E.BufferLoad) and n.buffer.name in ("x", "y"))


@pytest.mark.parametrize("name", sorted(NOT_MATCHING))
def test_no_accumulation_is_claimed(name):
    assert match_accumulation(_loop(_func(name, NOT_MATCHING[name]))) is None


def test_accumulation_in_a_mixed_loop_is_an_omp_reduction_with_right_results():
    funcs = {name: _func(name, MATCHING[name][0]) for name in ("stage_then_sum", "sum_then_stage")}
    funcs["serial_seq"] = _func("serial_seq", NOT_MATCHING["serial_loop_with_a_seq_body"])
    module = build_kernels("c", funcs)
    source = module.source
    for name in ("stage_then_sum", "sum_then_stage"):
        text = source[source.index(f"int32_t rs_kernel_{name}("):]
        text = text[:text.index("\n}\n")]
        assert "#pragma omp simd reduction(+:rs_acc)" in text
        loop_body = text[text.index("for (int64_t j"):text.index("s[INT64_C(0)] = rs_acc;")]
        assert "rs_acc = rs_acc + " in loop_body and "s[" not in loop_body  # kept in the scalar
        assert "y[j] = " in loop_body  # the other statement stays in the loop
    serial = source[source.index("int32_t rs_kernel_serial_seq("):]
    assert "reduction(" not in serial[:serial.index("\n}\n")]
    rng = np.random.default_rng(0)
    x = rng.standard_normal(16).astype("float32")
    for name, func in funcs.items():
        args = [x.copy(), np.zeros(16, "float32"), np.array([0.5, 0.0], "float32"), np.zeros(2, "float32")]
        expected = [a.copy() for a in args]
        tir.interpret(func, *expected)
        module[name](*args)
        for want, got in zip(expected, args):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    got_s = np.array([0.5, 0.0], "float32")
    module["stage_then_sum"](x, np.zeros(16, "float32"), got_s, np.zeros(2, "float32"))
    np.testing.assert_allclose(got_s[0], 0.5 + np.exp(x.astype("float64")).sum(), rtol=1e-5)


MINMAX = '''
@T.prim_func
def row_{name}(x: T.Buffer(("n", "m"), "{dtype}"), out: T.Buffer(("n",), "{dtype}")):
    n = T.int64()
    m = T.int64()
    for i in range(n):
        out[i] = x[i, 0]
        for j in T.vectorized(m):
            out[i] = T.{name}(out[i], x[i, j])
'''


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_max_and_min_reductions_propagate_nan_at_every_lane_and_use_plain_compares(dtype):
    funcs = {f"row_{op}": tir.from_source(MINMAX.format(name=op, dtype=dtype)) for op in ("max", "min")}
    module = build_kernels("c", funcs)
    for op in ("max", "min"):
        text = module.source[module.source.index(f"int32_t rs_kernel_row_{op}("):]
        text = text[:text.index("\n}\n")]
        assert ("reduction(|:rs_nan" in text) == (dtype != "int32")   # a flag, not a NaN test per compare
        assert "|| rs_v != rs_v" not in text
    rng = np.random.default_rng(1)
    m = 37   # two 16-lane vectors and a remainder
    x = (rng.standard_normal((m + 3, m)) * 100).astype(dtype)
    if dtype != "int32":
        for row in range(m):   # a NaN in every position, one per row; the last 3 rows have none
            x[row, row] = np.nan
    for op, reference in (("max", np.max), ("min", np.min)):
        out = np.zeros(m + 3, dtype)
        module[f"row_{op}"](x, out)
        expected = reference(x, axis=1)   # NumPy propagates NaN
        interpreted = np.zeros(m + 3, dtype)
        tir.interpret(funcs[f"row_{op}"], x, interpreted)
        np.testing.assert_array_equal(out, expected)
        np.testing.assert_array_equal(interpreted, expected)
