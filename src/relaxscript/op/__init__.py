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

from . import image, memory, nn  # memory: lowered allocation / DPS ops (op/memory.py)
from .binary import *  # noqa: F401,F403
from .binary import __all__ as _binary
from .call import call_dps_library, call_tir, call_tir_inplace
from .packed import call_dps_packed, call_pure_packed
from .create import *  # noqa: F401,F403
from .create import __all__ as _create
from .collapse_sum import collapse_sum_like, collapse_sum_to
from .cumulative import cumprod, cumsum
from .data_dependent import nonzero, unique
from .gather_scatter import (flip, gather_elements, gather_nd, index_put, one_hot, scatter_elements,
                             scatter_nd, slice_scatter)
from .datatype import astype
from .indexing import concat, split, strided_slice, take
from .layout_transform import layout_transform
from .linear_algebra import einsum, linear, matmul
from .manipulate import *  # noqa: F401,F403
from .manipulate import __all__ as _manipulate
from .quantize import dequantize
from .qdq import quantize  # after .quantize: the submodule import would shadow the op
from .quantize_activations import fake_quantize
from .reduce import *  # noqa: F401,F403
from .reduce import __all__ as _reduce
from .registry import (DeductionContext, OpAttributeError, OpDeductionError, OpSpec, all_op_specs,
                       get_op, get_op_spec, register_op)
from .side_effects import assert_op, null_value
from .side_effects import print as print_  # noqa: F401 - R.print; a module-level print would shadow
from .sampling import multinomial_from_uniform
from .shape import shape_of, shape_to_tensor, tensor_to_shape
from .sorting import argsort, median, sort, topk
from .unary import *  # noqa: F401,F403
from .unary import __all__ as _unary

__all__ = [
    "nn", "image", "call_tir", "call_tir_inplace", "call_dps_library", "call_dps_packed", "call_pure_packed",
    "unique", "nonzero", "astype", "concat", "split", "strided_slice", "take", "matmul", "dequantize",
    "fake_quantize", "einsum", "linear", "layout_transform", "quantize",
    "shape_of", "DeductionContext", "OpAttributeError",
    # TVM's ops of issue 15 item 6
    "assert_op", "null_value", "collapse_sum_like", "collapse_sum_to", "cumsum", "flip", "gather_elements", "gather_nd",
    "index_put", "one_hot",
    "scatter_elements", "scatter_nd", "slice_scatter", "argsort", "topk", "sort", "median", "cumprod",
    "shape_to_tensor", "tensor_to_shape", "multinomial_from_uniform",
    "OpDeductionError", "OpSpec", "all_op_specs", "get_op", "get_op_spec", "register_op",
    *_binary, *_create, *_manipulate, *_reduce, *_unary,
]
