"""The CUDA target."""
