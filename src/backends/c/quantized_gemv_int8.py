"""Integer dot products for the one-token quantized GEMV when its input is rounded to 8-bit
codes (``matmul(fake_quantize(x), dequantize(codes...))``; meaning of the rounding:
``relaxscript.quantization.activations``).

``quantized_gemv.gemv_source(..., activations="q8_0")`` calls ``activation_codes_c`` once per
call (codes ``qx``, per-block scale ``dx`` and code sum ``qsum``, and the rounded values ``xq``
for the float fallback), then, under ``#ifdef __AVX2__``, the parallel region written here;
without AVX2 the float kernel runs on ``xq`` (the same sum up to float rounding).

Why integer: the float kernel widens each code, converts it and does one FMA per weight and
was compute-bound at 10-12 GB/s. Here a weight costs about a sixth of an instruction:

- q4_0 / q4_1 (unsigned 4-bit codes; byte row ``r`` of a block holds rows ``r`` and ``r + 16``
  of 32 adjacent columns): one 32-byte load, its low and high nibbles interleaved per column
  (``unpack``), and ``maddubs`` against the broadcast pair ``(qx[r], qx[r + 16])`` gives one
  16-bit sum of two products per column. Eight rows accumulate in 16 bits (|sum| <= 8 * 2 *
  15 * 127 = 30480 < 32767), so a block keeps two such sets; they widen to 32 bits once per
  block. ``y += d_w * d_x * S + m_w * d_x * sum(qx)`` (q4_1) or ``d_w * d_x * (S - 8 sum(qx))``
  (q4_0).
- q8_0 (signed codes, so no ``maddubs``): two rows' codes widen to 16 bits, interleave per
  column, and ``madd`` against the pair ``(qx[2i], qx[2i + 1])`` sums them into 32 bits.

Lanes come out of the unpacks in a fixed column order (128-bit halves), undone per block.
"""
from __future__ import annotations

import os

from .quantized_gemv import BLOCK, FLOAT32_SCALES, PAGE_BYTES, PREFETCH_AHEAD_BYTES, ScaleLoads

GROUP = 32                      # q4 columns per register-blocked step: one 32-byte row of codes
# q8_0 columns per step: a whole cache line of each row. With rows a multiple of 4 KiB apart (the
# 49152-column LM head) a block's 32 rows share one L1 set; reading half lines, the second
# half was evicted before its turn (measured one thread: 3.6 ms against the float kernel's 2.9)
Q8_GROUP = 64
ACTIVATION_FORMATS = ("q8_0",)


def int8_dot_enabled() -> bool:
    """False when ``RELAXSCRIPT_INT8_DOT=0``: emit only the float path on the rounded input (the
    fallback a machine without AVX2 runs; tests compare the two)."""
    return os.environ.get("RELAXSCRIPT_INT8_DOT", "1") != "0"


def group_of(fmt: str) -> int:
    """Columns one register-blocked step of the integer kernel covers."""
    return Q8_GROUP if fmt == "q8_0" else GROUP


def block_rounding_c(xb: str, store: str, indent: str) -> list[str]:
    """C lines rounding the 32 values at ``xb`` to their codes exactly as the op defines them
    (float32 ops; ``nearbyintf`` is round-half-even in the default rounding mode): declare the
    block's scale ``d`` and code sum ``s``, and run ``store`` (a statement reading ``r`` and the
    code ``q``, a float) for each value."""
    return [indent + line for line in (
        # a NaN is kept as the max (``a != a``) and a non-finite value's code is 0, so a block holding
        # NaN or inf has codes 0 and scale NaN or inf: its values are NaN (casting NaN to int is
        # undefined in C: it gave a finite garbage code)
        "float amax = 0.0f;",
        f"for (int64_t r = 0; r < {BLOCK}; ++r) {{",
        f"  const float a = fabsf({xb}[r]); amax = (a > amax || a != a) ? a : amax;",
        "}",
        "const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;",
        "const float d = amax * (1.0f / 127.0f);",
        "int32_t s = 0;",
        f"for (int64_t r = 0; r < {BLOCK}; ++r) {{",
        f"  const float v = {xb}[r] * inv;",
        "  const float q = v - v == 0.0f ? nearbyintf(v) : 0.0f;",
        f"  {store} s += (int32_t)q;",
        "}")]


