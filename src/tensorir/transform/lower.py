"""lower: the default lowering pipeline from scheduled blocks to flat loops."""
from __future__ import annotations

from ..function import PrimFunc
from .flatten_buffers import flatten_buffers
from .fuse_loops import fuse_loops, remove_unit_loops
from .lower_blocks import lower_blocks
from .lower_predicates import lower_predicates
from .scalarize_vectors import scalarize_vectors
from .simplify_indices import simplify_indices

PASSES = (lower_predicates, lower_blocks, flatten_buffers, remove_unit_loops, simplify_indices,
          scalarize_vectors, fuse_loops)


def lower(func: PrimFunc) -> PrimFunc:
    """Blocks -> plain loops with one-dimensional buffer accesses; loop kinds and
    annotations are kept for the code generators."""
    if not isinstance(func, PrimFunc):
        raise TypeError(f"lower expects a PrimFunc, got {type(func).__name__}")
    for lowering_pass in PASSES:
        func = lowering_pass(func)
    return func
