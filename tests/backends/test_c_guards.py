"""Guards of a loop body that the C emitter turns into loop bounds and outer ``if``s (guards.py).

Each kernel must compute what the interpreter computes, for sizes and scalar
values on both sides of every guard, including loops with no iteration.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tensorir as tir
from backends.target import build_kernels

OR_GUARD = '''
@T.prim_func
def or_guard(a: T.Buffer(("n",), "float32"), b: T.Buffer(("n",), "float32"), m: T.int64):
    n = T.int64()
    for i in range(n):
        if i < 4 or m < 2:
            b[i] = a[i] + 1.0
'''

# The division sits behind a condition that is false for m = 0: it must not run first.
SHORT_CIRCUIT = '''
@T.prim_func
def short_circuit(a: T.Buffer(("n",), "float32"), b: T.Buffer(("n",), "float32"), m: T.int64):
    n = T.int64()
    for i in range(n):
        if (i > 100 or m != 0) and i < 10 // m:
            b[i] = a[i] + 1.0
'''

# With n = 0 the interpreter never evaluates the guard; hoisted before the loop it divides by 0.
ZERO_TRIPS = '''
@T.prim_func
def zero_trips(a: T.Buffer(("n",), "float32"), b: T.Buffer(("n",), "float32"), m: T.int64):
    n = T.int64()
    for i in range(n):
        if 10 // m > 1 and i < 6:
            b[i] = a[i] + 1.0
'''


def _run_both(source: str, n: int, m: int):
    func = tir.from_source(source)
    kernel = build_kernels("c", func)[func.name]
    a = np.arange(n, dtype="float32")
    expected, got = np.zeros(n, "float32"), np.zeros(n, "float32")
    tir.interpret(func, a, expected, m=m)
    kernel(a, got, m=m)
    return expected, got


@pytest.mark.parametrize("m", [1, 5])
def test_a_disjunctive_guard_is_not_split_like_a_conjunction(m):
    # `i < 4 or m < 2` once became the loop bound 4 under `if (m < 2)`.
    expected, got = _run_both(OR_GUARD, 8, m)
    np.testing.assert_array_equal(got, expected)
    want = np.where((np.arange(8) < 4) | (m < 2), np.arange(8) + 1, 0)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("source,n,m", [(SHORT_CIRCUIT, 4, 0), (SHORT_CIRCUIT, 4, 3),
                                        (ZERO_TRIPS, 0, 0), (ZERO_TRIPS, 8, 2)])
def test_a_guard_that_may_divide_by_zero_keeps_its_place(source, n, m, tmp_path):
    # Run in a child process: the bug was a SIGFPE, which would end this one.
    script = textwrap.dedent(f"""
        import numpy as np
        from tests.backends.test_c_guards import _run_both
        expected, got = _run_both({source!r}, {n}, {m})
        np.testing.assert_array_equal(got, expected)
    """)
    env = dict(os.environ, RELAXSCRIPT_CACHE_DIR=str(tmp_path))
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(root, "src"), root, env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
