"""The generated GEMM compiled once per process (content-hashed C cache) and its library entries.

``generated.sgemm(a, b) -> c``, ``generated.sgemm_nt(a, b) -> c`` (b is (n, k), read transposed)
and ``generated.sgemm_bias(a, b, bias) -> c`` mirror the ``openblas.*`` entries
(``backends/library_blas.py``): same operands, same shapes, same destination-passing form, so
DispatchLibrary can send a matmul to either. The NumPy implementation serves the interpreter;
the VM of a C build calls the native entries directly.
"""
from __future__ import annotations

import ctypes
import functools

import numpy as np

from tensorir.errors import ShapeMismatchError

from ... import blas
from ...blas import native_params, product_dims
from ...library import NativeCall, register_library
from ..compiler import compile_shared
from .driver import ACTIVATIONS, emit_gemm_library
from .params import GemmParams, gemm_params
from .prepacked import prepacked_dims

SGEMM = "generated.sgemm"
SGEMM_NT = "generated.sgemm_nt"
SGEMM_BIAS = "generated.sgemm_bias"
SGEMM_PREPACKED = "generated.sgemm_prepacked"
SGEMM_BIAS_PREPACKED = "generated.sgemm_bias_prepacked"

_P, _L, _I = ctypes.c_void_p, ctypes.c_long, ctypes.c_int


@functools.lru_cache(maxsize=None)
def compiled(params: GemmParams | None = None) -> ctypes.CDLL:
    """The library for ``params`` (this machine's by default), compiled once into the cache."""
    from ...threading import bind, prepare_openmp
    path, _ = compile_shared(emit_gemm_library(gemm_params() if params is None else params))
    prepare_openmp()
    lib = ctypes.CDLL(str(path))
    lib.rs_gen_gemm.argtypes = [_L, _L, _L, _P, _P, _I, _P, _P, _P, _I, _I, _I]
    lib.rs_gen_gemm.restype = _I
    lib.rs_gen_gemm_variant.argtypes = [_L, _L, _I, _I]
    lib.rs_gen_gemm_variant.restype = _I
    lib.rs_gen_gemm_prepacked.argtypes = [_L, _L, _L, _P, _P, _P, _P, _P, _P, _I, _I, _I]
    lib.rs_gen_gemm_prepacked.restype = _I
    lib.rs_gen_gemm_prepacked_variant.argtypes = [_L, _I, _I]
    lib.rs_gen_gemm_prepacked_variant.restype = _I
    lib.rs_gen_bind_blas.argtypes = [_P]
    lib.rs_gen_bind_blas.restype = None
    if blas.backend() == "openblas":
        lib.rs_gen_bind_blas(blas.native_address("rs_sgemm"))
    bind(lib)
    return lib


VARIANTS = ("skinny", "medium", "large", "openblas", "gemv", "prepacked")
GENERATED_ONLY, WITH_BLAS = 0, 1   # the run-time policy: see driver.py


def variant(m: int, threads: int = 0, params: GemmParams | None = None, policy: int = GENERATED_ONLY,
            n: int = 1) -> str:
    """The variant the compiled library runs for ``m`` rows of width ``n`` (asked of the C code)."""
    return VARIANTS[compiled(params).rs_gen_gemm_variant(m, n, threads, policy)]


def prepacked_variant(m: int, policy: int = GENERATED_ONLY, has_unpacked: bool = True,
                      params: GemmParams | None = None) -> str:
    """What a prepacked weight's call runs for ``m`` rows: "prepacked", "gemv" (one row, on the
    unpacked weight) or "openblas" (on the unpacked weight, policy WITH_BLAS, more than
    ``driver.prepacked_rows`` rows); asked of the C code."""
    return VARIANTS[compiled(params).rs_gen_gemm_prepacked_variant(m, policy, int(has_unpacked))]


