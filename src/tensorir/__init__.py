"""tensorir: the loop-level IR of relaxscript.

Public names are imported lazily so that each submodule stays independent
and ``import tensorir`` is cheap.
"""
from __future__ import annotations

import importlib

from . import dtype
from .buffer import Buffer, decl_buffer
from .errors import IRError, ParseError, ScheduleError, ShapeMismatchError
from .expr import (INTRINSICS, Add, And, BufferLoad, Call, Cast, Div, EQ, FloatImm, FloorDiv,
                   FloorMod, GE, GT, IntImm, LE, LT, Max, Min, Mul, NE, Not, Or, PrimExpr, Select,
                   StringImm, Sub, Var, call_intrin, cast, ceildiv, const, convert, size_var)
from .function import PrimFunc
from .functor import Mutator, Visitor, collect, post_order, substitute
from .node import Node
from .stmt import (Allocate, Block, BlockRealize, BufferRegion, BufferStore, Evaluate, For,
                   IfThenElse, IterVar, LetStmt, MatchBufferRegion, Range, SeqStmt, Stmt, seq)
from .structural import (StructuralMismatch, assert_structural_equal, structural_equal,
                         structural_hash)

# name -> submodule that defines it (loaded on first use)
_LAZY = {
    "T": "tensorir.script.namespace",
    "prim_func": "tensorir.script.parser",
    "from_source": "tensorir.script.parser",
    "print_prim_func": "tensorir.script.printer",
    "interpret": "tensorir.interpreter",
    "Analyzer": "tensorir.arith",
    "simplify": "tensorir.arith",
    "Schedule": "tensorir.schedule",
    "lower": "tensorir.transform",
    "analysis": "tensorir.analysis",
    "transform": "tensorir.transform",
    "arith": "tensorir.arith",
}


def __getattr__(name: str):
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'tensorir' has no attribute {name!r}")
    module = importlib.import_module(module_name)
    value = module if module_name.endswith("." + name) else getattr(module, name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
