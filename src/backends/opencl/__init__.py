"""The OpenCL target: OpenCL C from the shared GPU lowering, run through pyopencl (PoCL on a CPU works)."""
