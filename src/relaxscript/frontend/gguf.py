"""A validated reader of GGUF model files (llama.cpp's format), and the Llama hyperparameters in them.

``read_gguf(path)`` parses the header, the metadata and the tensor table with
bounds checks on every length, count and offset, so a corrupt or truncated
file raises ``GGUFFormatError`` (a ``ValueError`` naming the file and the
problem) and never crashes or allocates what the file cannot hold. The file
is read into memory once (not memory-mapped: a file truncated while mapped
would kill the process with SIGBUS); tensors are views into that copy.

Orders: GGUF lists a tensor's dimensions innermost first (``ne[0]`` is the
contiguous one); ``GGUFTensor.shape`` is NumPy's row-major order, so a linear
layer's weight is ``(out_features, in_features)``.

Rotary convention: the rows of ``attn_q``/``attn_k`` are returned exactly as
the file stores them. Which pairs of a head rotary embedding rotates depends on
the architecture (``ARCHITECTURES``): for ``llama`` llama.cpp's converter permutes
the rows so that it rotates *adjacent pairs* ``(2i, 2i+1)`` ("pairs", llama.cpp's
NORM rope), for ``qwen2`` it keeps Hugging Face's row order, which rotates the
*halves* ``(i, i + head_dim/2)`` ("halves", llama.cpp's NEOX rope); the angle is
``position * rope_theta ** (-2i / head_dim)`` either way. ``LlamaConfig.rope_style``
says which; ``pair_rows`` is the row order that turns "halves" into "pairs".
"""
from __future__ import annotations

import dataclasses
import math
import os
import struct
from typing import Any

import numpy as np

from tensorir.regular_files import NotRegularFileError, read_regular_file

from .ggml_types import GGML_TYPES, NATIVE_DEQUANTIZE, dequantizable, dequantize_blocks

__all__ = ["GGUFFormatError", "UnsupportedModelError", "GGUFFile", "GGUFTensor", "LlamaConfig",
           "Architecture", "ARCHITECTURES", "read_gguf", "llama_config", "expected_tensor_shapes", "pair_rows",
           "QUANT_BLOCKS"]


class GGUFFormatError(ValueError):
    """The file is not a well-formed GGUF file (corrupt, truncated, or of an unknown layout)."""


class UnsupportedModelError(ValueError):
    """A well-formed file holding something this project does not run (architecture, tensor type)."""


MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4   # GGML_MAX_DIMS

# metadata value types: code -> (name, struct format of a scalar or None)
_SCALAR_FORMATS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
                   10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
_NUMPY_OF_SCALAR = {0: np.uint8, 1: np.int8, 2: np.uint16, 3: np.int16, 4: np.uint32, 5: np.int32,
                    6: np.float32, 7: np.bool_, 10: np.uint64, 11: np.int64, 12: np.float64}

# ggml tensor types: code -> (name, elements per block, bytes per block); a file's tensors may be of
# any type ``ggml_types`` dequantizes (natively or through the ``gguf`` package)
QUANT_BLOCKS = GGML_TYPES


