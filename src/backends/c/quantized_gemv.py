"""Generated micro-kernel for a one-token quantized linear layer: ``y = x @ dequantize(codes, ...)``.

The schedule rule ``tensorir.schedule_rules.quantized`` marks a PrimFunc that is
exactly this product (no epilogue, one token, constant shape, float32 or float16 scales)
with ``MICRO_KERNEL_ATTR``; its loop nest stays the function's meaning (the
interpreter runs it), and the C emitter replaces the body by the kernel
generated here, with the same calling convention.

Why a separate generator: the loop nest multiplies each code by its scale and
adds its min. Here each thread of the team takes one contiguous run of whole
column groups and, for each 32-row block and each group of columns (a few
vector registers wide), sums ``x[r] * code[r, c]`` over the block's rows in
registers, then adds ``scale * sum + min * sum_r x[r]`` to its output run once
per block and column: per code, one widening, one conversion and one FMA, no
memory traffic but the codes. Codes widen with the ISA's own zero/sign-extending
loads. The shape is derived, not sampled (in the spirit of Vortex): vector width
from the instruction set the compiler targets (``-march=native`` predefines:
AVX-512 or AVX2 or SSE), the accumulators per group from the register count,
the columns per tile from the L1 data cache size the OS reports.
"""
from __future__ import annotations

import functools
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

MICRO_KERNEL_ATTR = "c.quantized_gemv"
BLOCK = 32                       # rows sharing a scale in every supported format
# Bytes ahead along a weight row whose cache line is prefetched, when rows are a page or more apart
PREFETCH_AHEAD_BYTES = 256
PAGE_BYTES = 4096
# Fewer weights than this run on one thread: a parallel region's start costs more than it saves
PARALLEL_MIN_WEIGHTS = 65536
FORMATS = {"q4_0": (2, -8, False), "q4_1": (2, 0, True), "q8_0": (1, 0, False)}
# format -> (codes per byte, code offset, has a min)
SCALE_DTYPES = ("float32", "float16")   # the scales' (and mins') dtype the kernels read


def generated_kernels_enabled() -> bool:
    """False when ``RELAXSCRIPT_GENERATED_KERNELS=0``: compile the scheduled loop nest instead
    (to compare the two; benchmarks/bench_quant.py does)."""
    return os.environ.get("RELAXSCRIPT_GENERATED_KERNELS", "1") != "0"


