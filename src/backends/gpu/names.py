"""Names the OpenCL and CUDA kernels may not give an IR object (besides C's own)."""
from __future__ import annotations

from ..source_names import C_RESERVED

RESERVED = C_RESERVED | frozenset((
    "half uchar ushort uint ulong "
    "kernel global local constant private __global __local __kernel __shared__ __device__ "
    "threadIdx blockIdx blockDim gridDim warpSize min max abs exp log sqrt rsqrt tanh erf pow "
    "sin cos tan floor ceil rint exp2 log2 isnan isinf fabs llabs get_local_id get_group_id barrier "
    "vload_half vstore_half_rte CLK_LOCAL_MEM_FENCE CLK_GLOBAL_MEM_FENCE NAN INFINITY "
    "__syncthreads __shfl_xor_sync __int_as_float __longlong_as_double asm").split()) | frozenset(
    f"{fn}f" for fn in "exp log sqrt rsqrt tanh erf pow fabs sin cos tan floor ceil rint exp2 log2".split())
