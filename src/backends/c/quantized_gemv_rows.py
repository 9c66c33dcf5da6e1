"""The AVX2 integer-dot region of the one-token q4 GEMV for layers narrow enough to walk whole
weight rows (``quantized_gemv_int8`` chooses it): threads split the 32-row blocks, not the
columns, and each walks its blocks' bytes in memory order.

Why (measured, ``benchmarks/bench_gemv_bound.py`` and its notes in docs/ARCHITECTURE.md): the
register-blocked kernel reads a block's 16 byte rows group by group (16 interleaved streams one
weight row apart), and the two threads each read half of every row. Timed on the same bytes with
no arithmetic at all, that access order alone took 1.6x as long as reading them in order with
one thread, and gained nothing from a second thread, while in-order reads of two contiguous
halves scaled 1.6x: the layer GEMVs were bound by their access order, not by bandwidth or
instructions.

Here thread ``i`` of ``p`` takes blocks ``[B i / p, B (i + 1) / p)``: one contiguous range of
codes, scales and mins. It walks each block row by row over all columns, summing ``maddubs`` of
the row's nibble pairs against the broadcast code pair ``(qx[r], qx[r + 16])`` into 16-bit
per-column sums kept in L1 (eight rows per sum: |sum| <= 8 * 2 * 15 * 127 = 30480, so two sums a
block), then adds ``d_w d_x S + m_w d_x sum(qx)`` (q4_1) or ``d_w d_x (S - 8 sum(qx))`` (q4_0)
to its own float partial output. After one barrier every thread adds the partials of a run of
columns and passes them through the epilogue. The partials live in the caller's frame (at most
``MAX_PARTS`` of them; a larger team leaves the rest to the final sum).
"""
from __future__ import annotations

import os

from .quantized_gemv import FLOAT32_SCALES, ScaleLoads
from .quantized_gemv_int8 import block_rounding_c, widened_sums_c

BLOCK = 32
GROUP = 32                # columns per 32-byte load of a byte row (each byte holds rows r and r + 16)
ROW_WALK_MARK = "row walk"   # named in the generated source's comment (tests look for it)
MAX_PARTS = 8             # partial outputs: threads beyond this only help with the final sum
# byte rows read side by side per pass over the columns. One: every extra row is one more stream,
# and 2 or 4 (16-bit sums loaded and stored half or a quarter as often) measured 20-50% slower
ROWS_PER_PASS = 1
# software prefetch this far ahead along the stream (measured, gate 576x1536, one thread: none
# 64-70 us, 512 B 53, 1024-2048 B 48-52; the hardware prefetcher alone restarts at every row)
PREFETCH_BYTES = 2048
PARTIAL_ALIGN = 16        # floats: each partial row starts on its own cache line


def row_walk_enabled() -> bool:
    """False when ``RELAXSCRIPT_GEMV_ROW_WALK=0``: the register-blocked column split instead (to
    compare the two; benchmarks/bench_gemv_bound.py does)."""
    return os.environ.get("RELAXSCRIPT_GEMV_ROW_WALK", "1") != "0"


def fits_row_walk(cols: int, l1d_bytes: int) -> bool:
    """Whether a thread's per-column state (two 16-bit sums and a float partial: 8 bytes a
    column) stays within half of L1 beside the byte rows streaming through it, with at least one
    whole 32-column group (narrower layers keep the register-blocked kernel's scalar path)."""
    return GROUP <= cols and cols * 8 <= l1d_bytes // 2


def add_epi16_chain(terms: str) -> str:
    """``a + b + c`` of __m256i terms as nested ``_mm256_add_epi16`` calls."""
    parts = terms.split(" + ")
    out = parts[0]
    for part in parts[1:]:
        out = f"_mm256_add_epi16({out}, {part})"
    return out


