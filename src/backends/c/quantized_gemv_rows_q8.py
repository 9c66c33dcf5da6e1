"""The AVX2 integer-dot region of the one-token q8_0 GEMV, walking weight rows over column tiles
(``quantized_gemv.gemv_source`` chooses it for q8_0 on 8-bit activations; the tied LM head).

Same finding as ``quantized_gemv_rows`` (docs/ARCHITECTURE.md, row-walk section): the register-
blocked kernel reads a block's 32 rows 64 columns at a time, 32 streams a weight row apart. Here
each thread keeps its contiguous run of columns (a row of the LM head is 48 KiB: a thread's part
of it is already a long run) and walks it a tile at a time; within a tile, each block's rows are
read as pairs of runs of the tile's width, in order: the two rows' codes widen to 16 bits,
interleave per column and ``madd`` against the pair ``(qx[2i], qx[2i + 1])`` into 32-bit
per-column sums kept in L1; after the block's 16 pairs, ``d_w d_x S`` joins the tile's output.
"""
from __future__ import annotations

from .quantized_gemv import FLOAT32_SCALES, ScaleLoads

BLOCK = 32
GROUP = 16                 # columns per 16-byte load of a row (one register of 16-bit lanes)
TILE = 2048                # columns per tile: 8 KiB of sums and 8 KiB of output in L1
ROW_WALK_Q8_MARK = "q8_0 pair walk"   # named in the generated source (tests look for it)
# prefetch the next pair of rows this far ahead of the one being read
PREFETCH_ROWS_AHEAD = 2


def q8_rows_region_c(rows: int, cols: int, parallel_min: int, has_epilogue: bool,
                     finish: list[str], scales: ScaleLoads = FLOAT32_SCALES) -> list[str]:
    """C lines of the region (after ``activation_codes_c``: reads ``qx``, ``dx``, ``scale`` as
    ``scales`` says): writes ``y``
    (or ``prod[c - t0]`` for each tile ``[t0, t1)`` and runs ``finish`` on it)."""
    blocks = rows // BLOCK
    tile = min(TILE, -(-cols // GROUP) * GROUP)
    out = "prod[c - t0]" if has_epilogue else "y[c]"
    out_vec = "prod + (c - t0)" if has_epilogue else "y + c"
    ahead = PREFETCH_ROWS_AHEAD * cols

    def pair_pass(first: bool) -> list[str]:
        # lanes: columns (0-3 | 8-11) from unpacklo, (4-7 | 12-15) from unpackhi
        store = ("a[0] = lo; a[1] = hi;" if first else
                 "a[0] = _mm256_add_epi32(a[0], lo); a[1] = _mm256_add_epi32(a[1], hi);")
        return [
            "            for (int64_t c = t0; c < vec_end; c += 16) {",
            f"              if (!(c & 63)) {{ __builtin_prefetch(p0 + c + {ahead}, 0, 3);"
            f" __builtin_prefetch(p1 + c + {ahead}, 0, 3); }}",
            "              const __m256i e = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i*)(p0 + c)));",
            "              const __m256i o = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i*)(p1 + c)));",
            "              const __m256i lo = _mm256_madd_epi16(_mm256_unpacklo_epi16(e, o), xv);",
            "              const __m256i hi = _mm256_madd_epi16(_mm256_unpackhi_epi16(e, o), xv);",
            "              __m256i* a = acc + (c - t0) / 8;",
            f"              {store}",
            "            }",
        ]

    scalar = [
        "          for (int64_t c = vec_end; c < t1; ++c) {",
        "            int32_t s = 0;",
        f"            for (int64_t r = 0; r < {BLOCK}; ++r)",
        f"              s += (int32_t)block[r * {cols} + c] * qx[b * {BLOCK} + r];",
        f"            {out} += {scales.scalar(f'scale[b * {cols} + c]')} * (d * (float)s);",
        "          }",
    ]
    return [
        f"  /* {ROW_WALK_Q8_MARK}: column runs per thread, tiles of {tile}, row pairs read in order */",
        f"  int32_t xpair[{blocks * 16}];",
        f"  for (int64_t i = 0; i < {blocks * 16}; ++i)",
        "    xpair[i] = (int32_t)((uint32_t)(uint16_t)(int16_t)qx[2 * i]"
        " | ((uint32_t)(uint16_t)(int16_t)qx[2 * i + 1] << 16));",
        f"  #pragma omp parallel if({rows * cols} >= {parallel_min}) num_threads(rs_threads())",
        "  {",
        "    const int64_t team = RS_QTEAM, me = RS_QME;",
        f"    const int64_t c_begin = {cols // GROUP} * me / team * {GROUP};",
        f"    const int64_t c_end = me == team - 1 ? {cols} : {cols // GROUP} * (me + 1) / team * {GROUP};",
        f"    __m256i acc[{tile // 8}];",
        *([f"    float prod[{tile}] __attribute__((aligned(64)));"] if has_epilogue else []),
        f"    for (int64_t t0 = c_begin; t0 < c_end; t0 += {tile}) {{",
        f"      const int64_t t1 = t0 + {tile} < c_end ? t0 + {tile} : c_end;",
        f"      const int64_t vec_end = t0 + (t1 - t0) / {GROUP} * {GROUP};",
        f"      for (int64_t c = t0; c < t1; ++c) {out} = 0.0f;",
        f"      for (int64_t b = 0; b < {blocks}; ++b) {{",
        f"        const int8_t* block = codes + b * {BLOCK * cols};",
        "        const float d = dx[b];",
        "        {",
        f"          const int8_t* p0 = block; const int8_t* p1 = block + {cols};",
        "          const __m256i xv = _mm256_set1_epi32(xpair[b * 16]);",
        *pair_pass(first=True),
        "        }",
        "        for (int64_t i = 1; i < 16; ++i) {",
        f"          const int8_t* p0 = block + 2 * i * {cols}; const int8_t* p1 = p0 + {cols};",
        "          const __m256i xv = _mm256_set1_epi32(xpair[b * 16 + i]);",
        *pair_pass(first=False),
        "        }",
        "        const __m256 dv = _mm256_set1_ps(d);",
        f"        const {scales.c_type}* sb = scale + b * {cols};",
        "        for (int64_t c = t0; c < vec_end; c += 16) {",
        "          const __m256i* a = acc + (c - t0) / 8;",
        "          const __m256i s0 = _mm256_permute2x128_si256(a[0], a[1], 0x20);",
        "          const __m256i s1 = _mm256_permute2x128_si256(a[0], a[1], 0x31);",
        f"          float* o = {out_vec};",
        "          _mm256_storeu_ps(o, _mm256_add_ps(_mm256_loadu_ps(o),"
        f" _mm256_mul_ps({scales.avx8('sb + c')}, _mm256_mul_ps(dv, _mm256_cvtepi32_ps(s0)))));",
        "          _mm256_storeu_ps(o + 8, _mm256_add_ps(_mm256_loadu_ps(o + 8),"
        f" _mm256_mul_ps({scales.avx8('sb + c + 8')}, _mm256_mul_ps(dv, _mm256_cvtepi32_ps(s1)))));",
        "        }",
        *scalar,
        "      }",
        *finish,
        "    }",
        "  }",
    ]
