"""Lowering passes of the loop level, each usable on its own; ``lower``
runs them in order (see ``lower.PASSES``)."""
from .flatten_buffers import flatten_buffers
from .lower import PASSES, lower
from .lower_blocks import lower_blocks
from .lower_predicates import lower_predicates
from .scalarize_vectors import scalarize_vectors
from .simplify_indices import simplify_indices

__all__ = ["lower", "lower_blocks", "lower_predicates", "flatten_buffers", "simplify_indices", "scalarize_vectors",
           "PASSES"]