def rows_region_c(fmt: str, rows: int, cols: int, parallel_min: int, has_epilogue: bool,
                  finish: list[str], tile: int, rows_per_pass: int = ROWS_PER_PASS,
                  prefetch_bytes: int = PREFETCH_BYTES, scales: ScaleLoads = FLOAT32_SCALES,
                  pair: int = 0, split: bool = False) -> list[str]:
    """C lines of the region: reads ``codes``, ``scale`` (and ``mins``, as ``scales`` says) and the unrounded input
    ``x_in`` (each thread rounds its own blocks' 32 values); writes ``y``, or, with an
    epilogue, fills ``prod[c - t0]`` for tiles ``[t0, t1)`` of at most ``tile`` columns and runs
    ``finish`` on each. ``pair``: the columns are two halves of ``pair`` columns and the tiles run
    over the first half, ``prod_hi[c - t0]`` holding column ``c + pair``. ``split`` (with ``pair``): each
    block is walked once per half, ``pair`` columns at a time, so that a thread's per-column state is
    that of one half (``fits_row_walk`` of the half where the whole row does not fit)."""
    if fmt not in ("q4_0", "q4_1"):
        raise ValueError(f"row-walk gemv: {fmt!r} is not a 4-bit format")
    if 8 % rows_per_pass:
        raise ValueError(f"row-walk gemv: {rows_per_pass} rows per pass do not divide the 8 rows of a 16-bit sum")
    blocks = rows // BLOCK
    groups = (pair if split else cols) // GROUP
    if split and prefetch_bytes:
        prefetch_bytes = 2 * cols    # the stream is half rows: the same columns two byte rows on
    vec_end = groups * GROUP
    has_min = fmt == "q4_1"
    offset = fmt == "q4_0"

    def row_pass(first: bool) -> list[str]:
        # ROWS_PER_PASS byte rows (from p) over every column group, their products summed in
        # 16 bits; a sets its sums (the first pass of eight rows) or adds to them
        lines = [f"            for (int64_t g = 0; g < {groups}; ++g) {{"]
        if prefetch_bytes:
            ahead = (rows_per_pass - 1) * cols + prefetch_bytes     # past the last row of the pass
            lines += [f"              __builtin_prefetch(p + g * {GROUP} + {ahead}, 0, 3);"]
        for j in range(rows_per_pass):
            lines += [
                f"              const __m256i v{j} = "
                f"_mm256_loadu_si256((const __m256i*)(p + {j * cols} + g * {GROUP}));",
                f"              const __m256i lo{j} = _mm256_and_si256(v{j}, rs_m4), "
                f"hi{j} = _mm256_and_si256(_mm256_srli_epi16(v{j}, 4), rs_m4);"]
        lo_sum = " + ".join(f"_mm256_maddubs_epi16(_mm256_unpacklo_epi8(lo{j}, hi{j}), xv{j})"
                            for j in range(rows_per_pass))
        hi_sum = " + ".join(f"_mm256_maddubs_epi16(_mm256_unpackhi_epi8(lo{j}, hi{j}), xv{j})"
                            for j in range(rows_per_pass))
        # 16-bit lanes: __m256i's + is a 64-bit lane add, so the sums use add_epi16
        lo_sum, hi_sum = (add_epi16_chain(x) for x in (lo_sum, hi_sum))
        lines += [f"              const __m256i lo_sum = {lo_sum};",
                  f"              const __m256i hi_sum = {hi_sum};",
                  "              " + ("a[2 * g] = lo_sum; a[2 * g + 1] = hi_sum;" if first else
                                      "a[2 * g] = _mm256_add_epi16(a[2 * g], lo_sum); "
                                      "a[2 * g + 1] = _mm256_add_epi16(a[2 * g + 1], hi_sum);"),
                  "            }"]
        return lines

    def broadcasts(r: str) -> list[str]:
        return [f"            const __m256i xv{j} = _mm256_set1_epi16(xp[{r} + {j}]);"
                for j in range(rows_per_pass)]

    half_rows = []
    for half in (0, 1):
        half_rows += [
            f"          {{ /* byte rows {8 * half}-{8 * half + 7}: their own 16-bit sums */",
            f"            __m256i* a = acc + {half * 2 * groups};",
            "            {",
            f"            const uint8_t* p = block + {8 * half * cols};",
            *broadcasts(str(8 * half)),
            *row_pass(first=True),
            "            }",
            *([f"            for (int64_t r = {8 * half + rows_per_pass}; r < {8 * half + 8}; r += {rows_per_pass}) {{",
               f"            const uint8_t* p = block + r * {cols};",
               *broadcasts("r"),
               *row_pass(first=False),
               "            }"] if rows_per_pass < 8 else []),
            "          }",
        ]
    # lanes of a's 16-bit sums: columns (0-7 | 16-23) in a[2g], (8-15 | 24-31) in a[2g + 1]
    widen = [
        f"            const __m256i a0 = acc[2 * g], a1 = acc[2 * g + 1], "
        f"b0 = acc[{2 * groups} + 2 * g], b1 = acc[{2 * groups} + 2 * g + 1];",
        *widened_sums_c("a0", "a1", "b0", "b1", "            "),
        "            for (int u = 0; u < 4; ++u) {",
        f"              const int64_t c = g * {GROUP} + 8 * u;",
        "              const __m256i su = " + ("_mm256_add_epi32(sum[u], shift);" if offset else "sum[u];"),
        f"              __m256 v = _mm256_mul_ps({scales.avx8('sb + c')}, _mm256_mul_ps(dv, _mm256_cvtepi32_ps(su)));",
        *([f"              v = _mm256_add_ps(v, _mm256_mul_ps({scales.avx8('mb + c')}, mq));"] if has_min else []),
        "              _mm256_store_ps(part + c, first_block ? v : _mm256_add_ps(_mm256_load_ps(part + c), v));",
        "            }",
    ]
    head = f"{ROW_WALK_MARK}: threads split the {blocks} blocks, {rows_per_pass} byte row(s) per pass"
    return _block_team_c(head, 256, [], half_rows, widen, fmt, rows, cols, parallel_min, has_epilogue, finish,
                         tile, groups, vec_end, scales, pair, split)


