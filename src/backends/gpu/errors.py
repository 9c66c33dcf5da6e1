"""The error GPU lowering raises for a schedule it cannot turn into kernels."""
from __future__ import annotations


class GPULoweringError(ValueError):
    """A scheduled PrimFunc the GPU lowering cannot turn into kernels; the message names the block or buffer."""
