"""Generated micro-kernel for a one-token quantized linear layer: ``y = x @ dequantize(codes, ...)``.

The schedule rule ``tensorir.schedule_rules.quantized`` marks a PrimFunc that is
exactly this product (no epilogue, one token, constant shape, float32 scales)
with ``MICRO_KERNEL_ATTR``; its loop nest stays the function's meaning (the
interpreter runs it), and the C emitter replaces the body by the kernel
generated here, with the same calling convention.

Why a separate generator: the loop nest multiplies each code by its scale and
adds its min. Here each parallel task sums ``x[r] * code[r, c]`` over one
32-row block into an L1-resident accumulator run (each weight row read as one
contiguous run of the task's columns, the next rows prefetched), then applies
``y += scale * acc + min * sum_r x[r]`` once per block and column. Codes widen
with the ISA's own zero/sign-extending loads. The shape is derived,
not sampled (in the spirit of Vortex): vector width from the instruction set
the compiler targets (``-march=native`` predefines: AVX-512 or AVX2 or SSE),
the unroll (vector steps per group) from the register count, the columns per parallel task from the
L1 data cache size the OS reports.
"""
from __future__ import annotations

import functools
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

MICRO_KERNEL_ATTR = "c.quantized_gemv"
BLOCK = 32                       # rows sharing a scale in every supported format
# Rows ahead whose run is prefetched (0: none). Consecutive rows are a whole weight width
# apart, so the hardware stream prefetcher restarts on every run; measured (shared 2-core
# machine, same process): 0 -> 8 rows ahead took 576x1536 from 2.4 to 5.2 GB/s and the
# LM head from 1.9 to 2.8-4.7 GB/s; 12 and 16 were no better.
PREFETCH_ROWS = 8
FORMATS = {"q4_0": (2, -8, False), "q4_1": (2, 0, True), "q8_0": (1, 0, False)}
# format -> (codes per byte, code offset, has a min)


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