WIDE_GROUP = 64           # columns per 64-byte load of a byte row (AVX-512BW)
ROW_WALK_WIDE_MARK = "row walk (AVX-512BW)"
WIDE_GUARD = "defined(__AVX512BW__) && !defined(RS_Q_NO_AVX512)"


def transpose_lanes_c(sums: tuple[str, str, str, str], out: str, indent: str) -> list[str]:
    """C lines declaring ``__m512i out[4]``: the 4 x 4 transpose of the 128-bit lanes of ``sums``
    (lane l of sums[j] holds columns 16 l + 4 j .. + 3 of a 64-column group; out[l] holds columns
    16 l .. 16 l + 15 in order)."""
    s0, s1, s2, s3 = sums
    return [
        f"{indent}const __m512i {out}_u0 = _mm512_shuffle_i32x4({s0}, {s1}, 0x44), "
        f"{out}_u1 = _mm512_shuffle_i32x4({s0}, {s1}, 0xEE);",
        f"{indent}const __m512i {out}_u2 = _mm512_shuffle_i32x4({s2}, {s3}, 0x44), "
        f"{out}_u3 = _mm512_shuffle_i32x4({s2}, {s3}, 0xEE);",
        f"{indent}const __m512i {out}[4] = {{_mm512_shuffle_i32x4({out}_u0, {out}_u2, 0x88), "
        f"_mm512_shuffle_i32x4({out}_u0, {out}_u2, 0xDD),",
        f"{indent}  _mm512_shuffle_i32x4({out}_u1, {out}_u3, 0x88), _mm512_shuffle_i32x4({out}_u1, {out}_u3, 0xDD)}};",
    ]


