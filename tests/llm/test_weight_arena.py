"""The engine's parameters packed into one huge-page block (``relaxscript/llm/weight_arena.py``):
the same values, dtypes and shapes, each on a cache line, a tied array once; the engine's logits
bit-identical with and without the block (``RELAXSCRIPT_WEIGHT_ARENA=0``)."""
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relaxscript.llm import weight_arena
from relaxscript.llm.engine import Engine

DTYPES = (np.float32, np.float16, np.uint8, np.int8, np.int64)


def _root(a: np.ndarray) -> int:
    """The identity of the memory a view ends in (the block's mapping, or the array itself)."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return id(a.base) if a.base is not None else id(a)


@settings(max_examples=25, deadline=None)
@given(shapes=st.lists(st.lists(st.integers(0, 40), min_size=0, max_size=3), min_size=0, max_size=6),
       seed=st.integers(0, 2**16))
def test_pack_keeps_values_and_aligns_each_array(shapes, seed):
    rng = np.random.default_rng(seed)
    arrays = [(rng.standard_normal(shape) * 50).astype(DTYPES[i % len(DTYPES)]) for i, shape in enumerate(shapes)]
    if arrays:
        arrays.append(arrays[0])                    # listed twice (a tied embedding): one copy
        arrays.append(np.asfortranarray(rng.standard_normal((3, 5)).astype(np.float32)))   # any layout in
    packed = weight_arena.pack(arrays)
    assert len(packed) == len(arrays)
    for a, p in zip(arrays, packed):
        assert p.dtype == a.dtype and p.shape == a.shape and p.flags.c_contiguous and p.flags.writeable
        np.testing.assert_array_equal(p, a)
        assert p.ctypes.data % weight_arena.ALIGN == 0 or p.nbytes == 0
    if arrays:
        assert packed[-2] is packed[0]
        live = [p for p in packed if p.nbytes]
        assert len({_root(p) for p in live}) <= 1    # views of one block
        ends = sorted((p.ctypes.data, p.ctypes.data + p.nbytes) for p in {id(p): p for p in live}.values())
        assert all(e <= s for (_, e), (s, _) in zip(ends, ends[1:]))     # no overlap


def _thp_mode() -> str | None:
    try:
        text = open("/sys/kernel/mm/transparent_hugepage/enabled").read()
    except OSError:
        return None
    found = re.search(r"\[(\w+)\]", text)
    return found.group(1) if found else None


@pytest.mark.skipif(_thp_mode() not in ("always", "madvise"), reason="no transparent huge pages here")
def test_the_block_is_advised_for_huge_pages_and_starts_on_one():
    arrays = [np.ones(300_000, np.float32), np.ones(7, np.float16)]
    packed = weight_arena.pack(arrays)
    start = packed[0].ctypes.data
    assert start % weight_arena.HUGE_PAGE == 0
    flags = None
    with open("/proc/self/smaps") as smaps:
        inside = False
        for line in smaps:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(x, 16) for x in head.split("-"))
                inside = lo <= start < hi
            elif inside and line.startswith("VmFlags:"):
                flags = line.split()[1:]
                break
    assert flags is not None and "hg" in flags      # MADV_HUGEPAGE on the mapping
    np.testing.assert_array_equal(packed[0], arrays[0])


@pytest.mark.parametrize("prompt", ([1, 2, 3], list(range(3, 40, 3))))
def test_engine_logits_are_identical_with_and_without_the_block(tiny_gguf_q4, prompt, monkeypatch):
    engines = {}
    for setting in ("0", "1"):
        monkeypatch.setenv("RELAXSCRIPT_WEIGHT_ARENA", setting)
        engines[setting] = Engine.from_gguf(tiny_gguf_q4, target="c", weights="q4", max_context=48)
    split, packed = engines["0"], engines["1"]
    assert len({_root(w) for w in packed._weights}) == 1 and len({_root(w) for w in split._weights}) > 1
    for engine in (split, packed):
        engine.reset()
    np.testing.assert_array_equal(split.prefill(prompt), packed.prefill(prompt))
    for token in (4, 8, 15):
        np.testing.assert_array_equal(split.decode(token), packed.decode(token))


def test_without_private_mappings_the_block_is_plain_memory(monkeypatch):
    """Platforms without MAP_PRIVATE (Windows): one NumPy block, cache-line aligned, same values."""
    monkeypatch.delattr(weight_arena.mmap, "MAP_PRIVATE", raising=False)
    arrays = [np.arange(1000, dtype=np.float32), np.arange(3, dtype=np.int8), np.ones((4, 4), np.float16)]
    packed = weight_arena.pack(arrays)
    for a, p in zip(arrays, packed):
        np.testing.assert_array_equal(p, a)
        assert p.ctypes.data % weight_arena.ALIGN == 0
    assert len({_root(p) for p in packed}) == 1