def _checked(name: str, array: np.ndarray | None, shape: tuple | None = None) -> int | None:
    if array is None:
        return None
    if not isinstance(array, np.ndarray) or array.dtype != np.float32 or not array.flags.c_contiguous:
        raise ShapeMismatchError(f"generated gemm: {name} must be a C-contiguous float32 array, got "
                                 f"{getattr(array, 'dtype', type(array).__name__)}")
    if shape is not None and array.size != int(np.prod(shape)):
        raise ShapeMismatchError(f"generated gemm: {name} has shape {array.shape}, expected {shape}")
    return array.ctypes.data


def gemm(a: np.ndarray, b: np.ndarray, c: np.ndarray, trans_b: bool = False, bias: np.ndarray | None = None,
         residual: np.ndarray | None = None, act: str = "none", threads: int = 0,
         params: GemmParams | None = None, policy: int = GENERATED_ONLY, prepacked: bool = False,
         unpacked: np.ndarray | None = None) -> None:
    """``c = act(a @ op(b) + bias + residual)`` in place, through the generated kernel. ``a``'s leading
    dims are flattened into rows as in ``backends.blas.sgemm``. ``prepacked``: ``b`` is
    ``prepacked.pack_weight``'s panels (of ``params.nr`` columns), ``unpacked`` (optional) the
    ``(k, n)`` weight they were packed from, for OpenBLAS's share of the rows under WITH_BLAS."""
    if act not in ACTIVATIONS:
        raise ValueError(f"generated gemm: unknown activation {act!r} (known: {sorted(ACTIVATIONS)})")
    if prepacked:
        m, n, k = prepacked_dims(a.shape, b.shape, c.shape, (gemm_params() if params is None else params).nr)
    else:
        m, n, k = product_dims(a.shape, b.shape, c.shape, trans_b=trans_b)
    ptrs = [_checked("a", a), _checked("b", b), _checked("c", c), _checked("bias", bias, (n,)),
            _checked("residual", residual, (m, n))]
    if prepacked:
        original = _checked("unpacked", unpacked, (k, n))
        status = compiled(params).rs_gen_gemm_prepacked(m, n, k, ptrs[0], ptrs[1], original, ptrs[2], ptrs[3],
                                                        ptrs[4], ACTIVATIONS[act], threads, policy)
    else:
        status = compiled(params).rs_gen_gemm(m, n, k, ptrs[0], ptrs[1], int(trans_b), ptrs[2], ptrs[3], ptrs[4],
                                              ACTIVATIONS[act], threads, policy)
    if status != 0:
        raise MemoryError("generated gemm: cannot allocate its packing buffers")


def native_address(symbol: str) -> int | None:
    try:
        lib = compiled()
    except Exception:  # noqa: BLE001 - no C compiler: the VM falls back to the NumPy implementation
        return None
    return ctypes.cast(getattr(lib, symbol), ctypes.c_void_p).value


def _matrix(x: np.ndarray) -> np.ndarray:
    """``x`` with its leading dims flattened into rows (explicit sizes: empty dims are fine)."""
    x = np.asarray(x)
    return x.reshape(int(np.prod(x.shape[:-1])), x.shape[-1])


def _sgemm_numpy(a, b, c) -> None:
    product_dims(a.shape, b.shape, c.shape)
    _matrix(c)[...] = _matrix(a) @ b


def _sgemm_nt_numpy(a, b, c) -> None:
    product_dims(a.shape, b.shape, c.shape, trans_b=True)
    _matrix(c)[...] = _matrix(a) @ np.asarray(b).T


def _check_bias(bias_shape: tuple, c_shape: tuple) -> None:
    if bias_shape[-1:] != c_shape[-1:] or int(np.prod(bias_shape)) != c_shape[-1]:
        raise ShapeMismatchError(f"{SGEMM_BIAS}: bias of shape {bias_shape} does not match the "
                                 f"{c_shape[-1]} output columns")


def _sgemm_bias_numpy(a, b, bias, c) -> None:
    _check_bias(bias.shape, c.shape)
    product_dims(a.shape, b.shape, c.shape)
    _matrix(c)[...] = _matrix(a) @ b + bias.reshape(1, -1)