def rows_region_wide_c(fmt: str, rows: int, cols: int, parallel_min: int, has_epilogue: bool,
                       finish: list[str], tile: int, prefetch_bytes: int = PREFETCH_BYTES,
                       scales: ScaleLoads = FLOAT32_SCALES, pair: int = 0, split: bool = False) -> list[str]:
    """``rows_region_c`` with 512-bit registers (for ``#ifdef __AVX512BW__``): the same block split,
    rounding, byte-row order, 16-bit sums, partials and barrier; each load covers 64 columns. The
    16-bit sums of a group hold columns (0-7 | 16-23 | 32-39 | 48-55) and (8-15 | ...) as in the
    AVX2 walk lane by lane; each pair of 8-row halves is added in 32 bits by ``madd`` against ones
    (the two halves interleaved), which leaves 4 columns per lane and register, put in order by
    one lane transpose."""
    if fmt not in ("q4_0", "q4_1"):
        raise ValueError(f"row-walk gemv: {fmt!r} is not a 4-bit format")
    blocks = rows // BLOCK
    groups = (pair if split else cols) // WIDE_GROUP
    if split and prefetch_bytes:
        prefetch_bytes = 2 * cols    # the stream is half rows: the same columns two byte rows on
    vec_end = groups * WIDE_GROUP
    has_min = fmt == "q4_1"
    offset = fmt == "q4_0"

    def load(pointer: str) -> str:
        return scales.avx16(pointer)

    def row_pass(first: bool) -> list[str]:
        return [
            f"            for (int64_t g = 0; g < {groups}; ++g) {{",
            *([f"              __builtin_prefetch(p + g * {WIDE_GROUP} + {prefetch_bytes}, 0, 3);"]
              if prefetch_bytes else []),
            f"              const __m512i v = _mm512_loadu_si512((const void*)(p + g * {WIDE_GROUP}));",
            "              const __m512i lo = _mm512_and_si512(v, rs_m4), "
            "hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), rs_m4);",
            "              const __m512i lo_sum = _mm512_maddubs_epi16(_mm512_unpacklo_epi8(lo, hi), xv);",
            "              const __m512i hi_sum = _mm512_maddubs_epi16(_mm512_unpackhi_epi8(lo, hi), xv);",
            "              " + ("a[2 * g] = lo_sum; a[2 * g + 1] = hi_sum;" if first else
                                "a[2 * g] = _mm512_add_epi16(a[2 * g], lo_sum); "
                                "a[2 * g + 1] = _mm512_add_epi16(a[2 * g + 1], hi_sum);"),
            "            }",
        ]

    half_rows = []
    for half in (0, 1):
        half_rows += [
            f"          {{ /* byte rows {8 * half}-{8 * half + 7}: their own 16-bit sums */",
            f"            __m512i* a = acc + {half * 2 * groups};",
            "            {",
            f"            const uint8_t* p = block + {8 * half * cols};",
            f"            const __m512i xv = _mm512_set1_epi16(xp[{8 * half}]);",
            *row_pass(first=True),
            "            }",
            f"            for (int64_t r = {8 * half + 1}; r < {8 * half + 8}; ++r) {{",
            f"            const uint8_t* p = block + r * {cols};",
            "            const __m512i xv = _mm512_set1_epi16(xp[r]);",
            *row_pass(first=False),
            "            }",
            "          }",
        ]
    widen = [
        f"            const __m512i a0 = acc[2 * g], a1 = acc[2 * g + 1], "
        f"b0 = acc[{2 * groups} + 2 * g], b1 = acc[{2 * groups} + 2 * g + 1];",
        "            const __m512i s0 = _mm512_madd_epi16(_mm512_unpacklo_epi16(a0, b0), ones);",
        "            const __m512i s1 = _mm512_madd_epi16(_mm512_unpackhi_epi16(a0, b0), ones);",
        "            const __m512i s2 = _mm512_madd_epi16(_mm512_unpacklo_epi16(a1, b1), ones);",
        "            const __m512i s3 = _mm512_madd_epi16(_mm512_unpackhi_epi16(a1, b1), ones);",
        *transpose_lanes_c(("s0", "s1", "s2", "s3"), "sum", "            "),
        "            for (int u = 0; u < 4; ++u) {",
        f"              const int64_t c = g * {WIDE_GROUP} + 16 * u;",
        "              const __m512i su = " + ("_mm512_add_epi32(sum[u], shift);" if offset else "sum[u];"),
        f"              __m512 v = _mm512_mul_ps({load('sb + c')}, _mm512_mul_ps(dv, _mm512_cvtepi32_ps(su)));",
        *([f"              v = _mm512_add_ps(v, _mm512_mul_ps({load('mb + c')}, mq));"] if has_min else []),
        "              _mm512_store_ps(part + c, first_block ? v : _mm512_add_ps(_mm512_load_ps(part + c), v));",
        "            }",
    ]
    head = (f"{ROW_WALK_WIDE_MARK}: threads split the {blocks} blocks, one byte row per pass, "
            f"{WIDE_GROUP} columns a load")
    return _block_team_c(head, 512, ["      const __m512i ones = _mm512_set1_epi16(1);"], half_rows, widen, fmt,
                         rows, cols, parallel_min, has_epilogue, finish, tile, groups, vec_end, scales, pair,
                         split)


