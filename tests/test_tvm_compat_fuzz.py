"""Mutated TVMScript-style sources of issue 15 (packed calls, scalars, memory-level forms,
bound attributes, the schedule tests' prim_funcs) parse or raise ParseError (or a
deduction error naming the line), and whatever parses round-trips."""
from __future__ import annotations

import pytest
from hypothesis import given

from tests.relaxscript import test_tvm_memory_forms as memory_forms
from tests.relaxscript import test_tvm_packed_calls as packed
from tests.relaxscript import test_tvm_scalars as scalars
from tests.tensorir import test_schedule_tvm_compat as schedules
from tests.test_script_fuzz import _check_both_levels, _fuzz, mutated_texts

SCHEDULE_FUNCS = [schedules.add_one, schedules.squares, schedules.opaque_copy, schedules.lower_triangle,
                  schedules.shifted, schedules.transposed, schedules.reshaped, schedules.first_row,
                  schedules.matmul_bias]
SEEDS = [scalars.TENSOR_PLUS_PRIM, scalars.PRIM_ARITHMETIC, scalars.KNOWN_VALUES, scalars.DTYPE_AND_STR,
         scalars.SHAPE_ARITHMETIC, packed.PACKED, packed.C_CALL, memory_forms.AFTER_MEMORY_PASSES,
         memory_forms.BOUNDED.replace("ATTRS", '{"tir_var_upper_bound": {"n": 16}, '
                                               '"tir_var_lower_bound": {"n": 2}}')] \
    + [func.script() for func in SCHEDULE_FUNCS]


def test_seeds_are_valid_scripts():
    for seed in SEEDS:
        _check_both_levels(seed)


@_fuzz(30)
@given(text=mutated_texts(SEEDS))
def test_mutated_tvm_style_sources_parse_or_raise_parse_error(text):
    _check_both_levels(text)


@pytest.mark.fuzz
@_fuzz(1500)
@given(text=mutated_texts(SEEDS))
def test_mutated_tvm_style_sources_parse_or_raise_parse_error_many(text):
    _check_both_levels(text)
