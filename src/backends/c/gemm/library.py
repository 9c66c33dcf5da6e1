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
from .driver import ACTIVATIONS, RESIDUAL_AFTER_ACT, emit_gemm_library
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
    unpacked weight), or past ``driver.prepacked_rows`` rows on the unpacked weight what the plain
    entry runs under ``policy``: "openblas" (WITH_BLAS) or, where the packed tile beats both
    (``driver.packed_beats_blas``), "medium"/"large"; asked of the C code."""
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
         unpacked: np.ndarray | None = None, residual_after_act: bool = False) -> None:
    """``c = act(a @ op(b) + bias + residual)`` in place, through the generated kernel (with
    ``residual_after_act``: ``act(a @ op(b) + bias) + residual``). ``a``'s leading
    dims are flattened into rows as in ``backends.blas.sgemm``. ``prepacked``: ``b`` is
    ``prepacked.pack_weight``'s panels (of ``params.nr`` columns), ``unpacked`` (optional) the
    ``(k, n)`` weight they were packed from, for OpenBLAS's share of the rows under WITH_BLAS."""
    if act not in ACTIVATIONS:
        raise ValueError(f"generated gemm: unknown activation {act!r} (known: {sorted(ACTIVATIONS)})")
    if prepacked:
        m, n, k = prepacked_dims(a.shape, b.shape, c.shape, (gemm_params() if params is None else params).nr)
    else:
        m, n, k = product_dims(a.shape, b.shape, c.shape, trans_b=trans_b)
    code = ACTIVATIONS[act] | (RESIDUAL_AFTER_ACT if residual_after_act else 0)
    ptrs = [_checked("a", a), _checked("b", b), _checked("c", c), _checked("bias", bias, (n,)),
            _checked("residual", residual, (m, n))]
    if prepacked:
        original = _checked("unpacked", unpacked, (k, n))
        status = compiled(params).rs_gen_gemm_prepacked(m, n, k, ptrs[0], ptrs[1], original, ptrs[2], ptrs[3],
                                                        ptrs[4], code, threads, policy)
    else:
        status = compiled(params).rs_gen_gemm(m, n, k, ptrs[0], ptrs[1], int(trans_b), ptrs[2], ptrs[3], ptrs[4],
                                              code, threads, policy)
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


# ------------------------------------------------------------------ entries with a fused epilogue
# ``<base>[.residual].<act>`` (the residual added before the activation) or ``<base>.<act>[.residual]``
# (after it), the steps in the order they apply: e.g. "generated.sgemm_bias_prepacked.gelu_tanh" or
# "generated.sgemm_bias_prepacked.residual" for ``act(x @ W + b)`` and ``x @ W + b + r``. Operands are the
# base entry's, then the residual (the output's shape), then the output; DispatchLibrary's epilogue
# patterns emit them (transform/dispatch_library.py).
EPILOGUE_BASES = (SGEMM, SGEMM_BIAS, SGEMM_PREPACKED, SGEMM_BIAS_PREPACKED)
RESIDUAL_ORDERS = (None, "before", "after")


def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def _gelu(v):
    from relaxscript.op.unary import erf_numpy   # the interpreter's own erf
    return 0.5 * v * (1.0 + erf_numpy(v / np.sqrt(2.0)))


# NumPy forms of driver.ACTIVATION_C, for the interpreter (float64 inside, as the ops' own)
ACTIVATION_NUMPY = {
    "none": lambda v: v,
    "relu": lambda v: np.maximum(v, 0.0),
    "silu": lambda v: v * _sigmoid(v),
    "gelu": _gelu,
    "gelu_tanh": lambda v: 0.5 * v * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (v + 0.044715 * v ** 3))),
    "sigmoid": _sigmoid,
    "tanh": np.tanh,
}
assert set(ACTIVATION_NUMPY) == set(ACTIVATIONS)


def epilogue_entry(base: str, act: str = "none", residual: str | None = None) -> str:
    """The library name of ``base`` (one of ``EPILOGUE_BASES``) followed by activation ``act`` and a
    residual added ``before`` or ``after`` it (None: no residual); ``base`` itself when neither."""
    if base not in EPILOGUE_BASES or act not in ACTIVATIONS or residual not in RESIDUAL_ORDERS:
        raise ValueError(f"no generated gemm entry for {base!r}, activation {act!r}, residual {residual!r}")
    steps = [] if act == "none" else [act]
    if residual is not None:
        steps.insert(0 if residual == "before" or act == "none" else 1, "residual")
    return ".".join([base, *steps])


def _epilogue_impls(base: str, act: str, residual: str | None):
    prepacked = base in (SGEMM_PREPACKED, SGEMM_BIAS_PREPACKED)
    has_bias = base in (SGEMM_BIAS, SGEMM_BIAS_PREPACKED)
    layout = int(prepacked) | (2 if has_bias else 0) | (4 if residual is not None else 0)
    code = ACTIVATIONS[act] | (RESIDUAL_AFTER_ACT if residual == "after" else 0)
    fn = ACTIVATION_NUMPY[act]

    def split(operands):
        a, rest = operands[0], list(operands[1:])
        packed = rest.pop(0) if prepacked else None
        weight = rest.pop(0)
        bias = rest.pop(0) if has_bias else None
        res = rest.pop(0) if residual is not None else None
        return a, packed, weight, bias, res

    def numpy_impl(*operands):
        *inputs, c = operands
        a, packed, weight, bias, res = split(inputs)
        if bias is not None:
            _check_bias(bias.shape, c.shape)
        if prepacked:
            prepacked_dims(a.shape, packed.shape, c.shape)
            _check_unpacked(packed.shape, weight.shape, c.shape[-1])
        else:
            product_dims(a.shape, weight.shape, c.shape)
        if res is not None and tuple(res.shape) != tuple(c.shape):
            raise ShapeMismatchError(f"{name}: residual of shape {res.shape}, expected the output's {c.shape}")
        v = _matrix(a).astype(np.float64) @ weight
        if bias is not None:
            v = v + bias.reshape(1, -1)
        if res is not None and residual == "before":
            v = v + _matrix(res)
        v = fn(v)
        if res is not None and residual == "after":
            v = v + _matrix(res)
        _matrix(c)[...] = v

    def params(*shapes):
        *ins, c_shape = shapes
        a_shape, packed_shape, weight_shape, bias_shape, res_shape = split(ins)
        if bias_shape is not None:
            _check_bias(bias_shape, c_shape)
        if res_shape is not None and tuple(res_shape) != tuple(c_shape):
            raise ShapeMismatchError(f"{name}: residual of shape {tuple(res_shape)}, expected the output's "
                                     f"{tuple(c_shape)}")
        if prepacked:
            m, n, k, threads, policy = _prepacked_params(a_shape, packed_shape, weight_shape, c_shape)
        else:
            m, n, k, threads, policy = _plain_params(a_shape, weight_shape, c_shape)
        return m, n, k, threads, policy, code, layout

    name = epilogue_entry(base, act, residual)
    return name, numpy_impl, params


EPILOGUE_ENTRIES = []
for _base in EPILOGUE_BASES:
    for _act in ACTIVATIONS:
        for _residual in RESIDUAL_ORDERS:
            if (_act == "none" and _residual == "before") or (_act == "none" and _residual is None):
                continue   # the base entry itself; one residual entry without an activation
            _name, _impl, _params = _epilogue_impls(_base, _act, _residual)
            EPILOGUE_ENTRIES.append(_name)
            register_library(_name, _impl, dps=True, c=_impl,
                             native=NativeCall(lambda: native_address("rs_gen_sgemm_epilogue_native"), _params,
                                               "float32"))