def activation_codes_c(rows: int, x_pointer: str) -> list[str]:
    """C lines computing the input's codes ``qx``, per-block scale ``dx`` and code sum ``qsum``,
    and the rounded values ``xq`` (for the float kernel)."""
    blocks = rows // BLOCK
    return [
        f"  int8_t qx[{rows}] __attribute__((aligned(32)));",
        f"  float xq[{rows}] __attribute__((aligned(32)));",
        f"  float dx[{blocks}];",
        f"  int32_t qsum[{blocks}];",
        f"  for (int64_t b = 0; b < {blocks}; ++b) {{",
        f"    const float* xb = {x_pointer} + b * {BLOCK};",
        *block_rounding_c("xb", f"qx[b * {BLOCK} + r] = (int8_t)q; xq[b * {BLOCK} + r] = q * d;", "    "),
        "    dx[b] = d; qsum[b] = s;",
        "  }",
    ]


def round_rows_c(row_count: str, width: int, source: str, target: str) -> list[str]:
    """C lines writing ``target[i, :]`` = ``source[i, :]`` rounded to its 8-bit codes' values (the
    op's meaning, as ``activation_codes_c``) for ``row_count`` rows of ``width`` values: the
    several-token GEMM's input, rounded once per call before its float micro-kernel."""
    return [
        f"  #pragma omp parallel for schedule(static) if({row_count} * {width} >= 65536) num_threads(rs_threads())",
        f"  for (int64_t rs_block = 0; rs_block < {row_count} * {width // BLOCK}; ++rs_block) {{",
        f"    const float* xb = {source} + rs_block * {BLOCK};",
        f"    float* qb = {target} + rs_block * {BLOCK};",
        "    float amax = 0.0f;",     # NaN kept, as block_rounding_c
        f"    for (int r = 0; r < {BLOCK}; ++r) {{",
        "      const float a = fabsf(xb[r]); amax = (a > amax || a != a) ? a : amax;",
        "    }",
        "    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;",
        "    const float d = amax * (1.0f / 127.0f);",
        f"    for (int r = 0; r < {BLOCK}; ++r) {{ const float v = xb[r] * inv; "
        "qb[r] = (v - v == 0.0f ? nearbyintf(v) : 0.0f) * d; }",
        "  }",
    ]


def widen_rows(address: str) -> str:
    """16 signed codes at ``address`` as 16-bit lanes."""
    return f"_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i*)({address})))"


def accumulate(total: str, unpack: str, even: str, odd: str) -> str:
    """``total`` plus the two rows' interleaved codes times the broadcast code pair ``xv``."""
    return f"_mm256_add_epi32({total}, _mm256_madd_epi16(_mm256_{unpack}_epi16({even}, {odd}), xv))"


def widened_sums_c(a0: str, a1: str, b0: str, b1: str, indent: str) -> list[str]:
    """C lines declaring ``__m256i sum[4]``: the 32 columns' 32-bit sums of two pairs of 16-bit
    accumulators (rows 0-7 in a0/a1, 8-15 in b0/b1; columns 0-7 | 16-23 in a0/b0, 8-15 | 24-31
    in a1/b1), widened before adding so 16 rows of products cannot overflow 16 bits."""
    def widened(half: str, x: str) -> str:
        return f"_mm256_cvtepi16_epi32({half.format(x)})"
    low, high = "_mm256_castsi256_si128({})", "_mm256_extracti128_si256({}, 1)"
    pairs = [(low, a0, b0), (low, a1, b1), (high, a0, b0), (high, a1, b1)]
    lines = [f"{indent}const __m256i sum[4] = {{"]
    for i, (half, a, b) in enumerate(pairs):
        lines.append(f"{indent}  _mm256_add_epi32({widened(half, a)}, {widened(half, b)})"
                     + ("};" if i == 3 else ","))
    return lines


