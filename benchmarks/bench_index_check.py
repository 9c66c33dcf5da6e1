"""Cost of checking data-dependent indices (``T.checked_index``) in gather kernels.

Side by side in one process on the C target: an embedding lookup ``R.take(table, ids,
axis=0)`` from a float32 (49152, 576) table (SmolLM2's vocabulary and width), and the
quantized one the LLM runs (``R.dequantize`` of the Q8_0 columns ``R.take`` picks), each
built twice: as legalized now (every index checked; an index out of range raises) and as
legalized before the check existed (negative indices wrapped, nothing checked: an index
out of range read outside the table). Median ms per VM call for n ids.

    python benchmarks/bench_index_check.py [--tokens 1,16,256]
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import relaxscript as rx  # noqa: E402
import tensorir.expr as E  # noqa: E402
from relaxscript.script.parser import from_source  # noqa: E402

from benchmarks.timing import format_table, median_ms  # noqa: E402

VOCAB, WIDTH, BLOCKS = 49152, 576, 18

SOURCE = f'''
@R.function
def dense(table: R.Tensor(({VOCAB}, {WIDTH}), "float32"), ids: R.Tensor(("n",), "int64")):
    return R.take(table, ids, axis=0)

@R.function
def quantized(codes: R.Tensor(({WIDTH}, {VOCAB}), "int8"), scale: R.Tensor(({BLOCKS}, {VOCAB}), "float32"),
              ids: R.Tensor(("n",), "int64")):
    return R.dequantize(R.take(codes, ids, axis=1), R.take(scale, ids, axis=1), format="q8_0")
'''


@contextlib.contextmanager
def unchecked_indices():
    """The legalization as it was: NumPy's negative indices wrapped, no range check."""
    checked = E.checked_index

    def wrapped(index, extent):
        index, extent = E.cast("int64", index), E.cast("int64", extent)
        return E.Select(E.LT(index, 0), index + extent, index)
    E.checked_index = wrapped
    try:
        yield
    finally:
        E.checked_index = checked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", default="1,16,256")
    args = parser.parse_args()
    mod = from_source(SOURCE)
    checked_vm = rx.VirtualMachine(rx.build(mod, target="c"))
    with unchecked_indices():
        unchecked_vm = rx.VirtualMachine(rx.build(mod, target="c"))
    rng = np.random.default_rng(0)
    table = rng.standard_normal((VOCAB, WIDTH)).astype("float32")
    codes = rng.integers(-127, 128, (WIDTH, VOCAB)).astype("int8")
    scale = rng.random((BLOCKS, VOCAB)).astype("float32")
    rows = []
    for n in (int(t) for t in args.tokens.split(",")):
        ids = rng.integers(-VOCAB, VOCAB, n).astype("int64")
        for name, operands in (("take f32", (table, ids)), ("take q8_0 + dequantize", (codes, scale, ids))):
            func = "dense" if name.startswith("take f32") else "quantized"
            fast, safe = unchecked_vm[func], checked_vm[func]
            np.testing.assert_array_equal(fast(*operands), safe(*operands))
            unchecked_ms = median_ms(lambda: fast(*operands), budget_s=0.5)
            checked_ms = median_ms(lambda: safe(*operands), budget_s=0.5)
            rows.append([name, str(n), f"{unchecked_ms:.4f}", f"{checked_ms:.4f}",
                         f"{checked_ms / unchecked_ms:.2f}x"])
    print(format_table(["kernel", "n", "unchecked ms", "checked ms", "checked/unchecked"], rows))


if __name__ == "__main__":
    main()