def _nt_params(a_shape, b_shape, c_shape) -> tuple:
    return (*product_dims(a_shape, b_shape, c_shape, trans_b=True), 0, WITH_BLAS)


def _plain_params(a_shape, b_shape, c_shape) -> tuple:
    """``(m, n, k, threads, policy)``: threads 0 follows the team size; the library entries let the
    run-time choice hand one row and large ``m`` to OpenBLAS where the target has it."""
    m, n, k, _ = native_params(a_shape, b_shape, c_shape)
    return m, n, k, 0, WITH_BLAS


def _bias_params(a_shape, b_shape, bias_shape, c_shape) -> tuple:
    _check_bias(bias_shape, c_shape)
    return _plain_params(a_shape, b_shape, c_shape)


register_library(SGEMM, _sgemm_numpy, dps=True, c=_sgemm_numpy,
                 native=NativeCall(lambda: native_address("rs_gen_sgemm_native"), _plain_params, "float32"))
register_library(SGEMM_NT, _sgemm_nt_numpy, dps=True, c=_sgemm_nt_numpy,
                 native=NativeCall(lambda: native_address("rs_gen_sgemm_nt_native"), _nt_params, "float32"))
register_library(SGEMM_BIAS, _sgemm_bias_numpy, dps=True, c=_sgemm_bias_numpy,
                 native=NativeCall(lambda: native_address("rs_gen_sgemm_bias_native"), _bias_params, "float32"))


def _check_unpacked(packed_shape: tuple, weight_shape: tuple, n: int) -> None:
    if tuple(weight_shape) != (packed_shape[1], n):
        raise ShapeMismatchError(f"generated sgemm (prepacked weight): the unpacked weight has shape "
                                 f"{tuple(weight_shape)}, expected {(packed_shape[1], n)}")


def _sgemm_prepacked_numpy(a, packed, weight, c) -> None:
    prepacked_dims(a.shape, packed.shape, c.shape)
    _check_unpacked(packed.shape, weight.shape, c.shape[-1])
    _matrix(c)[...] = _matrix(a) @ weight


def _sgemm_bias_prepacked_numpy(a, packed, weight, bias, c) -> None:
    _check_bias(bias.shape, c.shape)
    prepacked_dims(a.shape, packed.shape, c.shape)
    _check_unpacked(packed.shape, weight.shape, c.shape[-1])
    _matrix(c)[...] = _matrix(a) @ weight + bias.reshape(1, -1)


def _prepacked_params(a_shape, packed_shape, weight_shape, c_shape) -> tuple:
    """``(m, n, k, threads, policy)``; the packed panels must have this machine's width; policy
    WITH_BLAS lets more than ``driver.prepacked_rows`` rows run OpenBLAS on the unpacked weight."""
    m, n, k = prepacked_dims(a_shape, packed_shape, c_shape, gemm_params().nr)
    _check_unpacked(packed_shape, weight_shape, n)
    return m, n, k, 0, WITH_BLAS


def _bias_prepacked_params(a_shape, packed_shape, weight_shape, bias_shape, c_shape) -> tuple:
    _check_bias(bias_shape, c_shape)
    return _prepacked_params(a_shape, packed_shape, weight_shape, c_shape)


register_library(SGEMM_PREPACKED, _sgemm_prepacked_numpy, dps=True, c=_sgemm_prepacked_numpy,
                 native=NativeCall(lambda: native_address("rs_gen_sgemm_prepacked_native"), _prepacked_params,
                                   "float32"))
register_library(SGEMM_BIAS_PREPACKED, _sgemm_bias_prepacked_numpy, dps=True, c=_sgemm_bias_prepacked_numpy,
                 native=NativeCall(lambda: native_address("rs_gen_sgemm_bias_prepacked_native"),
                                   _bias_prepacked_params, "float32"))