class _Cursor:
    """Reads little-endian values from the file's bytes; running past the end is a format error."""

    def __init__(self, data: bytes, path: str):
        self.data, self.pos, self.path = data, 0, path

    def fail(self, problem: str) -> GGUFFormatError:
        return GGUFFormatError(f"{self.path}: {problem}")

    def take(self, size: int, what: str) -> bytes:
        end = self.pos + size
        if size < 0 or end > len(self.data):
            raise self.fail(f"truncated: {what} needs {size} bytes at offset {self.pos}, "
                            f"the file has {len(self.data)}")
        chunk = self.data[self.pos:end]
        self.pos = end
        return chunk

    def scalar(self, fmt: str, what: str):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))[0]

    def u32(self, what: str) -> int:
        return self.scalar("<I", what)

    def u64(self, what: str) -> int:
        return self.scalar("<Q", what)

    def string(self, what: str) -> str:
        length = self.u64(f"the length of {what}")
        raw = self.take(length, what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise self.fail(f"{what} is not UTF-8 ({err.reason} at byte {err.start})") from None

    def count(self, what: str, min_item_bytes: int) -> int:
        """A count of items that follow; more than the remaining bytes can hold is corrupt."""
        n = self.u64(what)
        if n * min_item_bytes > len(self.data) - self.pos:
            raise self.fail(f"{what} is {n}, more than the {len(self.data) - self.pos} remaining bytes can hold")
        return n


MAX_ARRAY_NESTING = 8   # deeper nesting is corrupt (and would exhaust Python's recursion)


def _read_value(cur: _Cursor, vtype: int, what: str, depth: int = 0) -> Any:
    if vtype in _SCALAR_FORMATS:
        return cur.scalar(_SCALAR_FORMATS[vtype], what)
    if vtype == _STRING:
        return cur.string(what)
    if vtype == _ARRAY:
        etype = cur.u32(f"the element type of {what}")
        if etype in _SCALAR_FORMATS:
            size = struct.calcsize(_SCALAR_FORMATS[etype])
            n = cur.count(f"the length of {what}", size)
            return np.frombuffer(cur.take(n * size, what), dtype=np.dtype(_NUMPY_OF_SCALAR[etype]).newbyteorder("<"))
        if etype == _STRING:
            n = cur.count(f"the length of {what}", 8)
            return [cur.string(f"{what}[{i}]") for i in range(n)]
        if etype == _ARRAY:
            if depth >= MAX_ARRAY_NESTING:
                raise cur.fail(f"{what} nests arrays more than {MAX_ARRAY_NESTING} deep")
            n = cur.count(f"the length of {what}", 12)
            return [_read_value(cur, _ARRAY, f"{what}[{i}]", depth + 1) for i in range(n)]
        raise cur.fail(f"{what} has unknown element type {etype}")
    raise cur.fail(f"{what} has unknown value type {vtype}")


@dataclasses.dataclass(frozen=True)
class GGUFTensor:
    """One tensor of a GGUF file.

    ``shape`` is row-major (NumPy order). ``raw`` is the file's bytes of the
    tensor as uint8 with shape ``shape[:-1] + (bytes_per_row,)``: each row is
    its quantization blocks in order (a block of Q4_1 is f16 scale, f16 min,
    16 bytes of 4-bit values: element j < 16 in the low nibble of byte j,
    element j >= 16 in the high nibble of byte j - 16; ``ggml_types`` lists
    the layouts of every type it decodes).
    """
    name: str
    qtype: str
    shape: tuple[int, ...]
    raw: np.ndarray

    @property
    def block_size(self) -> int:
        return _BLOCKS_BY_NAME[self.qtype][0]

    @property
    def block_bytes(self) -> int:
        return _BLOCKS_BY_NAME[self.qtype][1]

    @property
    def nbytes(self) -> int:
        return self.raw.size

    def blocks(self) -> np.ndarray:
        """The raw bytes as ``shape[:-1] + (blocks_per_row, block_bytes)``."""
        return self.raw.reshape(self.shape[:-1] + (self.shape[-1] // self.block_size, self.block_bytes))

    def dequantize(self) -> np.ndarray:
        """The values as a new float32 array of ``shape``."""
        return dequantize(self.raw, self.qtype, self.shape)


_BLOCKS_BY_NAME = {name: (size, nbytes) for name, size, nbytes in QUANT_BLOCKS.values()}


def dequantize(raw: np.ndarray, qtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """float32 values of ``raw`` bytes (row-major blocks) of ggml type ``qtype`` and ``shape``."""
    if qtype not in _BLOCKS_BY_NAME or not dequantizable(qtype):
        raise UnsupportedModelError(f"no dequantization for tensor type {qtype}")
    return dequantize_blocks(raw, qtype, shape)


def _supported_types() -> str:
    names = [name for name, _, _ in QUANT_BLOCKS.values() if dequantizable(name)]
    return ", ".join(names)


class GGUFFile:
    """A parsed GGUF file: ``metadata`` (key -> value), ``tensors`` (name -> GGUFTensor) in file order."""

    def __init__(self, path: str, version: int, metadata: dict[str, Any], tensors: dict[str, GGUFTensor]):
        self.path, self.version, self.metadata, self.tensors = path, version, metadata, tensors

    def __repr__(self) -> str:
        return f"GGUFFile({self.path!r}, {len(self.metadata)} keys, {len(self.tensors)} tensors)"

    def tensor(self, name: str) -> GGUFTensor:
        if name not in self.tensors:
            raise KeyError(f"{self.path}: no tensor named {name!r}")
        return self.tensors[name]

    def get(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(key, default)

    def get_typed(self, key: str, kind: type | tuple, default: Any = None) -> Any:
        """A metadata value of the given Python kind, ``default`` when absent; another kind is corrupt."""
        if key not in self.metadata:
            return default
        return self.require(key, kind)

    def require(self, key: str, kind: type | tuple = (int,)) -> Any:
        """A metadata value that must be present and of the given Python kind."""
        if key not in self.metadata:
            raise GGUFFormatError(f"{self.path}: metadata key {key!r} is missing")
        value = self.metadata[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
            raise GGUFFormatError(f"{self.path}: metadata {key!r} is {shown}, expected "
                                  f"{' or '.join(k.__name__ for k in kinds)}")
        return value


def _python_scalar(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def read_gguf(path: str | os.PathLike) -> GGUFFile:
    """Read and validate a GGUF file; a malformed one raises ``GGUFFormatError`` naming the file and problem."""
    path = os.fspath(path)
    try:
        # a device (/dev/zero) would be read until memory runs out; opening a FIFO blocked
        data = read_regular_file(path)
    except NotRegularFileError:
        raise GGUFFormatError(f"{path}: not a regular file") from None
    except OSError as err:
        raise GGUFFormatError(f"{path}: cannot be read ({err.strerror})") from None
    cur = _Cursor(data, path)
    if len(data) < 4 or data[:4] != MAGIC:
        raise cur.fail(f"not a GGUF file (starts with {data[:4]!r}, expected {MAGIC!r})")
    cur.pos = 4
    version = cur.u32("the version")
    if version not in SUPPORTED_VERSIONS:
        raise cur.fail(f"GGUF version {version} is not supported (only {SUPPORTED_VERSIONS})")
    n_tensors = cur.count("the tensor count", 24)
    n_keys = cur.count("the metadata count", 12)

    metadata: dict[str, Any] = {}
    for index in range(n_keys):
        key = cur.string(f"metadata key #{index}")
        if key in metadata:
            raise cur.fail(f"metadata key {key!r} appears twice")
        vtype = cur.u32(f"the type of metadata {key!r}")
        metadata[key] = _python_scalar(_read_value(cur, vtype, f"metadata {key!r}"))

    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or isinstance(alignment, bool) or alignment <= 0 \
            or alignment & (alignment - 1):
        raise cur.fail(f"general.alignment is {alignment!r}, expected a power of two")

    infos = []
    names = set()
    for index in range(n_tensors):
        name = cur.string(f"the name of tensor #{index}")
        if name in names:
            raise cur.fail(f"tensor {name!r} appears twice")
        names.add(name)
        n_dims = cur.u32(f"the rank of tensor {name!r}")
        if not 1 <= n_dims <= MAX_DIMS:
            raise cur.fail(f"tensor {name!r} has rank {n_dims}, expected 1 to {MAX_DIMS}")
        dims = [cur.u64(f"dimension {d} of tensor {name!r}") for d in range(n_dims)]
        code = cur.u32(f"the type of tensor {name!r}")
        offset = cur.u64(f"the data offset of tensor {name!r}")
        infos.append((name, dims, code, offset))

    data_start = -(-cur.pos // alignment) * alignment
    if data_start > len(data):
        raise cur.fail(f"truncated: tensor data would start at offset {data_start}, the file has {len(data)} bytes")
    buffer = np.frombuffer(data, dtype=np.uint8)
    tensors: dict[str, GGUFTensor] = {}
    extents = []
    for name, dims, code, offset in infos:
        if code not in QUANT_BLOCKS:
            raise cur.fail(f"tensor {name!r} has unknown ggml type {code}")
        if not dequantizable(QUANT_BLOCKS[code][0]):
            kind = QUANT_BLOCKS[code][0]
            hint = "" if kind in NATIVE_DEQUANTIZE else " (the rarer types are decoded by the 'gguf' package " \
                "when it is installed, and it does not decode this one)"
            raise UnsupportedModelError(
                f"{path}: tensor {name!r} has type {kind}, which cannot be dequantized{hint}; "
                f"supported types are {_supported_types()}")
        qtype, block, block_bytes = QUANT_BLOCKS[code]
        if any(d == 0 for d in dims):
            raise cur.fail(f"tensor {name!r} has a zero dimension {dims}")
        if dims[0] % block:
            raise cur.fail(f"tensor {name!r} of type {qtype} has rows of {dims[0]} elements, "
                           f"not a multiple of its block size {block}")
        row_bytes = dims[0] // block * block_bytes
        rows = 1
        for d in dims[1:]:
            rows *= d
        size = rows * row_bytes
        if offset % alignment:
            raise cur.fail(f"tensor {name!r} starts at data offset {offset}, not a multiple of {alignment}")
        start = data_start + offset
        if start + size > len(data):
            raise cur.fail(f"truncated: tensor {name!r} needs bytes {start}..{start + size}, "
                           f"the file has {len(data)}")
        extents.append((start, start + size, name))
        shape = tuple(reversed(dims))
        raw = buffer[start:start + size].reshape(shape[:-1] + (row_bytes,))
        tensors[name] = GGUFTensor(name, qtype, shape, raw)
    extents.sort()
    for (_, end, first), (start, _, second) in zip(extents, extents[1:]):
        if start < end:
            raise cur.fail(f"tensors {first!r} and {second!r} overlap")
    return GGUFFile(path, version, metadata, tensors)


ROPE_STYLES = ("pairs", "halves")


@dataclasses.dataclass(frozen=True)
class LlamaConfig:
    """Hyperparameters of a Llama-family model (``ARCHITECTURES`` lists the files' architectures).

    Rotary embedding rotates, in each query/key head, the pairs ``rope_style``
    names by ``position * rope_theta ** (-2i / head_dim)`` for pair ``i``:
    ``"pairs"`` rotates ``(2i, 2i+1)`` (the row order llama.cpp stores Llama in,
    which the GGUF reader returns unchanged), ``"halves"`` rotates
    ``(i, i + head_dim/2)`` (Hugging Face's order, which llama.cpp keeps for
    Qwen2). ``qkv_bias``: the q, k and v projections add a bias (``attn_q.bias``
    ...). Query head ``h`` attends with key/value head
    ``h // (num_heads // num_kv_heads)``.
    """
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rope_theta: float
    rms_norm_eps: float
    context_length: int
    tie_word_embeddings: bool
    bos_id: int | None
    eos_id: int | None
    architecture: str = "llama"
    rope_style: str = "pairs"
    qkv_bias: bool = False

    def __post_init__(self):
        for field in ("vocab_size", "hidden_size", "intermediate_size", "num_layers", "num_heads",
                      "num_kv_heads", "head_dim", "context_length"):
            if getattr(self, field) <= 0:
                raise ValueError(f"LlamaConfig.{field} must be positive, got {getattr(self, field)}")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"LlamaConfig: num_heads {self.num_heads} is not a multiple of "
                             f"num_kv_heads {self.num_kv_heads}")
        if self.head_dim % 2:
            raise ValueError(f"LlamaConfig: head_dim {self.head_dim} must be even for rotary embedding")
        # a nan/inf/negative base or epsilon would make every logit nan: refused, not computed
        if not (math.isfinite(self.rope_theta) and self.rope_theta > 0):
            raise ValueError(f"LlamaConfig.rope_theta must be a positive finite number, got {self.rope_theta}")
        if not (math.isfinite(self.rms_norm_eps) and self.rms_norm_eps >= 0):
            raise ValueError(f"LlamaConfig.rms_norm_eps must be a finite number >= 0, got {self.rms_norm_eps}")
        if self.rope_style not in ROPE_STYLES:
            raise ValueError(f"LlamaConfig.rope_style must be one of {ROPE_STYLES}, got {self.rope_style!r}")


@dataclasses.dataclass(frozen=True)
class Architecture:
    """What a GGUF architecture name means for the Llama-family graph: the rotary pairs its
    files' Q/K rows are rotated by (``LlamaConfig.rope_style``) and whether q/k/v carry biases.
    The hyperparameters are read from ``{name}.*`` metadata keys for every entry."""
    name: str
    rope_style: str
    qkv_bias: bool


# One entry per GGUF ``general.architecture`` this project runs (llama.cpp's facts): a further
# Llama-family architecture is a line here, not a branch in the loader, model or reference.
#   llama: llama.cpp's converter permutes Q/K rows to adjacent pairs (its NORM rope), no biases.
#   qwen2: Q/K rows in Hugging Face's order (NEOX rope: the halves of a head), q/k/v biases.
ARCHITECTURES = {arch.name: arch for arch in (
    Architecture("llama", rope_style="pairs", qkv_bias=False),
    Architecture("qwen2", rope_style="halves", qkv_bias=True),
)}
SUPPORTED_ARCHITECTURES = tuple(ARCHITECTURES)
_LAYER_TENSORS = ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate",
                  "ffn_up", "ffn_down")
_BIAS_TENSORS = ("attn_q", "attn_k", "attn_v")


def architecture(gguf: GGUFFile) -> Architecture:
    """The ``ARCHITECTURES`` entry of the file's ``general.architecture``; another name is an
    ``UnsupportedModelError`` naming it."""
    arch = gguf.require("general.architecture", str)
    if arch not in ARCHITECTURES:
        raise UnsupportedModelError(f"{gguf.path}: architecture {arch!r} is not supported "
                                    f"(supported: {', '.join(SUPPORTED_ARCHITECTURES)})")
    return ARCHITECTURES[arch]


def llama_config(gguf: GGUFFile) -> LlamaConfig:
    """The hyperparameters of ``gguf`` (a Llama-family architecture), checked against its tensors' shapes."""
    spec = architecture(gguf)
    arch = spec.name
    hidden = gguf.require(f"{arch}.embedding_length")
    heads = gguf.require(f"{arch}.attention.head_count")
    kv_heads = gguf.get_typed(f"{arch}.attention.head_count_kv", int, heads)
    if heads <= 0 or hidden % heads:
        raise GGUFFormatError(f"{gguf.path}: head_count {heads} does not divide embedding_length {hidden}")
    head_dim = hidden // heads
    rope_dims = gguf.get_typed(f"{arch}.rope.dimension_count", int, head_dim)
    if rope_dims != head_dim:
        raise UnsupportedModelError(f"{gguf.path}: partial rotary embedding ({rope_dims} of {head_dim} "
                                    f"dimensions) is not supported")
    scaling = gguf.get_typed(f"{arch}.rope.scaling.type", str, "none")
    if scaling != "none":
        raise UnsupportedModelError(f"{gguf.path}: rope scaling {scaling!r} is not supported")
    embedding = gguf.tensors.get("token_embd.weight")
    if embedding is None:
        raise GGUFFormatError(f"{gguf.path}: tensor 'token_embd.weight' is missing")
    vocab = gguf.get_typed(f"{arch}.vocab_size", int, embedding.shape[0])
    try:
        config = LlamaConfig(
            vocab_size=vocab, hidden_size=hidden, intermediate_size=gguf.require(f"{arch}.feed_forward_length"),
            num_layers=gguf.require(f"{arch}.block_count"), num_heads=heads, num_kv_heads=kv_heads,
            head_dim=head_dim, rope_theta=float(gguf.get_typed(f"{arch}.rope.freq_base", (float, int), 10000.0)),
            rms_norm_eps=float(gguf.require(f"{arch}.attention.layer_norm_rms_epsilon", (float, int))),
            context_length=gguf.require(f"{arch}.context_length"),
            tie_word_embeddings="output.weight" not in gguf.tensors,
            bos_id=gguf.get_typed("tokenizer.ggml.bos_token_id", int),
            eos_id=gguf.get_typed("tokenizer.ggml.eos_token_id", int),
            architecture=arch, rope_style=spec.rope_style, qkv_bias=spec.qkv_bias)
    except GGUFFormatError:
        raise
    except (TypeError, ValueError) as err:   # a metadata value of the wrong kind or range
        raise GGUFFormatError(f"{gguf.path}: {err}") from None
    # each layer has its own tensors: a block count the table cannot hold is corrupt, and listing
    # the expected names of 2**32 layers would take minutes and gigabytes
    per_layer = len(_LAYER_TENSORS) + (len(_BIAS_TENSORS) if config.qkv_bias else 0)
    if config.num_layers * per_layer > len(gguf.tensors):
        raise GGUFFormatError(f"{gguf.path}: block_count {config.num_layers} needs "
                              f"{config.num_layers * per_layer} layer tensors, the file has "
                              f"{len(gguf.tensors)} tensors in all")
    _check_tensor_shapes(gguf, config)
    return config


def expected_tensor_shapes(config: LlamaConfig) -> dict[str, tuple[int, ...]]:
    """llama.cpp's tensor names of a Llama-family model and their row-major shapes."""
    c = config
    shapes = {"token_embd.weight": (c.vocab_size, c.hidden_size), "output_norm.weight": (c.hidden_size,)}
    if not c.tie_word_embeddings:
        shapes["output.weight"] = (c.vocab_size, c.hidden_size)
    kv = c.num_kv_heads * c.head_dim
    per_layer = {"attn_norm": (c.hidden_size,), "attn_q": (c.num_heads * c.head_dim, c.hidden_size),
                 "attn_k": (kv, c.hidden_size), "attn_v": (kv, c.hidden_size),
                 "attn_output": (c.hidden_size, c.num_heads * c.head_dim), "ffn_norm": (c.hidden_size,),
                 "ffn_gate": (c.intermediate_size, c.hidden_size), "ffn_up": (c.intermediate_size, c.hidden_size),
                 "ffn_down": (c.hidden_size, c.intermediate_size)}
    for layer in range(c.num_layers):
        for part in _LAYER_TENSORS:
            shapes[f"blk.{layer}.{part}.weight"] = per_layer[part]
        if c.qkv_bias:
            for part in _BIAS_TENSORS:
                shapes[f"blk.{layer}.{part}.bias"] = per_layer[part][:1]
    return shapes


def pair_rows(rows: int, head_dim: int) -> np.ndarray:
    """The row order that makes a "halves" projection (rotary pairs ``(i, i + head_dim/2)`` of
    each head) a "pairs" one (``(2i, 2i+1)``): new row ``h*d + 2i + j`` is old row
    ``h*d + j*d/2 + i``. Attention scores are sums over a head's rows, unchanged when the
    queries' and keys' rows are reordered alike; only the order of a float sum changes."""
    half = head_dim // 2
    return np.arange(rows).reshape(rows // head_dim, 2, half).transpose(0, 2, 1).reshape(-1)


def _check_tensor_shapes(gguf: GGUFFile, config: LlamaConfig) -> None:
    for name, shape in expected_tensor_shapes(config).items():
        tensor = gguf.tensors.get(name)
        if tensor is None:
            raise GGUFFormatError(f"{gguf.path}: tensor {name!r} is missing")
        if tensor.shape != shape:
            raise GGUFFormatError(f"{gguf.path}: tensor {name!r} has shape {tensor.shape}, "
                                  f"the metadata implies {shape}")
