"""The C target: lowered TensorIR -> C99 + OpenMP, compiled by gcc into a per-user cache."""
from .codegen import CodegenError, KernelInfo, generate_c
from .compiler import CacheDirectoryError, CompileError, cache_dir, compile_shared

__all__ = ["CodegenError", "KernelInfo", "generate_c", "CompileError", "CacheDirectoryError", "cache_dir",
           "compile_shared"]