@dataclass(frozen=True)
class VectorFeatures:
    """What the generated code is shaped for: ``vector_bytes`` per register, ``registers`` of them."""
    name: str
    vector_bytes: int
    registers: int
    l1d_bytes: int

    @property
    def lanes(self) -> int:
        return self.vector_bytes // 4

    @property
    def accumulators(self) -> int:
        # a quarter of the registers: the rest hold codes, their conversions and x
        return max(2, min(8, self.registers // 4))

    @property
    def group(self) -> int:
        """Columns one register-blocked step covers."""
        return self.lanes * self.accumulators


AVX512 = ("avx512", 64, 32)
AVX2 = ("avx2", 32, 16)
SSE = ("sse", 16, 16)


def _l1d_bytes() -> int:
    """The OS's L1 data cache size of cpu0 (32 KiB when it does not say)."""
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    try:
        for index in sorted(base.glob("index*")):
            if (index / "level").read_text().strip() == "1" and \
                    (index / "type").read_text().strip() in ("Data", "Unified"):
                text = (index / "size").read_text().strip().upper()
                scale = {"K": 1 << 10, "M": 1 << 20}.get(text[-1:], 1)
                return int(text.rstrip("KM")) * scale
    except (OSError, ValueError):
        pass
    return 32 << 10


def avx512_regions_enabled() -> bool:
    """False when ``RELAXSCRIPT_GEMV_AVX512=0``: the generated GEMVs carry no AVX-512 regions (the
    q8_0 VNNI walk, the 512-bit q4 row walk) and AVX-512 machines run the AVX2 ones, as when the
    source is compiled with ``-DRS_Q_NO_AVX512``."""
    return os.environ.get("RELAXSCRIPT_GEMV_AVX512", "1") != "0"


def features_from_macros(macros: str, l1d_bytes: int = 32 << 10) -> VectorFeatures:
    """The vector features a compiler's predefined macros (``gcc -dM -E``) announce."""
    defined = {line.split()[1] for line in macros.splitlines() if line.startswith("#define ")}
    if "__AVX512F__" in defined:
        kind = AVX512
    elif "__AVX2__" in defined and "__FMA__" in defined:
        kind = AVX2
    else:
        kind = SSE
    return VectorFeatures(*kind, l1d_bytes)


@functools.lru_cache(maxsize=None)
def detect_features(march: str = "native") -> VectorFeatures:
    """Features of the code gcc generates with ``-march=<march>`` (the C backend uses native)."""
    from .compiler import CompileError, find_compiler
    try:
        macros = subprocess.run([find_compiler(), f"-march={march}", "-dM", "-E", "-x", "c", "-"],
                                input="", capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as err:
        raise CompileError(f"cannot ask the C compiler for -march={march}'s features: {err}") from err
    return features_from_macros(macros, _l1d_bytes())


_HELPERS = """#ifndef RS_QGEMV_HELPERS
#define RS_QGEMV_HELPERS
#include <immintrin.h>
#include <math.h>
typedef float rs_qf __attribute__((vector_size({vb})));
typedef int32_t rs_qi __attribute__((vector_size({vb})));
static inline rs_qf rs_qload_f(const float* p) {{ rs_qf v; memcpy(&v, p, sizeof v); return v; }}
static inline void rs_qstore_f(float* p, rs_qf v) {{ memcpy(p, &v, sizeof v); }}
static inline rs_qf rs_qsplat(float v) {{ return (rs_qf){{{splat}}}; }}
#ifdef _OPENMP
#include <omp.h>
#define RS_QTEAM omp_get_num_threads()
#define RS_QME omp_get_thread_num()
#else
#define RS_QTEAM 1
#define RS_QME 0
#endif
{widen}
#endif
"""

# Codes to 32-bit lanes. gcc 12 scalarizes __builtin_convertvector from an 8-byte vector
# (one lane at a time through general registers), so the widening load is the ISA's own.
_WIDEN = {
    "avx512": """static inline rs_qi rs_qwiden_u8(const void* p) {
  return (rs_qi)_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)p)); }
static inline rs_qi rs_qwiden_s8(const void* p) {
  return (rs_qi)_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)p)); }""",
    "avx2": """static inline rs_qi rs_qwiden_u8(const void* p) {
  return (rs_qi)_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)p)); }
static inline rs_qi rs_qwiden_s8(const void* p) {
  return (rs_qi)_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)p)); }""",
    "sse": """static inline rs_qi rs_qwiden_u8(const void* p) {
  const uint8_t* b = (const uint8_t*)p; return (rs_qi){b[0], b[1], b[2], b[3]}; }
static inline rs_qi rs_qwiden_s8(const void* p) {
  const int8_t* b = (const int8_t*)p; return (rs_qi){b[0], b[1], b[2], b[3]}; }""",
}


# float16 scales (GGUF's own, 2 bytes a block and column instead of 4) widened as they are loaded:
# F16C's vcvtph2ps where the compiler targets it, else the prelude's exact bit conversion
# rs_half_to_float (``RS_Q_NO_F16C`` forces it; the tests build both). Emitted only by kernels with
# float16 scales, so that float32-only sources need no rs_half_to_float.
_HALF_HELPERS = """#ifndef RS_QGEMV_HALF_HELPERS
#define RS_QGEMV_HALF_HELPERS
#if {guard} && !defined(RS_Q_NO_F16C)
#define RS_Q_F16C 1
#endif
typedef uint32_t rs_qu __attribute__((vector_size({vb})));
static inline rs_qf rs_qload_h(const uint16_t* p) {{
#ifdef RS_Q_F16C
  const {wide} w = {convert}; rs_qf v; memcpy(&v, &w, sizeof v); return v;
#else
  /* rs_half_to_float's steps on whole vectors (casts between same-size vectors keep the bits) */
  rs_qu h; for (int i = 0; i < {lanes}; ++i) h[i] = p[i];
  const rs_qu rest = (h & 0x7fffu) << 13;
  const rs_qf magnitude = (rs_qf)rest * 0x1p112f;
  const rs_qu special = (rs_qu)((h & 0x7c00u) == 0x7c00u);
  return (rs_qf)(((rs_qu)magnitude & ~special) | ((rest | 0x7f800000u) & special) | ((h & 0x8000u) << 16));
#endif
}}
#ifdef __AVX2__
/* rs_half_to_float's steps on 8 lanes at once: a loop of 8 calls to it gave wrong row-walk sums
   with gcc 12 -O3 -march=native on AVX-512 (right at -O2, with -fno-tree-vectorize and with
   -march=haswell; UBSan silent) */
static inline __m256 rs_qload8_h(const uint16_t* p) {{
#if defined(__F16C__) && !defined(RS_Q_NO_F16C)
  return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)p));
#else
  const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)p));
  const __m256i rest = _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(0x7fff)), 13);
  const __m256 magnitude = _mm256_mul_ps(_mm256_castsi256_ps(rest), _mm256_set1_ps(0x1p112f));
  const __m256i special = _mm256_cmpeq_epi32(_mm256_and_si256(h, _mm256_set1_epi32(0x7c00)),
                                             _mm256_set1_epi32(0x7c00));
  const __m256i bits = _mm256_blendv_epi8(_mm256_castps_si256(magnitude),
                                          _mm256_or_si256(rest, _mm256_set1_epi32(0x7f800000)), special);
  const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(0x8000)), 16);
  return _mm256_castsi256_ps(_mm256_or_si256(bits, sign));
#endif
}}
#endif
#endif
"""
_HALF_WIDEN = {   # kind -> (guard, float vector, conversion of 'lanes' halves at p)
    "avx512": ("defined(__F16C__) && defined(__AVX512F__)", "__m512",
               "_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)p))"),
    "avx2": ("defined(__F16C__) && defined(__AVX__)", "__m256", "_mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)p))"),
    "sse": ("defined(__F16C__)", "__m128", "_mm_cvtph_ps(_mm_loadl_epi64((const __m128i*)p))"),
}


@dataclass(frozen=True)
class ScaleLoads:
    """How a kernel reads its scales and mins: float32, or float16 widened as loaded (exact, so
    the dequantized weights are the same as with the widened float32 arrays)."""
    dtype: str = "float32"

    def __post_init__(self):
        if self.dtype not in SCALE_DTYPES:
            raise ValueError(f"quantized kernels: scales are {' or '.join(SCALE_DTYPES)}, not {self.dtype!r}")

    @property
    def half(self) -> bool:
        return self.dtype == "float16"

    @property
    def c_type(self) -> str:
        return "uint16_t" if self.half else "float"

    def vector(self, address: str) -> str:
        """An ``rs_qf`` of the scales at ``address``."""
        return f"rs_qload_{'h' if self.half else 'f'}({address})"

    def avx8(self, address: str) -> str:
        """An ``__m256`` of the 8 scales at ``address`` (AVX2 regions)."""
        return f"rs_qload8_h({address})" if self.half else f"_mm256_loadu_ps({address})"

    def avx16(self, address: str) -> str:
        """An ``__m512`` of the 16 scales at ``address`` (AVX-512 regions): two of ``avx8``'s loads.
        ``rs_qload_h``'s portable 16-lane conversion summed wrongly inside the 512-bit row walk at
        gcc 12 -O3 (``-DRS_Q_NO_F16C``; like the loop the float16 section of docs/ARCHITECTURE.md
        describes); ``rs_qload8_h``'s intrinsics do not."""
        if not self.half:
            return f"_mm512_loadu_ps({address})"
        return (f"_mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd("
                f"{self.avx8(address)})), _mm256_castps_pd({self.avx8(f'({address}) + 8')}), 1))")

    def scalar(self, element: str) -> str:
        """The float of one scale ``element`` (a C lvalue)."""
        return f"rs_half_to_float({element})" if self.half else element

    def helpers(self, features: VectorFeatures) -> str:
        """C text the loads need after ``_HELPERS`` (nothing for float32)."""
        if not self.half:
            return ""
        guard, wide, convert = _HALF_WIDEN[features.name]
        return _HALF_HELPERS.format(guard=guard, wide=wide, convert=convert, lanes=features.lanes,
                                    vb=features.vector_bytes)


FLOAT32_SCALES = ScaleLoads()


@dataclass(frozen=True)
class ColumnEpilogue:
    """C text of the elementwise stages after the product, per output column: ``declarations``
    (pointers to the other inputs) at function scope, then ``statements`` reading the column
    ``rs_col`` and the product's value ``rs_prod``, leaving the stored value in ``result``."""
    declarations: tuple[str, ...]
    statements: tuple[str, ...]
    result: str


def columns_per_tile(cols: int, group: int, l1d_bytes: int) -> int:
    """Columns a thread works on at a time: whole groups, at most 2048, and its output run
    (4 bytes a column, with an epilogue's product run as many again) within a quarter of
    L1, so that one block's rows of the tile (16 or 32 short runs, read group by group)
    stay in L1 beside it. Each weight row is read as one run of this many codes: runs
    much shorter than a page cost a TLB miss each on a wide weight (the LM head)."""
    cap = max(group, min(2048, l1d_bytes // 4 // 8) // group * group)
    return max(group, min(cap, -(-cols // group) * group))


def gemv_source(symbol: str, fmt: str, rows: int, cols: int, roles: dict[str, int],
                features: VectorFeatures, epilogue: ColumnEpilogue | None = None,
                activations: str | None = None, scale_dtype: str = "float32", pair: bool = False) -> str:
    """C source of ``int32_t symbol(void* const* buffers, const int64_t* syms)`` computing
    ``y[c] = epilogue(sum_r x[r] * dequantize(codes)[r, c])``; ``roles`` maps
    codes/scale/min/x/y to the buffer's position; ``scale_dtype`` is the scales' and mins'
    (float16: read as their bits and widened as loaded, ``ScaleLoads``).

    Each thread of the team takes a contiguous run of whole column groups (the ragged
    columns go to the last one) and walks it a tile at a time; for each 32-row block and
    each group of ``accumulators x lanes`` columns it sums ``x[r] * code[r, c]`` over the
    block's rows in registers, then adds ``scale * sum (+ min * sum(x_block))`` to the
    tile's output run. With an epilogue the product of a tile is kept in a stack run
    (``prod``) and each column passes through the epilogue once: ``y`` is written once,
    in its final form.

    ``activations="q8_0"``: the function is ``x``'s ``fake_quantize`` then the product. The
    kernel rounds ``x`` to codes once per call and, where the compiler targets AVX2, uses
    integer dot products (``quantized_gemv_int8``); elsewhere the float kernel below runs on
    the rounded values.

    ``pair``: ``cols`` is two halves of ``N = cols / 2`` columns (gate and up joined along the
    output axis) and ``y`` has ``N``: the epilogue reads column ``c`` of each half, ``rs_prod``
    and ``rs_prod_hi``, and writes ``y[c]``. The row walks, whose partial rows every thread can
    read after their barrier, sum both halves of a column in the same thread and run the
    epilogue there (one launch for both products); the column-split kernels compute the whole
    product into a scratch row first and apply the epilogue in a pass after it."""
    from .quantized_gemv_int8 import (ACTIVATION_FORMATS, activation_codes_c, group_of, int8_dot_enabled,
                                      int8_region_c)
    from .quantized_gemv_rows import (WIDE_GROUP, WIDE_GUARD, fits_row_walk, row_walk_enabled, rows_region_c,
                                      rows_region_wide_c)
    from .quantized_gemv_rows_q8 import VNNI_GUARD, q8_rows_region_c, q8_vnni_region_c
    if activations is not None and activations not in ACTIVATION_FORMATS:
        raise ValueError(f"quantized gemv: unsupported activation format {activations!r} "
                         f"(have {list(ACTIVATION_FORMATS)})")
    if fmt not in FORMATS:
        raise ValueError(f"quantized gemv: unsupported format {fmt!r} (have {sorted(FORMATS)})")
    per_byte, offset, has_min = FORMATS[fmt]
    if rows % BLOCK or rows <= 0 or cols <= 0:
        raise ValueError(f"quantized gemv: {rows} x {cols} is not whole {BLOCK}-row blocks")
    if pair and (epilogue is None or cols % 2):
        raise ValueError(f"quantized gemv: a pair epilogue needs an epilogue and an even column count, not {cols}")
    pair_epilogue, epilogue = (epilogue, None) if pair else (None, epilogue)
    scales = ScaleLoads(scale_dtype)
    lanes = features.lanes
    units = features.accumulators * (2 if per_byte == 1 else 1)
    group = lanes * units
    tile = columns_per_tile(cols, group, features.l1d_bytes)
    blocks = rows // BLOCK
    code_t = "int8_t" if fmt == "q8_0" else "uint8_t"
    widen = "rs_qwiden_s8" if fmt == "q8_0" else "rs_qwiden_u8"
    byte_rows = BLOCK // per_byte       # rows of bytes per block
    out = "prod[c - t0{}]" if epilogue else "y[c{}]"

    def at(k: int) -> str:
        return out.format(f" + {k}" if k else "")

    # two accumulator sets, so that each register's chain of dependent FMAs is half as
    # long (a chain of one FMA per row and set waits on the FMA latency, not the ports):
    # q4 sums the low and the high nibbles' rows apart; q8 walks twice the columns (a
    # whole cache line of codes per row on AVX2)
    if per_byte == 2:
        xs = [f"const rs_qf xl = rs_qsplat(xb[r]), xh = rs_qsplat(xb[r + {byte_rows}]);"]
        body = [f"const rs_qi v{u} = {widen}(p + {u * lanes});" for u in range(units)] + \
            [line for u in range(units) for line in
             (f"a{u} += xl * __builtin_convertvector(v{u} & 15, rs_qf);",
              f"h{u} += xh * __builtin_convertvector(v{u} >> 4, rs_qf);")]
        scalar = "a += xb[r] * (float)(p[0] & 15) + xb[r + %d] * (float)(p[0] >> 4);" % byte_rows
        sums = [f"(a{u} + h{u})" for u in range(units)]
        zero = ["a", "h"]
    else:
        xs = ["const rs_qf xl = rs_qsplat(xb[r]);"]
        body = [f"a{u} += xl * __builtin_convertvector({widen}(p + {u * lanes}), rs_qf);"
                for u in range(units)]
        scalar = "a += xb[r] * (float)p[0];"
        sums = [f"a{u}" for u in range(units)]
        zero = ["a"]
    # software prefetch, one per cache line of codes and row: rows a page or more apart are
    # separate streams, fetched along the row; nearer rows make one region per block, and
    # the next block's region follows it (measured, one thread: 576x1536 q4_1 7.2 -> 9.8
    # GB/s with the next block's lines, LM head 49152 columns q8_0 11.2 -> 12.2 along the row)
    target = f"p + {PREFETCH_AHEAD_BYTES}" if cols >= PAGE_BYTES else f"p + {byte_rows * cols}"
    body.insert(0, f"if ((c & 63) < {group}) __builtin_prefetch({target}, 0, 3);")
    # the block's sum of x weighs the min (q4_1) and the code offset (q4_0)
    shift = f" + rs_qsplat({float(offset)}f * xs)" if offset else ""
    vec_update = [f"rs_qstore_f(&{at(u * lanes)}, rs_qload_f(&{at(u * lanes)})"
                  f" + {scales.vector(f'sb + c + {u * lanes}')} * ({sums[u]}{shift})"
                  + (f" + {scales.vector(f'mb + c + {u * lanes}')} * rs_qsplat(xs)" if has_min else "") + ");"
                  for u in range(units)]
    scalar_update = (f"{at(0)} += {scales.scalar('sb[c]')} * (a" + (f" + {float(offset)}f * xs" if offset else "")
                     + ")" + (f" + {scales.scalar('mb[c]')} * xs" if has_min else "") + ";")
    scale_t = scales.c_type
    operands = [f"  const {code_t}* restrict codes = (const {code_t}*)rs_buffers[{roles['codes']}];",
                f"  const {scale_t}* restrict scale = (const {scale_t}*)rs_buffers[{roles['scale']}];",
                f"  const float* restrict {'x_in' if activations else 'x'} = (const float*)rs_buffers[{roles['x']}];",
                f"  float* restrict y = (float*)rs_buffers[{roles['y']}];"]
    if has_min:
        operands.insert(2, f"  const {scale_t}* restrict mins = (const {scale_t}*)rs_buffers[{roles['min']}];")
    half = cols // 2
    if pair:
        # y is the row walk's output or the other kernels' scratch product (pair_region)
        operands[-1] = f"  float* restrict rs_out = (float*)rs_buffers[{roles['y']}];"
        operands += [f"  {line}" for line in pair_epilogue.declarations]
        pair_finish = ["      for (int64_t rs_col = t0; rs_col < t1; ++rs_col) {",
                       "        const float rs_prod = prod[rs_col - t0], rs_prod_hi = prod_hi[rs_col - t0];",
                       *(f"        {line}" for line in pair_epilogue.statements),
                       f"        y[rs_col] = {pair_epilogue.result};",
                       "      }"]

        def pair_region(region: list[str]) -> list[str]:
            # the whole product into a scratch row, then the epilogue per column pair
            return [f"  float* restrict y = (float*)malloc(sizeof(float) * {cols});",
                    "  if (y == NULL) return STATUS_NO_MEMORY;",
                    *region,
                    f"  for (int64_t rs_col = 0; rs_col < {half}; ++rs_col) {{",
                    f"    const float rs_prod = y[rs_col], rs_prod_hi = y[rs_col + {half}];",
                    *(f"    {line}" for line in pair_epilogue.statements),
                    f"    rs_out[rs_col] = {pair_epilogue.result};",
                    "  }",
                    "  free(y);"]
    else:
        pair_finish = []

        def pair_region(region: list[str]) -> list[str]:
            return region
    if epilogue:
        operands += [f"  {line}" for line in epilogue.declarations]
        finish = ["      for (int64_t rs_col = t0; rs_col < t1; ++rs_col) {",
                  "        const float rs_prod = prod[rs_col - t0];",
                  *(f"        {line}" for line in epilogue.statements),
                  f"        y[rs_col] = {epilogue.result};",
                  "      }"]
    else:
        finish = []
    ind = "\n" + " " * 14
    lines = [
        _HELPERS.format(vb=features.vector_bytes, widen=_WIDEN[features.name],
                        splat=", ".join(["v"] * features.lanes)),
        scales.helpers(features),
        f"/* {fmt} gemv {rows} x {cols} for {features.name}: groups of {units} x {lanes} lanes, "
        f"tiles of {tile} columns{f', pair epilogue over 2 x {half} columns' if pair else ''}"
        f"{', float16 scales' if scales.half else ''} */",
        *([f"/* activations rounded to {activations} codes in the kernel */"] if activations else []),
        f"int32_t {symbol}(void* const* rs_buffers, const int64_t* rs_syms) {{",
        *operands,
        "  (void)rs_syms;",
    ]
    float_body = [
        f"  float xsum[{blocks}];",
        f"  for (int64_t b = 0; b < {blocks}; ++b) {{",
        "    float s = 0.0f;",
        f"    for (int64_t r = 0; r < {BLOCK}; ++r) s += x[b * {BLOCK} + r];",
        "    xsum[b] = s;",
        "  }",
        # one region per call; each thread's columns are one contiguous run of whole groups,
        # split at run time by the team's actual size (no idle thread at a ragged task count)
        f"  #pragma omp parallel if({rows * cols} >= {PARALLEL_MIN_WEIGHTS}) num_threads(rs_threads())",
        "  {",
        "    const int64_t team = RS_QTEAM, me = RS_QME;",
        f"    const int64_t c_begin = {cols // group} * me / team * {group};",
        f"    const int64_t c_end = me == team - 1 ? {cols} : {cols // group} * (me + 1) / team * {group};",
        *([f"    float prod[{tile}] __attribute__((aligned(64)));"] if epilogue else []),
        f"    for (int64_t t0 = c_begin; t0 < c_end; t0 += {tile}) {{",
        f"      const int64_t t1 = t0 + {tile} < c_end ? t0 + {tile} : c_end;",
        f"      const int64_t vec_end = t0 + (t1 - t0) / {group} * {group};",
        f"      for (int64_t c = t0; c < t1; ++c) {at(0)} = 0.0f;",
        f"      for (int64_t b = 0; b < {blocks}; ++b) {{",
        f"        const float* xb = x + b * {BLOCK};",
        "        const float xs = xsum[b];",
        f"        const {code_t}* block = codes + b * {byte_rows * cols};",
        f"        const {scale_t}* sb = scale + b * {cols};",
        *([f"        const {scale_t}* mb = mins + b * {cols};"] if has_min else []),
        f"        for (int64_t c = t0; c < vec_end; c += {group}) {{",
        "          " + " ".join(f"rs_qf {z}{u} = {{0}};" for u in range(units) for z in zero),
        f"          #pragma GCC unroll {byte_rows}",
        f"          for (int64_t r = 0; r < {byte_rows}; ++r) {{",
        f"            const {code_t}* p = block + r * {cols} + c;",
        *(f"            {line}" for line in xs),
        "            " + ind[:-2].join(body),
        "          }",
        "          " + ind[:-4].join(vec_update),
        "        }",
        "        for (int64_t c = vec_end; c < t1; ++c) {",
        "          float a = 0.0f;",
        f"          for (int64_t r = 0; r < {byte_rows}; ++r) {{",
        f"            const {code_t}* p = block + r * {cols} + c;",
        f"            {scalar}",
        "          }",
        f"          {scalar_update}",
        "        }",
        "      }",
        *finish,
        "    }",
        "  }",
    ]
    if activations is None:
        kernel = pair_region(float_body)
    else:
        rounded = activation_codes_c(rows, "x_in") + ["  const float* restrict x = xq;"]
        if int8_dot_enabled() and features.name in ("avx2", "avx512"):
            int8_tile = columns_per_tile(cols, group_of(fmt), features.l1d_bytes)
            # a pair too wide for one walk over its row (a 32 KiB L1) walks each block's halves in turn
            split = pair and not fits_row_walk(cols, features.l1d_bytes) and fits_row_walk(half, features.l1d_bytes)
            if fmt != "q8_0" and (fits_row_walk(cols, features.l1d_bytes) or split) and row_walk_enabled():
                # the row walk rounds each block in the thread that reads it
                walk = {"pair": half if pair else 0, "scales": scales, **({"split": True} if split else {})}
                ends = pair_finish if pair else finish
                region = rows_region_c(fmt, rows, cols, PARALLEL_MIN_WEIGHTS, epilogue is not None or pair, ends,
                                       int8_tile, **walk)
                wide = []
                if features.name == "avx512" and (half if split else cols) >= WIDE_GROUP and avx512_regions_enabled():
                    wide = [f"#if {WIDE_GUARD}",
                            *(["  float* restrict y = rs_out;"] if pair else []),
                            *rows_region_wide_c(fmt, rows, cols, PARALLEL_MIN_WEIGHTS, epilogue is not None or pair,
                                                ends, int8_tile, **walk), "#elif defined(__AVX2__)"]
                kernel = [*(wide or ["#ifdef __AVX2__"]), *(["  float* restrict y = rs_out;"] if pair else []),
                          *region, "#else", *pair_region([*rounded, *float_body]), "#endif"]
            else:
                vnni = []
                if fmt == "q8_0" and row_walk_enabled():
                    region = q8_rows_region_c(rows, cols, PARALLEL_MIN_WEIGHTS, epilogue is not None, finish,
                                              scales)
                    if features.name == "avx512" and avx512_regions_enabled():
                        vnni = [f"#if {VNNI_GUARD}",
                                *q8_vnni_region_c(rows, cols, PARALLEL_MIN_WEIGHTS, epilogue is not None, finish,
                                                  scales), "#elif defined(__AVX2__)"]
                else:
                    region = int8_region_c(fmt, rows, cols, int8_tile, PARALLEL_MIN_WEIGHTS, epilogue is not None,
                                           finish, scales)
                kernel = pair_region([*rounded, *(vnni or ["#ifdef __AVX2__"]), *region, "#else", *float_body,
                                      "#endif"])
        else:
            kernel = pair_region([*rounded, *float_body])
    return "\n".join([*lines, *kernel, "  return 0;", "}"])
