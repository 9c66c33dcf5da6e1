"""Graph-level operators: constructors grouped like TVMScript's ``R.*``.

``relaxscript.op.add(a, b)``, ``op.nn.softmax(x)``, ``op.reshape(x, (n, 4))``
build ``Call`` nodes; ``op.get_op_spec("relax.add")`` gives the deduction
rule and the NumPy reference (see ``registry.py``).

Conventions shared by every operator:

- Attributes are stored normalised (axes as tuples of ints or None, dtypes
  as canonical names) and each constructor accepts that form back, so a
  printed call ``R.<path>(args..., attr=value)`` rebuilds the same Call.
- Deduction reads only the arguments' annotations. Provable conflicts raise
  ``OpDeductionError`` naming the annotations; undecidable ones (``n`` vs
  ``m`` in a broadcast) give a coarser annotation (rank and dtype only), as
  do coarse inputs and data-dependent ops (``unique``, ``nonzero``).
- Operands of arithmetic share one dtype (no implicit promotion; a Python
  number adopts the tensor's dtype); reductions keep the input dtype.
- NumPy references return arrays of exactly the deduced dtype.
"""
from __future__ import annotations

from . import memory, nn  # memory: lowered allocation / DPS ops (op/memory.py)
from .binary import *  # noqa: F401,F403
from .binary import __all__ as _binary
from .call import call_dps_library, call_tir, call_tir_inplace
from .packed import call_dps_packed, call_pure_packed
from .create import *  # noqa: F401,F403
from .create import __all__ as _create
from .data_dependent import nonzero, unique
from .datatype import astype
from .indexing import concat, split, strided_slice, take
from .linear_algebra import matmul
from .manipulate import *  # noqa: F401,F403
from .manipulate import __all__ as _manipulate
from .quantize import dequantize
from .reduce import *  # noqa: F401,F403
from .reduce import __all__ as _reduce
from .registry import (DeductionContext, OpAttributeError, OpDeductionError, OpSpec, all_op_specs,
                       get_op, get_op_spec, register_op)
from .shape import shape_of
from .unary import *  # noqa: F401,F403
from .unary import __all__ as _unary

__all__ = [
    "nn", "call_tir", "call_tir_inplace", "call_dps_library", "call_dps_packed", "call_pure_packed",
    "unique", "nonzero", "astype", "concat", "split", "strided_slice", "take", "matmul", "dequantize",
    "shape_of", "DeductionContext", "OpAttributeError",
    "OpDeductionError", "OpSpec", "all_op_specs", "get_op", "get_op_spec", "register_op",
    *_binary, *_create, *_manipulate, *_reduce, *_unary,
]
