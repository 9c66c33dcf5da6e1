"""The C emitter's fork condition: a parallel loop forks only when it has two trips or more to
share and enough work (one row of a 4096-wide kernel at n = 1 ran on the caller while the second thread
woke only to wait at the barrier: 12 us became 220 us on a busy machine)."""
from __future__ import annotations

import re

import pytest

import tensorir as tir
from backends.c.codegen import generate_c
from backends.c.work import PARALLEL_MIN_ITERATIONS

ROWS = '''
@T.prim_func
def rows(a: T.Buffer(("n", 16384), "float32"), b: T.Buffer(("n", 16384), "float32")):
    n = T.int64()
    for i in T.parallel(n):
        for j in range(16384):
            b[i, j] = a[i, j] * 2.0
'''


def fork_condition(source: str):
    """The parallel loop's ``if(...)`` clause as a Python function of n."""
    (clause,) = re.findall(r"#pragma omp parallel for schedule\(static\) if\((.*)\) num_threads", source)
    text = re.sub(r"INT64_C\((-?\d+)\)", r"\1", clause).replace("&&", " and ")
    # integer value arithmetic wraps through the unsigned type (s14-fuzz): the casts are no-ops here
    text = re.sub(r"\(u?int64_t\)", "", text)
    return lambda n: eval(text, {"n": n})   # noqa: S307 (our own emitted arithmetic)


@pytest.mark.parametrize("n, forks", [(0, False), (1, False), (2, True), (64, True)])
def test_one_row_never_forks(n, forks):
    source, _ = generate_c({"rows": tir.from_source(ROWS)})
    assert 16384 >= PARALLEL_MIN_ITERATIONS   # one row is work enough: only the trip count decides
    assert fork_condition(source)(n) is forks