def columns_per_task(cols: int, features: VectorFeatures) -> int:
    """About 16 tasks (load balance on a few cores), whole groups, at most 2048 columns, and
    the task's block accumulator and ``y`` run (8 bytes a column) within half of L1. Each
    weight row is read as one run of this many bytes: runs much shorter than a page cost a
    TLB miss each on a wide weight (the 49152-column LM head)."""
    group = features.group
    cap = max(group, min(2048, features.l1d_bytes // 2 // 8) // group * group)
    wanted = -(-cols // 16 // group) * group
    return max(group, min(cap, wanted))


_HELPERS = """#ifndef RS_QGEMV_HELPERS
#define RS_QGEMV_HELPERS
#include <immintrin.h>
typedef float rs_qf __attribute__((vector_size({vb})));
typedef int32_t rs_qi __attribute__((vector_size({vb})));
static inline rs_qf rs_qload_f(const float* p) {{ rs_qf v; memcpy(&v, p, sizeof v); return v; }}
static inline void rs_qstore_f(float* p, rs_qf v) {{ memcpy(p, &v, sizeof v); }}
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


@dataclass(frozen=True)
class ColumnEpilogue:
    """C text of the elementwise stages after the product, per output column: ``declarations``
    (pointers to the other inputs) at function scope, then ``statements`` reading the column
    ``rs_col`` and the product's value ``rs_prod``, leaving the stored value in ``result``."""
    declarations: tuple[str, ...]
    statements: tuple[str, ...]
    result: str


def gemv_source(symbol: str, fmt: str, rows: int, cols: int, roles: dict[str, int],
                features: VectorFeatures, epilogue: ColumnEpilogue | None = None) -> str:
    """C source of ``int32_t symbol(void* const* buffers, const int64_t* syms)`` computing
    ``y[c] = epilogue(sum_r x[r] * dequantize(codes)[r, c])``; ``roles`` maps
    codes/scale/min/x/y to the buffer's position. With an epilogue the product of a task's
    columns is kept in a stack run (``prod``) and each column passes through the epilogue
    once, after the last block: ``y`` is written once, in its final form."""
    if fmt not in FORMATS:
        raise ValueError(f"quantized gemv: unsupported format {fmt!r} (have {sorted(FORMATS)})")
    per_byte, offset, has_min = FORMATS[fmt]
    if rows % BLOCK or rows <= 0 or cols <= 0:
        raise ValueError(f"quantized gemv: {rows} x {cols} is not whole {BLOCK}-row blocks")
    lanes, units, group = features.lanes, features.accumulators, features.group
    tile = columns_per_task(cols, features)
    tasks = -(-cols // tile)
    code_t = "int8_t" if fmt == "q8_0" else "uint8_t"
    widen = "rs_qwiden_s8" if fmt == "q8_0" else "rs_qwiden_u8"
    byte_rows = BLOCK // per_byte       # rows of bytes per block

    def term(code: str, row: str) -> str:
        return f"xb[{row}] * (float)({code})"

    if per_byte == 2:
        vec_step = [f"const rs_qi v{u} = {widen}(p + c + {u * lanes});" for u in range(units)] + \
            [f"rs_qstore_f(acc + c - c0 + {u * lanes}, rs_qload_f(acc + c - c0 + {u * lanes})"
             f" + xl * __builtin_convertvector(v{u} & 15, rs_qf)"
             f" + xh * __builtin_convertvector(v{u} >> 4, rs_qf));"
             for u in range(units)]
        scalar_step = "acc[c - c0] += xl * (float)(p[c] & 15) + xh * (float)(p[c] >> 4);"
        xs = f"const float xl = xb[r], xh = xb[r + {byte_rows}];"
    else:
        vec_step = [f"rs_qstore_f(acc + c - c0 + {u * lanes}, rs_qload_f(acc + c - c0 + {u * lanes})"
                    f" + xl * __builtin_convertvector({widen}(p + c + {u * lanes}), rs_qf));"
                    for u in range(units)]
        scalar_step = "acc[c - c0] += xl * (float)p[c];"
        xs = "const float xl = xb[r];"
    # the block's sum of x weighs the min (q4_1) and the code offset (q4_0)
    shift = f" + (float)({offset}) * xsum[b]" if offset else ""
    out = "prod[c - c0]" if epilogue else "y[c]"
    update = (f"{out} += scale[mrow + c] * (acc[c - c0]" + shift + ")"
              + (" + mins[mrow + c] * xsum[b]" if has_min else "") + ";")
    operands = [f"  const {code_t}* restrict codes = (const {code_t}*)rs_buffers[{roles['codes']}];",
                f"  const float* restrict scale = (const float*)rs_buffers[{roles['scale']}];",
                f"  const float* restrict x = (const float*)rs_buffers[{roles['x']}];",
                f"  float* restrict y = (float*)rs_buffers[{roles['y']}];"]
    if has_min:
        operands.insert(2, f"  const float* restrict mins = (const float*)rs_buffers[{roles['min']}];")
    if epilogue:
        operands += [f"  {line}" for line in epilogue.declarations]
        finish = ["    for (int64_t rs_col = c0; rs_col < c1; ++rs_col) {",
                  "      const float rs_prod = prod[rs_col - c0];",
                  *(f"      {line}" for line in epilogue.statements),
                  f"      y[rs_col] = {epilogue.result};",
                  "    }"]
    else:
        finish = []
    ind = "\n" + " " * 10
    lines = [
        _HELPERS.format(vb=features.vector_bytes, widen=_WIDEN[features.name]),
        f"/* {fmt} gemv {rows} x {cols} for {features.name}: steps of {units} x {lanes} lanes, "
        f"{tile} columns per task */",
        f"int32_t {symbol}(void* const* rs_buffers, const int64_t* rs_syms) {{",
        *operands,
        "  (void)rs_syms;",
        f"  float xsum[{rows // BLOCK}];",
        f"  for (int64_t b = 0; b < {rows // BLOCK}; ++b) {{",
        "    float s = 0.0f;",
        f"    for (int64_t r = 0; r < {BLOCK}; ++r) s += x[b * {BLOCK} + r];",
        "    xsum[b] = s;",
        "  }",
        # one team for the whole call; static chunks: each thread streams its own columns,
        # reading each weight row as one run; the block's sums stay in L1 (acc)
        f"  #pragma omp parallel for schedule(static) if({tasks} > 1 && {rows * cols} >= 65536) "
        "num_threads(rs_threads())",
        f"  for (int64_t task = 0; task < {tasks}; ++task) {{",
        f"    float acc[{tile}] __attribute__((aligned(64)));",
        f"    const int64_t c0 = task * {tile};",
        f"    const int64_t c1 = c0 + {tile} < {cols} ? c0 + {tile} : {cols};",
        f"    const int64_t vec_end = c0 + (c1 - c0) / {group} * {group};",
        *([f"    float prod[{tile}] __attribute__((aligned(64)));"] if epilogue else []),
        f"    for (int64_t c = c0; c < c1; ++c) {out} = 0.0f;",
        f"    for (int64_t b = 0; b < {rows // BLOCK}; ++b) {{",
        f"      const float* xb = x + b * {BLOCK};",
        f"      const {code_t}* block = codes + b * {byte_rows * cols};",
        f"      const int64_t mrow = b * {cols};",
        "      for (int64_t c = c0; c < c1; ++c) acc[c - c0] = 0.0f;",
        f"      for (int64_t r = 0; r < {byte_rows}; ++r) {{",
        f"        const {code_t}* p = block + r * {cols};",
        f"        {xs}",
        f"        for (int64_t c = c0; c < vec_end; c += {group}) {{",
        *([f"          __builtin_prefetch(p + c + {PREFETCH_ROWS * cols});"] if PREFETCH_ROWS else []),
        "          " + ind.join(vec_step),
        "        }",
        f"        for (int64_t c = vec_end; c < c1; ++c) {scalar_step}",
        "      }",
        f"      for (int64_t c = c0; c < c1; ++c) {update}",
        "    }",
        *finish,
        "  }",
        "  return 0;",
        "}",
    ]
    return "\n".join(lines)
