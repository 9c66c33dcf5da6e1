"""tensorir: the loop-level IR of relaxscript.

Public names are imported lazily so that each submodule stays independent
and ``import tensorir`` is cheap.
"""
from __future__ import annotations

from .lazy_exports import lazy_exports

from . import dtype
from .buffer import Buffer, decl_buffer
from .errors import (AllocationError, IndexOutOfRangeError, IRError, KernelAssertionError,
                     KernelDivisionByZeroError, ParseError, ScheduleError, ShapeMismatchError)
from .expr import (INTRINSICS, Add, And, BufferLoad, Call, Cast, Div, EQ, FloatImm, FloorDiv,
                   FloorMod, GE, GT, IntImm, LE, LT, Max, Min, Mul, NE, Not, Or, PrimExpr, Ramp, Select,
                   Broadcast, StringImm, Sub, Var, call_intrin, cast, ceildiv, const, convert, size_var)
from .function import PrimFunc
from .functor import Mutator, Visitor, collect, post_order, substitute
from .node import Node
from .stmt import (Allocate, AssertStmt, Block, BlockRealize, Break, BufferRegion, BufferStore, Continue,
                   Evaluate, For, IfThenElse, IterVar, LetStmt, MatchBufferRegion, Range, SeqStmt, Stmt, While, seq)
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


__getattr__, __dir__ = lazy_exports('tensorir', _LAZY, globals())
