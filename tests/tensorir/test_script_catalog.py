"""Every catalog function parses, prints, re-parses to an equal function, and printing is a fixpoint."""
import numpy as np
import pytest

import tensorir as tir
from tensorir.interpreter import interpret
from tests.tensorir.catalog import CATALOG, SHORT_FORM, SHORT_FORM_EXPLICIT, make_arrays

WITH_REFERENCE = sorted(name for name, entry in CATALOG.items() if entry.reference is not None)


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_round_trip_and_fixpoint(name):
    func = CATALOG[name].func
    text = func.script()
    again = tir.from_source(text)
    tir.assert_structural_equal(func, again)
    assert again.script() == text


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_printed_form_is_explicit(name):
    text = CATALOG[name].func.script()
    assert text.startswith("# from tensorir import T\n")
    assert "with T.block():" not in text and "+=" not in text


def test_short_form_equals_explicit_form():
    short = tir.from_source(SHORT_FORM)
    explicit = tir.from_source(SHORT_FORM_EXPLICIT)
    tir.assert_structural_equal(short, explicit)
    assert short.script() == explicit.script()


def test_blocks_get_root_and_lowered_code_does_not():
    assert CATALOG["matmul"].func.root_block is not None
    assert CATALOG["softmax"].func.root_block.alloc_buffers[0].name == "row_max"
    lowered = CATALOG["lowered"].func
    assert lowered.root_block is None
    assert isinstance(lowered.body, tir.SeqStmt)


def test_explicit_root_block_is_the_root():
    func = CATALOG["explicit_root"].func
    assert func.root_block is not None
    assert not isinstance(func.root_block.body, tir.BlockRealize)


def test_symbolic_facts_reach_signature_vars():
    func = CATALOG["matmul_dynamic"].func
    a, b, _ = func.params
    n, k = a.shape
    assert (n.lower, n.upper, n.multiple_of) == (0, 4096, None)
    assert (k.lower, k.multiple_of) == (0, 8)
    assert b.shape[0] is k
    sig = CATALOG["signature_forms"].func
    k32 = sig.params[3]
    assert k32.dtype == "int32" and k32.upper == 64 and sig.params[4].shape[0] is k32
    assert sig.params[0].elem_offset.lower is None
    assert sig.params[0].strides[0] is sig.params[0].shape[1]


def test_loop_kinds_and_annotations():
    func = CATALOG["loop_kinds"].func
    loops = tir.collect(func, lambda n: isinstance(n, tir.For))
    kinds = [(f.kind, f.thread_tag) for f in loops]
    assert ("thread_binding", "blockIdx.x") in kinds and ("thread_binding", "threadIdx.x") in kinds
    assert {k for k, _ in kinds} == {"thread_binding", "parallel", "vectorized", "unrolled", "serial"}
    parallel = next(f for f in loops if f.kind == "parallel")
    assert parallel.annotations == {"pragma": "auto"}
    assert func.attrs["tags"] == [1, 2.5, "x"] and func.attrs["tir.noalias"] is True


def test_axis_domains_with_min():
    func = CATALOG["axis_ranges"].func
    realize = tir.collect(func, lambda n: isinstance(n, tir.BlockRealize) and n.block.name == "w")[0]
    (iv,) = realize.block.iter_vars
    assert (iv.dom.min.value, iv.dom.extent.value) == (2, 6)
    loop = tir.collect(func, lambda n: isinstance(n, tir.For))[0]
    assert (loop.min.value, loop.extent.value) == (2, 6)
    (read,) = realize.block.reads
    assert read.region[0].extent.value == 3


@pytest.mark.parametrize("name", WITH_REFERENCE)
def test_parsed_meaning_matches_reference(name):
    """The parser's reading of each script agrees with its NumPy meaning (via the interpreter)."""
    entry = CATALOG[name]
    func = entry.func
    arrays = make_arrays(func, entry.sizes, np.random.default_rng(0))
    expected = [a.copy() for a in arrays]
    entry.reference(*expected, **entry.scalars)
    interpret(func, *arrays, **entry.scalars)
    for got, want in zip(arrays, expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