def int8_region_c(fmt: str, rows: int, cols: int, tile: int, parallel_min: int,
                  has_epilogue: bool, finish: list[str], scales: ScaleLoads = FLOAT32_SCALES) -> list[str]:
    """The AVX2 parallel region (column runs per thread, tiles, blocks, 32-column steps); the
    scales (and mins) read as ``scales`` says."""
    blocks = rows // BLOCK
    group = group_of(fmt)
    out = "prod[c - t0{}]" if has_epilogue else "y[c{}]"

    def at(k) -> str:
        return out.format(f" + {k}" if k else "")

    if fmt == "q8_0":
        pairs = [f"  int32_t xpair[{blocks * 16}];",
                 f"  for (int64_t i = 0; i < {blocks * 16}; ++i)",
                 "    xpair[i] = (int32_t)((uint32_t)(uint16_t)(int16_t)qx[2 * i]"
                 " | ((uint32_t)(uint16_t)(int16_t)qx[2 * i + 1] << 16));"]
        byte_rows = BLOCK
        pieces = Q8_GROUP // 16      # 16 columns of codes widen to one register of 16-bit lanes
        steps = [
            "          __m256i " + ", ".join(f"s{i} = _mm256_setzero_si256()" for i in range(2 * pieces)) + ";",
            "          #pragma GCC unroll 16",
            "          for (int64_t r = 0; r < 16; ++r) {",
            f"            const int8_t* p = block + 2 * r * {cols} + c;",
            "            PREFETCH",
            "            const __m256i xv = _mm256_set1_epi32(xp[r]);",
        ]
        for i in range(pieces):
            even, odd = f"e{i}", f"o{i}"
            steps += [
                f"            const __m256i {even} = {widen_rows(f'p + {16 * i}')};",
                f"            const __m256i {odd} = {widen_rows(f'p + {cols + 16 * i}')};",
                f"            s{2 * i} = {accumulate(f's{2 * i}', 'unpacklo', even, odd)};",
                f"            s{2 * i + 1} = {accumulate(f's{2 * i + 1}', 'unpackhi', even, odd)};"]
        # piece i's lanes hold columns (16i + 0-3 | 16i + 8-11) in s2i and (16i + 4-7 | 16i + 12-15) in s2i+1
        steps += ["          }",
                  "          const __m256i sum[%d] = {%s};" % (2 * pieces, ", ".join(
                      f"_mm256_permute2x128_si256(s{2 * i}, s{2 * i + 1}, {mask})"
                      for i in range(pieces) for mask in ("0x20", "0x31")))]
        scalar = ["          int32_t s = 0;",
                  f"          for (int64_t r = 0; r < {BLOCK}; ++r)",
                  f"            s += (int32_t)block[r * {cols} + c] * qx[b * {BLOCK} + r];"]
        xp_decl = "        const int32_t* xp = xpair + b * 16;"
    else:
        pairs = [f"  int16_t xpair[{blocks * 16}];",
                 f"  for (int64_t b = 0; b < {blocks}; ++b)",
                 "    for (int64_t r = 0; r < 16; ++r)",
                 f"      xpair[b * 16 + r] = (int16_t)((uint16_t)(uint8_t)qx[b * {BLOCK} + r]"
                 f" | ((uint16_t)(uint8_t)qx[b * {BLOCK} + r + 16] << 8));"]
        byte_rows = BLOCK // 2
        half = ["            const uint8_t* p = block + r * {cols} + c;".format(cols=cols),
                "            PREFETCH",
                "            const __m256i v = _mm256_loadu_si256((const __m256i*)p);",
                "            const __m256i lo = _mm256_and_si256(v, rs_m4), "
                "hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), rs_m4);",
                "            const __m256i xv = _mm256_set1_epi16(xp[r]);"]
        steps = [
            # rows 0-7 and 8-15 of the byte rows sum apart: eight pairs fit 16 bits
            "          __m256i a0 = _mm256_setzero_si256(), a1 = a0, b0 = a0, b1 = a0;",
            "          #pragma GCC unroll 8",
            "          for (int64_t r = 0; r < 8; ++r) {",
            *half,
            "            a0 = _mm256_add_epi16(a0, _mm256_maddubs_epi16(_mm256_unpacklo_epi8(lo, hi), xv));",
            "            a1 = _mm256_add_epi16(a1, _mm256_maddubs_epi16(_mm256_unpackhi_epi8(lo, hi), xv));",
            "          }",
            "          #pragma GCC unroll 8",
            "          for (int64_t r = 8; r < 16; ++r) {",
            *half,
            "            b0 = _mm256_add_epi16(b0, _mm256_maddubs_epi16(_mm256_unpacklo_epi8(lo, hi), xv));",
            "            b1 = _mm256_add_epi16(b1, _mm256_maddubs_epi16(_mm256_unpackhi_epi8(lo, hi), xv));",
            "          }",
            # 16-bit lanes hold columns (0-7 | 16-23) in a0/b0, (8-15 | 24-31) in a1/b1
            *widened_sums_c("a0", "a1", "b0", "b1", "          "),
        ]
        scalar = ["          int32_t s = 0;",
                  "          for (int64_t r = 0; r < 16; ++r) {",
                  f"            const int32_t byte = block[r * {cols} + c];",
                  f"            s += (byte & 15) * qx[b * {BLOCK} + r] + (byte >> 4) * qx[b * {BLOCK} + r + 16];",
                  "          }"]
        xp_decl = "        const int16_t* xp = xpair + b * 16;"
    # as the float kernel: rows a page or more apart are streams of their own, fetched along
    # the row; nearer rows make one region per block and the next block's lines are fetched.
    # A q8_0 step reads two rows: both are fetched
    ahead = PREFETCH_AHEAD_BYTES if cols >= PAGE_BYTES else byte_rows * cols
    rows_read = ("p", f"p + {cols}") if fmt == "q8_0" else ("p",)
    prefetch = f"if ((c & 63) < {group}) {{ " + " ".join(
        f"__builtin_prefetch({row} + {ahead}, 0, 3);" for row in rows_read) + " }"
    steps = [line.replace("PREFETCH", prefetch) for line in steps]
    code_t = "int8_t" if fmt == "q8_0" else "uint8_t"
    offset = fmt == "q4_0"          # value = d * (code - 8): S - 8 * sum(qx)
    has_min = fmt == "q4_1"
    update = [
        f"          for (int u = 0; u < {group // 8}; ++u) {{",
        f"            float* o = &{at('8 * u')};",
        "            const __m256i su = " + ("_mm256_add_epi32(sum[u], shift);" if offset else "sum[u];"),
        f"            __m256 v = _mm256_add_ps(_mm256_loadu_ps(o), _mm256_mul_ps({scales.avx8('sb + c + 8 * u')},"
        " _mm256_mul_ps(dv, _mm256_cvtepi32_ps(su))));",
        *([f"            v = _mm256_add_ps(v, _mm256_mul_ps({scales.avx8('mb + c + 8 * u')}, mq));"]
          if has_min else []),
        "            _mm256_storeu_ps(o, v);",
        "          }",
    ]
    scalar_update = (f"          {at(0)} += {scales.scalar('sb[c]')} * (d * (float)(s" + (" + off" if offset else "")
                     + "))" + (f" + {scales.scalar('mb[c]')} * (d * (float)qsum[b])" if has_min else "") + ";")
    return [
        *pairs,
        f"  #pragma omp parallel if({rows * cols} >= {parallel_min}) num_threads(rs_threads())",
        "  {",
        "    const int64_t team = RS_QTEAM, me = RS_QME;",
        f"    const int64_t c_begin = {cols // group} * me / team * {group};",
        f"    const int64_t c_end = me == team - 1 ? {cols} : {cols // group} * (me + 1) / team * {group};",
        "    const __m256i rs_m4 = _mm256_set1_epi8(15);",
        *([f"    float prod[{tile}] __attribute__((aligned(64)));"] if has_epilogue else []),
        f"    for (int64_t t0 = c_begin; t0 < c_end; t0 += {tile}) {{",
        f"      const int64_t t1 = t0 + {tile} < c_end ? t0 + {tile} : c_end;",
        f"      const int64_t vec_end = t0 + (t1 - t0) / {group} * {group};",
        f"      for (int64_t c = t0; c < t1; ++c) {at(0)} = 0.0f;",
        f"      for (int64_t b = 0; b < {blocks}; ++b) {{",
        f"        const {code_t}* block = codes + b * {byte_rows * cols};",
        f"        const {scales.c_type}* sb = scale + b * {cols};",
        *([f"        const {scales.c_type}* mb = mins + b * {cols};"] if has_min else []),
        xp_decl,
        "        const float d = dx[b];",
        "        const __m256 dv = _mm256_set1_ps(d);",
        *(["        const __m256 mq = _mm256_set1_ps(d * (float)qsum[b]);"] if has_min else []),
        *(["        const int32_t off = -8 * qsum[b];",
           "        const __m256i shift = _mm256_set1_epi32(off);"] if offset else []),
        f"        for (int64_t c = t0; c < vec_end; c += {group}) {{",
        *steps,
        *update,
        "        }",
        "        for (int64_t c = vec_end; c < t1; ++c) {",
        *scalar,
        scalar_update,
        "        }",
        "      }",
        *finish,
        "    }",
        "  }",
    ]
