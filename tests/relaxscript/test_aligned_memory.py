"""The VM's storages and results start on a cache line (vm/aligned_memory.py): NumPy aligns
to 16 bytes, and a 64-byte vector on such a block straddles two lines."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relaxscript as rx
from backends.aligned_memory import ALIGNMENT, SMALL_BYTES, aligned_bytes, aligned_empty


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


@settings(max_examples=40, deadline=None)
@given(size=st.integers(1, 3 * SMALL_BYTES))   # an empty slice has no address of its own
def test_aligned_bytes_are_writable_blocks_of_the_size_asked(size):
    block = aligned_bytes(size)
    assert block.shape == (size,) and block.dtype == np.uint8 and block.flags.writeable
    assert _address(block) % ALIGNMENT == 0
    block[:] = 7                                   # the whole block is ours to write
    assert (block == 7).all()


@settings(max_examples=40, deadline=None)
@given(shape=st.lists(st.integers(0, 70), min_size=0, max_size=3),
       dtype=st.sampled_from(["float32", "float64", "int8", "int64", "float16", "bool"]))
def test_aligned_empty_matches_np_empty_in_all_but_the_address(shape, dtype):
    a = aligned_empty(tuple(shape), dtype)
    assert a.shape == tuple(shape) and a.dtype == np.dtype(dtype) and a.flags.c_contiguous
    if a.nbytes >= SMALL_BYTES:
        assert _address(a) % ALIGNMENT == 0


def test_aligned_empty_keeps_numpys_errors_and_object_arrays():
    with pytest.raises(ValueError):
        aligned_empty((3, -2), "float32")
    objects = aligned_empty((2048,), object)
    assert objects.dtype == object and objects[0] is None


SOURCE = '''
@R.function
def main(x: R.Tensor(("n", 300), "float32"), w: R.Tensor((300, 256), "float32")) -> R.Tensor(("n", 256), "float32"):
    with R.dataflow():
        h = R.nn.relu(R.matmul(R.exp(x), w))
        y = R.add(R.nn.softmax(h), h)
        R.output(y)
    return y
'''


@pytest.mark.parametrize("target", ["c", "interp"])
def test_results_of_a_build_are_aligned_and_right(target):
    run = rx.VirtualMachine(rx.build(rx.from_source(SOURCE), target=target))["main"]
    rng = np.random.default_rng(0)
    w = rng.standard_normal((300, 256), dtype=np.float32) * 0.05
    for n in (1, 7, 33):
        x = rng.standard_normal((n, 300), dtype=np.float32)
        got = run(x, w)
        h = np.maximum(np.exp(x) @ w, 0)
        e = np.exp(h - h.max(-1, keepdims=True))
        np.testing.assert_allclose(got, e / e.sum(-1, keepdims=True) + h, rtol=2e-4, atol=2e-4)
        if got.nbytes >= SMALL_BYTES and target == "c":
            assert _address(got) % ALIGNMENT == 0
