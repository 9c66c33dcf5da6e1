"""Schedule a matmul whose row count ``n`` is only known at run time.

Each step prints the loop program and checks it against NumPy with the
reference interpreter for a few values of ``n``, including values the split
factor does not divide (the split adds a ``T.where`` predicate for those).

    python examples/schedule_matmul.py
"""
import numpy as np

import tensorir as tir
from tensorir import T, prim_func


@prim_func
def matmul(a: T.Buffer(("n", 64), "float32"), b: T.Buffer((64, 32), "float32"),
           c: T.Buffer(("n", 32), "float32")):
    n = T.int64()
    for i, j, k in T.grid(n, 32, 64):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                c[vi, vj] = T.float32(0)
            c[vi, vj] = c[vi, vj] + a[vi, vk] * b[vk, vj]


def check(func, sizes=(1, 7, 16, 45)):
    rng = np.random.default_rng(0)
    for n in sizes:
        a = rng.standard_normal((n, 64)).astype("float32")
        b = rng.standard_normal((64, 32)).astype("float32")
        c = np.zeros((n, 32), "float32")
        tir.interpret(func, a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def step(title, sch):
    print(f"# ---- {title}")
    print(sch.func.script())
    check(sch.func)
    print("# ok for n in (1, 7, 16, 45)\n")


def main():
    sch = tir.Schedule(matmul)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)

    i_outer, i_inner = sch.split(i, [None, 8])      # 8 does not divide n: adds T.where
    step("split i by 8", sch)
    j_outer, j_inner = sch.split(j, [None, 8])
    sch.reorder(i_outer, j_outer, k, i_inner, j_inner)
    step("tile j and move k outside the 8x8 tile", sch)
    local = sch.cache_write(block, 0, "local")      # accumulate in a local buffer
    step("cache_write into a local accumulator", sch)
    sch.reverse_compute_at(local, j_outer)           # write each tile back right after it
    step("reverse_compute_at the write-back under the tile loop", sch)
    sch.decompose_reduction(block, k)                # zero the tile before the k loop
    step("decompose_reduction at k", sch)
    sch.parallel(i_outer)
    sch.vectorize(j_inner)
    step("parallel outer rows, vectorized inner columns", sch)

    print("# ---- trace (replayable Python)")
    print(sch.trace)
    lowered = tir.lower(sch.func)
    check(lowered)
    print("\n# ---- lowered (flat buffers, loop kinds kept)")
    print(lowered.script())


if __name__ == "__main__":
    main()
