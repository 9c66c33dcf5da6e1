"""The OpenCL target."""
