"""The interp target: kernels run in the loop-level reference interpreter (no code generation)."""
