"""Property: random primitive sequences on random prim_funcs preserve results.

Each step draws a primitive and plausible arguments from the current
function. A primitive either succeeds, or raises ScheduleError and leaves
the function structurally unchanged (and the trace untouched). At the end
the scheduled and the lowered function match the original on several sizes
(including sizes the split factors do not divide), the scheduled and the
lowered function round-trip through print/parse and the trace replays.
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tensorir as tir
from tensorir.schedule.state import StmtIndex
from tests.tensorir.generators import prim_funcs
from tests.tensorir.test_schedule_util import (assert_replays, assert_roundtrip,
                                               assert_same_results)

ACTIONS = ("split", "fuse", "reorder", "parallel", "vectorize", "unroll", "decompose_reduction",
           "compute_inline", "reverse_compute_inline", "compute_at", "reverse_compute_at",
           "cache_read", "cache_write", "rfactor", "blockize", "annotate")


def _blocks(sch):
    index = StmtIndex(sch.func)
    return [r.block.name for r in index.all_realizes() if r.block.name != "root"]


def _draw_call(sch, draw):
    """A random primitive with plausible arguments: (method name, args) or None."""
    blocks = _blocks(sch)
    action = draw(st.sampled_from(ACTIONS))
    block = sch.get_block(draw(st.sampled_from(blocks)))
    loops = sch.get_loops(block)
    if action in ("compute_inline", "reverse_compute_inline"):
        return action, [block]
    if action in ("cache_read", "cache_write"):
        target = StmtIndex(sch.func).realize(sch._block_name(block)).block
        count = len(target.reads if action == "cache_read" else target.writes)
        return (action, [block, draw(st.integers(0, count - 1)), "local"]) if count else None
    if action in ("compute_at", "reverse_compute_at"):
        # Mostly a loop of a consumer (producer), sometimes of any block.
        neighbours = sch.get_consumers if action == "compute_at" else sch.get_producers
        candidates = [b for b in blocks if neighbours(sch.get_block(b))]
        if candidates:
            block = sch.get_block(draw(st.sampled_from(candidates)))
        near = neighbours(block)
        others = near if near and draw(st.integers(0, 3)) else \
            [sch.get_block(draw(st.sampled_from(blocks)))]
        other_loops = sch.get_loops(draw(st.sampled_from(others)))
        return (action, [block, draw(st.sampled_from(other_loops))]) if other_loops else None
    if not loops:
        return None
    loop = draw(st.sampled_from(loops))
    if action == "split":
        factor = draw(st.integers(2, 4))
        return action, [loop, draw(st.sampled_from([[None, factor], [factor, None], [None, 2, factor]]))]
    if action == "fuse" and len(loops) >= 2:
        k = draw(st.integers(0, len(loops) - 2))
        return action, [loops[k], loops[k + 1]]
    if action == "reorder" and len(loops) >= 2:
        return action, draw(st.permutations(loops))[:draw(st.integers(2, len(loops)))]
    if action == "annotate":
        return action, [loop, "pragma_note", draw(st.integers(0, 3))]
    if action == "decompose_reduction":
        return action, [block, loop]
    if action == "rfactor":
        return action, [loop, 0]
    if action in ("parallel", "vectorize", "unroll", "blockize"):
        return action, [loop]
    return None


def _apply_random(sch, draw):
    """Apply one random primitive; on ScheduleError the function and trace must be unchanged."""
    call = _draw_call(sch, draw)
    if call is None:
        return
    before, trace_len = sch.func, len(sch.trace)
    try:
        getattr(sch, call[0])(*call[1])
    except tir.ScheduleError:
        tir.assert_structural_equal(sch.func, before)
        assert sch.func is before and len(sch.trace) == trace_len


SIZE_SETS = [1, 5, 7]


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gen=prim_funcs(), data=st.data())
def test_random_schedules_preserve_results(gen, data):
    _check_random_schedule(gen, data, steps=data.draw(st.integers(1, 4)))


@pytest.mark.slow
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gen=prim_funcs(), data=st.data())
def test_random_schedules_preserve_results_many(gen, data):
    _check_random_schedule(gen, data, steps=data.draw(st.integers(1, 8)))


def _check_random_schedule(gen, data, steps):
    sch = tir.Schedule(gen.func)
    for _ in range(steps):
        _apply_random(sch, data.draw)
    sizes = [{v.name: s for v in gen.sym_vars} for s in SIZE_SETS]
    sizes.append({v.name: data.draw(st.integers(1, 9), label=v.name) for v in gen.sym_vars})
    lowered = tir.lower(sch.func)
    assert_same_results(gen.func, [sch.func, lowered], sizes, num_inputs=gen.num_inputs)
    assert_roundtrip(sch.func)
    assert_roundtrip(lowered)  # the lowered form is script too (views declared with data=)
    assert_replays(sch, gen.func)