def _block_team_c(head: str, bits: int, setup: list[str], half_rows: list[str], widen: list[str], fmt: str,
                  rows: int, cols: int, parallel_min: int, has_epilogue: bool, finish: list[str], tile: int,
                  groups: int, vec_end: int, scales: ScaleLoads, pair: int = 0, split: bool = False) -> list[str]:
    """The team region both row walks share, around their ``bits``-wide byte-row passes
    (``half_rows``) and widening (``widen``, the body of the loop over column groups): the split of
    the blocks, each block's rounding of x, the scalar column tail, the partial rows, the barrier
    and the final sum (with the epilogue's ``finish`` per tile; with ``pair``, over the first
    ``pair`` columns, each tile's second-half sums in ``prod_hi``)."""
    blocks = rows // BLOCK
    stride = -(-cols // PARTIAL_ALIGN) * PARTIAL_ALIGN
    # split: each half's partials start on a cache line (the vector stores are aligned)
    hi_offset = -(-pair // PARTIAL_ALIGN) * PARTIAL_ALIGN if split else pair
    if split:
        stride = 2 * hi_offset
    has_min, offset = fmt == "q4_1", fmt == "q4_0"
    vec, mm = f"__m{bits}", f"_mm{bits}"
    scalar = [
        f"          for (int64_t c = {vec_end}; c < {pair if split else cols}; ++c) {{",
        "            int32_t t = 0;",
        "            for (int64_t r = 0; r < 16; ++r) {",
        f"              const int32_t byte = block[r * {cols} + c];",
        "              t += (byte & 15) * qb[r] + (byte >> 4) * qb[r + 16];",
        "            }",
        f"            const float v = {scales.scalar('sb[c]')} * (d * (float)(t" + (" + off" if offset else "") + "))"
        + (f" + {scales.scalar('mb[c]')} * (d * (float)qs)" if has_min else "") + ";",
        "            part[c] = first_block ? v : part[c] + v;",
        "          }",
    ]
    parts_expr = f"(team < {min(MAX_PARTS, blocks)} ? team : {min(MAX_PARTS, blocks)})"
    reduce_sum = "rs_part[0][c]; for (int64_t i = 1; i < parts; ++i) s += rs_part[i][c]"
    out_cols = pair or cols
    lines = -(-out_cols // PARTIAL_ALIGN)
    if pair:
        # the threads' runs of whole cache lines of the output's columns; each sums both halves
        reduce = [
            f"    float prod[{tile}] __attribute__((aligned(64))), prod_hi[{tile}] __attribute__((aligned(64)));",
            f"    for (int64_t t0 = c_begin; t0 < c_end; t0 += {tile}) {{",
            f"      const int64_t t1 = t0 + {tile} < c_end ? t0 + {tile} : c_end;",
            "      for (int64_t c = t0; c < t1; ++c) {",
            f"        {{ float s = {reduce_sum}; prod[c - t0] = s; }}",
            f"        {{ const int64_t h = c + {hi_offset}; float s = {reduce_sum.replace('[c]', '[h]')}; "
            "prod_hi[c - t0] = s; }",
            "      }",
            *finish,
            "    }",
        ]
    elif has_epilogue:
        reduce = [
            f"    float prod[{tile}] __attribute__((aligned(64)));",
            f"    for (int64_t t0 = c_begin; t0 < c_end; t0 += {tile}) {{",
            f"      const int64_t t1 = t0 + {tile} < c_end ? t0 + {tile} : c_end;",
            f"      for (int64_t c = t0; c < t1; ++c) {{ float s = {reduce_sum}; prod[c - t0] = s; }}",
            *finish,
            "    }",
        ]
    else:
        reduce = [f"    for (int64_t c = c_begin; c < c_end; ++c) {{ float s = {reduce_sum}; y[c] = s; }}"]
    return [
        f"  /* {head} */",
        f"  float rs_part[{min(MAX_PARTS, blocks)}][{stride}] __attribute__((aligned(64)));",
        f"  #pragma omp parallel if({rows * cols} >= {parallel_min}) num_threads(rs_threads())",
        "  {",
        "    const int64_t team = RS_QTEAM, me = RS_QME;",
        f"    const int64_t parts = {parts_expr};",
        "    if (me < parts) {",
        f"      const int64_t b_begin = {blocks} * me / parts, b_end = {blocks} * (me + 1) / parts;",
        "      float* restrict part = rs_part[me];" if not split else "      float* restrict part0 = rs_part[me];",
        f"      {vec}i acc[{4 * groups if groups else 1}];",
        f"      const {vec}i rs_m4 = {mm}_set1_epi8(15);",
        *setup,
        "      for (int64_t b = b_begin; b < b_end; ++b) {",
        "        const int first_block = b == b_begin;",
        *([f"        const uint8_t* block = codes + b * {16 * cols};"] if not split else []),
        # this block's input codes, rounded here by the thread that reads the block (no serial
        # pass over x before the team starts)
        f"        const float* xb = x_in + b * {BLOCK};",
        f"        int8_t qb[{BLOCK}];",
        *block_rounding_c("xb", "qb[r] = (int8_t)q;", "        "),
        "        const int32_t qs = s;",
        "        int16_t xp[16];     /* byte row r's code pair (qb[r], qb[r + 16]) */",
        "        for (int64_t r = 0; r < 16; ++r)",
        "          xp[r] = (int16_t)((uint16_t)(uint8_t)qb[r] | ((uint16_t)(uint8_t)qb[r + 16] << 8));",
        *(["        const int32_t off = -8 * qs;"] if offset else []),
        # split: the block's two halves one after the other, each from its own column offset
        *(["        for (int64_t hh = 0; hh < 2; ++hh) {",
           f"        const uint8_t* block = codes + b * {16 * cols} + hh * {pair};",
           f"        float* restrict part = part0 + hh * {hi_offset};"] if split else []),
        f"        const {scales.c_type}* sb = scale + b * {cols}" + (f" + hh * {pair};" if split else ";"),
        *([f"        const {scales.c_type}* mb = mins + b * {cols}" + (f" + hh * {pair};" if split else ";")]
          if has_min else []),
        *(half_rows if groups else []),
        "        {",
        f"          const {vec} dv = {mm}_set1_ps(d);",
        *([f"          const {vec} mq = {mm}_set1_ps(d * (float)qs);"] if has_min else []),
        *([f"          const {vec}i shift = {mm}_set1_epi32(off);"] if offset else []),
        f"          for (int64_t g = 0; g < {groups}; ++g) {{",
        *widen,
        "          }",
        *scalar,
        "        }",
        *(["        }"] if split else []),
        "      }",
        "    }",
        "    #pragma omp barrier",
        # the final sum: each thread a run of whole cache lines of columns
        f"    const int64_t c_begin = {lines} * me / team * {PARTIAL_ALIGN};",
        f"    const int64_t c_end_line = {lines} * (me + 1) / team * {PARTIAL_ALIGN};",
        f"    const int64_t c_end = c_end_line < {out_cols} ? c_end_line : {out_cols};",
        *reduce,
        "  }",
    ]
