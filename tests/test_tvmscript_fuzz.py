"""Mutated TVMScript-style sources (issue 15): the corpus of ``T.handle`` prim_funcs
and ``I``-namespace modules, and their printed forms, mutated token by token,
either parse (and then round-trip) or raise ParseError, never anything else."""
from __future__ import annotations

import pytest
from hypothesis import given

import relaxscript as rx
import tensorir as tir
from tests.relaxscript.tvmscript_modules import MODULES
from tests.tensorir.tvmscript_corpus import CORPUS
from tests.test_script_fuzz import _check_both_levels, _fuzz, mutated_texts

TIR_SEEDS = [entry.source for entry in CORPUS]
MODULE_SEEDS = [source for _name, source, *_rest in MODULES]
SEEDS = TIR_SEEDS + MODULE_SEEDS + [tir.from_source(s).script() for s in TIR_SEEDS] \
    + [rx.from_source(s).script() for s in MODULE_SEEDS]


@_fuzz(40)
@given(text=mutated_texts(SEEDS))
def test_mutated_tvmscript_sources_parse_or_raise_parse_error(text):
    _check_both_levels(text)


@pytest.mark.fuzz
@_fuzz(3000)
@given(text=mutated_texts(SEEDS))
def test_mutated_tvmscript_sources_parse_or_raise_parse_error_many(text):
    _check_both_levels(text)
