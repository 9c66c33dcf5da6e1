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

    scalar = _scalar_columns_c(cols, out, scales)
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


VNNI_GROUP = 64            # columns per 64-byte load of a row
ROW_WALK_Q8_VNNI_MARK = "q8_0 quad walk (AVX-512 VNNI)"
VNNI_GUARD = "defined(__AVX512VNNI__) && defined(__AVX512BW__) && !defined(RS_Q_NO_AVX512)"


def q8_vnni_region_c(rows: int, cols: int, parallel_min: int, has_epilogue: bool,
                     finish: list[str], scales: ScaleLoads = FLOAT32_SCALES) -> list[str]:
    """The pair walk's AVX-512 VNNI sibling (for ``#if VNNI_GUARD``): the same column runs and tiles,
    each block read four rows at a time. ``vpdpbusd`` multiplies unsigned by signed bytes, four per
    32-bit lane, so the weight codes are flipped to ``w + 128`` (one xor) and the block's
    ``128 * sum(qx)`` is taken off the sums; four rows of 64 columns interleave into four registers
    of (r0, r1, r2, r3) byte quads with two rounds of unpacks, which leave the columns of each
    128-bit lane in a 4 x 4 order, put back by a lane transpose once per block."""
    blocks = rows // BLOCK
    tile = min(TILE, -(-cols // VNNI_GROUP) * VNNI_GROUP)
    out = "prod[c - t0]" if has_epilogue else "y[c]"
    out_vec = "prod + (c - t0)" if has_epilogue else "y + c"
    ahead = 4 * cols   # the same columns of the next four rows
    load_scale = scales.avx16("sb + c + 16 * l")

    def quad_pass(first: bool) -> list[str]:
        def acc(j: int) -> str:
            old = "_mm512_setzero_si512()" if first else f"a[{j}]"
            return f"a[{j}] = _mm512_dpbusd_epi32({old}, q{j}, xv);"
        return [
            f"            for (int64_t c = t0; c < vec_end; c += {VNNI_GROUP}) {{",
            *(f"              __builtin_prefetch(p{r} + c + {ahead}, 0, 3);" for r in range(4)),
            *(f"              const __m512i r{r} = _mm512_xor_si512(_mm512_loadu_si512((const void*)(p{r} + c)),"
              " flip);" for r in range(4)),
            "              const __m512i l01 = _mm512_unpacklo_epi8(r0, r1), h01 = _mm512_unpackhi_epi8(r0, r1);",
            "              const __m512i l23 = _mm512_unpacklo_epi8(r2, r3), h23 = _mm512_unpackhi_epi8(r2, r3);",
            "              const __m512i q0 = _mm512_unpacklo_epi16(l01, l23), q1 = _mm512_unpackhi_epi16(l01, l23);",
            "              const __m512i q2 = _mm512_unpacklo_epi16(h01, h23), q3 = _mm512_unpackhi_epi16(h01, h23);",
            "              __m512i* a = acc + (c - t0) / 16;",
            "              " + " ".join(acc(j) for j in range(4)),
            "            }",
        ]

    scalar = _scalar_columns_c(cols, out, scales)
    return [
        f"  /* {ROW_WALK_Q8_VNNI_MARK}: column runs per thread, tiles of {tile}, four rows per pass */",
        f"  int32_t xquad[{blocks * 8}];",
        f"  for (int64_t i = 0; i < {blocks * 8}; ++i)",
        "    xquad[i] = (int32_t)((uint32_t)(uint8_t)qx[4 * i] | ((uint32_t)(uint8_t)qx[4 * i + 1] << 8)"
        " | ((uint32_t)(uint8_t)qx[4 * i + 2] << 16) | ((uint32_t)(uint8_t)qx[4 * i + 3] << 24));",
        f"  #pragma omp parallel if({rows * cols} >= {parallel_min}) num_threads(rs_threads())",
        "  {",
        "    const int64_t team = RS_QTEAM, me = RS_QME;",
        f"    const int64_t c_begin = {cols // VNNI_GROUP} * me / team * {VNNI_GROUP};",
        f"    const int64_t c_end = me == team - 1 ? {cols} : {cols // VNNI_GROUP} * (me + 1) / team * {VNNI_GROUP};",
        f"    __m512i acc[{tile // 16}];",
        "    const __m512i flip = _mm512_set1_epi8((char)0x80);",
        *([f"    float prod[{tile}] __attribute__((aligned(64)));"] if has_epilogue else []),
        f"    for (int64_t t0 = c_begin; t0 < c_end; t0 += {tile}) {{",
        f"      const int64_t t1 = t0 + {tile} < c_end ? t0 + {tile} : c_end;",
        f"      const int64_t vec_end = t0 + (t1 - t0) / {VNNI_GROUP} * {VNNI_GROUP};",
        f"      for (int64_t c = t0; c < t1; ++c) {out} = 0.0f;",
        f"      for (int64_t b = 0; b < {blocks}; ++b) {{",
        f"        const int8_t* block = codes + b * {BLOCK * cols};",
        "        const float d = dx[b];",
        "        for (int64_t i = 0; i < 8; ++i) {",
        f"          const int8_t* p0 = block + 4 * i * {cols}; const int8_t* p1 = p0 + {cols};",
        f"          const int8_t* p2 = p1 + {cols}; const int8_t* p3 = p2 + {cols};",
        "          const __m512i xv = _mm512_set1_epi32(xquad[b * 8 + i]);",
        "          if (i == 0) {",
        *quad_pass(first=True),
        "          } else {",
        *quad_pass(first=False),
        "          }",
        "        }",
        "        const __m512 dv = _mm512_set1_ps(d);",
        "        const __m512i bias = _mm512_set1_epi32(128 * qsum[b]);",
        f"        const {scales.c_type}* sb = scale + b * {cols};",
        f"        for (int64_t c = t0; c < vec_end; c += {VNNI_GROUP}) {{",
        "          const __m512i* a = acc + (c - t0) / 16;",
        "          /* a[j] lane l holds columns c + 16 l + 4 j .. + 3: transpose the 128-bit lanes */",
        "          const __m512i s0 = _mm512_sub_epi32(a[0], bias), s1 = _mm512_sub_epi32(a[1], bias);",
        "          const __m512i s2 = _mm512_sub_epi32(a[2], bias), s3 = _mm512_sub_epi32(a[3], bias);",
        "          const __m512i u0 = _mm512_shuffle_i32x4(s0, s1, 0x44), u1 = _mm512_shuffle_i32x4(s0, s1, 0xEE);",
        "          const __m512i u2 = _mm512_shuffle_i32x4(s2, s3, 0x44), u3 = _mm512_shuffle_i32x4(s2, s3, 0xEE);",
        "          const __m512i n[4] = {_mm512_shuffle_i32x4(u0, u2, 0x88), _mm512_shuffle_i32x4(u0, u2, 0xDD),",
        "                                _mm512_shuffle_i32x4(u1, u3, 0x88), _mm512_shuffle_i32x4(u1, u3, 0xDD)};",
        f"          float* o = {out_vec};",
        "          for (int l = 0; l < 4; ++l)",
        "            _mm512_storeu_ps(o + 16 * l, _mm512_fmadd_ps("
        f"{load_scale}, _mm512_mul_ps(dv, _mm512_cvtepi32_ps(n[l])), _mm512_loadu_ps(o + 16 * l)));",
        "        }",
        *scalar,
        "      }",
        *finish,
        "    }",
        "  }",
    ]


def _scalar_columns_c(cols: int, out: str, scales: ScaleLoads) -> list[str]:
    """Both walks' tail: block ``b``'s columns ``[vec_end, t1)`` one at a time, added to ``out``."""
    return [
        "          for (int64_t c = vec_end; c < t1; ++c) {",
        "            int32_t s = 0;",
        f"            for (int64_t r = 0; r < {BLOCK}; ++r)",
        f"              s += (int32_t)block[r * {cols} + c] * qx[b * {BLOCK} + r];",
        f"            {out} += {scales.scalar(f'scale[b * {cols} + c]')} * (d * (float)s);",
        "          }",
    ]
