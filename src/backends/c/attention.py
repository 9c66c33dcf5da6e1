"""Generated C kernel of a fused attention (``transform/attention_kernel.py``'s loop nest).

The fused attention PrimFunc carries ``ATTENTION_LAYOUT_ATTR`` (buffer positions, the key
and value buffers' axis orders, the mask kind); its loop nest stays the function's meaning
(the interpreter and other targets run it) and the C emitter puts this kernel in its place,
with the same calling convention, the way the generated quantized GEMV replaces its nest.

Why a separate generator: the loop nest walks one row block at a time with scalar loops
that gcc vectorizes only in part. Here:

- **Work items are (head, tile of rows, chunk of keys).** Prefill has many row tiles and
  one chunk; decode has few rows (the query heads of one kv head), so the keys are split
  into chunks as well (flash-decoding): each task runs an online softmax over its chunk
  and leaves a partial (max, sum, unnormalized output) per row, and a combine step merges
  the partials. The chunk count is a function of the key count and the tiles only (not
  of the team size, which follows the machine's load per call), so results do not depend
  on the thread count, and a team of any size gets several equal tasks per thread.
- **Register-tiled products.** Scores ``s = q @ keys`` and the output ``o += p @ values``
  are small matrix products over a block of ``KEY_BLOCK`` keys, done by two micro-kernels
  chosen by the buffers' layouts at generation time: "outer" (the output's axis is
  contiguous in the operand: broadcast-multiply-add of whole vectors, up to 4 rows x 2
  vectors of accumulators) and "dot" (the reduced axis is contiguous: vector dot
  products, summed across lanes at the end). A layout with neither axis contiguous is
  gathered into a packed block first.
- **Prefill: the column form.** A head of more than ROW_TILE query rows is split into tiles
  of COLUMN_TILE rows whose score tile, weights and output are kept transposed (keys x rows,
  DV x rows): the rows run along the vectors, so the online softmax's max, exp and sums run
  down the key axis one vector at a time (no horizontal reduction per row and block), the
  exp is a vector polynomial (``rs_att_vexp``), and both products are register tiles of
  11-12 x 2 vectors that read keys and values as broadcasts: in place when a key's D values
  are contiguous (the Llama workload's ``k (n, heads, d)``: no per-call transpose) and in a
  cache's ``(kv, D, capacity)``; float16 blocks are widened by the task (a copy once per call
  would need a barrier before the tasks).
- **Blocks masked out are skipped.** A key block whose mask removes every score of the
  row tile is not computed when its weights are exactly 0 anyway: a ``where`` mask whose
  condition is false everywhere in the block with ``fill`` at least 104 below every row's
  running max (``exp`` of that is 0 in float32), or an additive mask at most
  ``DEAD_MASK`` everywhere in the block while every row's running max is above
  ``DEAD_MASK / 10`` (the weights are then below ``exp(-9e7)``: exactly 0 unless a score
  exceeds the others by about 1e8). A causal prefill so computes about half the products.

The score expression (scale, mask) is the loop nest's own "mask" block, emitted through
the C expression emitter, so both forms compute the same scores.
"""
from __future__ import annotations

import math
import os

from tensorir.schedule_rules.attention import ATTENTION_LAYOUT_ATTR

KEY_BLOCK = 32          # keys per block: a packed key block and value block (8 KiB each at
                        # head dim 64) and the tile's scores and output stay in L1 together
DIRECT_BLOCK = 512      # keys per block when the keys are read in place (decode)
MICRO_ROWS = 4          # rows of a micro tile: 4 x 2 vectors of accumulators fit 16 registers
ROW_TILE = 16           # query rows per task: 4 micro tiles share each packed key block
COLUMN_TILE = 32        # query rows per task when a head has more than ROW_TILE (prefill): the
                        # tile's scores, weights and output are kept transposed, rows along vectors
CHUNK_KEYS = 512        # decode: keys per chunk when the tiles alone are too few tasks
MIN_TASKS = 6           # ... but at least this many tasks (a whole number of rounds for 2 or 3 threads)
FEW_TILES = 16          # fewer (head, row tile) tasks than this split the keys into chunks
MAX_TASKS = 64          # ... into at most this many tasks
DEAD_MASK = -1e8        # an additive mask at most this removes a score
# fewer multiply-adds than this run on the calling thread: a parallel region costs more
PARALLEL_MIN_WORK = 1 << 15


def generated_attention_enabled() -> bool:
    """False when ``RELAXSCRIPT_GENERATED_ATTENTION=0``: compile the fused attention's loop nest
    instead (to measure this kernel's own gain; ``RELAXSCRIPT_GENERATED_KERNELS=0`` turns off
    every generated kernel)."""
    return os.environ.get("RELAXSCRIPT_GENERATED_ATTENTION", "1") != "0"


def _axis_strides(shape: list[str]) -> list[str]:
    """Row-major element strides of a buffer whose dims are the C expressions ``shape``."""
    strides, acc = [], "INT64_C(1)"
    for dim in reversed(shape):
        strides.append(acc)
        acc = f"{acc} * (int64_t)({dim})"
    return list(reversed(strides))


def _micro_kernels(lanes: int) -> str:
    """The outer and dot micro-kernels for 1..ROW_TILE rows (one function per row count,
    fully unrolled), helpers shared by every attention kernel of the translation unit."""
    parts = ["#ifndef RS_ATT_HELPERS", "#define RS_ATT_HELPERS",
             # both values computed (as call arguments), one chosen by a bit mask: see _select_score
             "static inline float rs_att_select(int c, float a, float b) {",
             "  uint32_t x, y; memcpy(&x, &a, 4); memcpy(&y, &b, 4);",
             "  const uint32_t m = 0u - (uint32_t)(c != 0), r = (x & m) | (y & ~m);",
             "  float f; memcpy(&f, &r, 4); return f; }",
             f"typedef float rs_af __attribute__((vector_size({lanes * 4})));",
             "static inline rs_af rs_af_load(const float* p) { rs_af v; memcpy(&v, p, sizeof v); return v; }",
             "static inline void rs_af_store(float* p, rs_af v) { memcpy(p, &v, sizeof v); }",
             "static inline rs_af rs_af_splat(float x) { return (rs_af){" + ", ".join(["x"] * lanes) + "}; }",
             "static inline float rs_af_sum(rs_af v) { float s = 0.0f; for (int i = 0; i < "
             f"{lanes}; ++i) s += v[i]; return s; }}"]
    step = 2 * lanes
    for rows in range(1, MICRO_ROWS + 1):
        rr = range(rows)
        # c[r][j] += sum_k a[r*lda + k*ak] * b[k*ldb + j], j contiguous in b and c
        parts += [
            f"static inline void rs_att_outer{rows}(float* restrict c, int64_t ldc, const float* restrict a, "
            "int64_t lda, int64_t ak, const float* restrict b, int64_t ldb, int64_t K, int64_t cols) {",
            "  int64_t j = 0;",
            f"  for (; j + {step} <= cols; j += {step}) {{",
            *(f"    rs_af c{r}0 = rs_af_load(c + {r} * ldc + j), c{r}1 = rs_af_load(c + {r} * ldc + j + {lanes});"
              for r in rr),
            "    for (int64_t k = 0; k < K; ++k) {",
            f"      const rs_af b0 = rs_af_load(b + k * ldb + j), b1 = rs_af_load(b + k * ldb + j + {lanes});",
            *(f"      {{ const rs_af x = rs_af_splat(a[{r} * lda + k * ak]); c{r}0 += x * b0; c{r}1 += x * b1; }}"
              for r in rr),
            "    }",
            *(f"    rs_af_store(c + {r} * ldc + j, c{r}0); rs_af_store(c + {r} * ldc + j + {lanes}, c{r}1);"
              for r in rr),
            "  }",
            "  for (; j < cols; ++j) {",
            *(f"    float s{r} = c[{r} * ldc + j];" for r in rr),
            "    for (int64_t k = 0; k < K; ++k) {",
            "      const float bk = b[k * ldb + j];",
            *(f"      s{r} += a[{r} * lda + k * ak] * bk;" for r in rr),
            "    }",
            *(f"    c[{r} * ldc + j] = s{r};" for r in rr),
            "  }",
            "}",
            # c[r][j] += sum_k a[r*lda + k] * b[j*ldb + k], k contiguous in a and b
            f"static inline void rs_att_dot{rows}(float* restrict c, int64_t ldc, const float* restrict a, "
            "int64_t lda, const float* restrict b, int64_t ldb, int64_t K, int64_t cols) {",
            f"  const int64_t kv = K / {lanes} * {lanes};",
            "  int64_t j = 0;",
            "  for (; j + 2 <= cols; j += 2) {",
            "    " + " ".join(f"rs_af d{r}0 = {{0}}, d{r}1 = {{0}};" for r in rr),
            f"    for (int64_t k = 0; k < kv; k += {lanes}) {{",
            "      const rs_af b0 = rs_af_load(b + j * ldb + k), b1 = rs_af_load(b + (j + 1) * ldb + k);",
            *(f"      {{ const rs_af x = rs_af_load(a + {r} * lda + k); d{r}0 += x * b0; d{r}1 += x * b1; }}"
              for r in rr),
            "    }",
            *(f"    float s{r}0 = rs_af_sum(d{r}0), s{r}1 = rs_af_sum(d{r}1);" for r in rr),
            "    for (int64_t k = kv; k < K; ++k) {",
            *(f"      s{r}0 += a[{r} * lda + k] * b[j * ldb + k]; s{r}1 += a[{r} * lda + k] * b[(j + 1) * ldb + k];"
              for r in rr),
            "    }",
            *(f"    c[{r} * ldc + j] += s{r}0; c[{r} * ldc + j + 1] += s{r}1;" for r in rr),
            "  }",
            "  for (; j < cols; ++j) {",
            *(f"    float s{r} = 0.0f;" for r in rr),
            "    for (int64_t k = 0; k < K; ++k) {",
            *(f"      s{r} += a[{r} * lda + k] * b[j * ldb + k];" for r in rr),
            "    }",
            *(f"    c[{r} * ldc + j] += s{r};" for r in rr),
            "  }",
            "}",
        ]
    for kind, params, args in (
            ("outer", "float* restrict c, int64_t ldc, const float* restrict a, int64_t lda, int64_t ak, "
                      "const float* restrict b, int64_t ldb, int64_t K, int64_t cols",
             "c + r * ldc, ldc, a + r * lda, lda, ak, b, ldb, K, cols"),
            ("dot", "float* restrict c, int64_t ldc, const float* restrict a, int64_t lda, "
                    "const float* restrict b, int64_t ldb, int64_t K, int64_t cols",
             "c + r * ldc, ldc, a + r * lda, lda, b, ldb, K, cols")):
        cases = " ".join(f"case {n}: rs_att_{kind}{n}({args}); break;" for n in range(1, MICRO_ROWS + 1))
        parts += [f"static inline void rs_att_{kind}(int64_t rows, {params}) {{",
                  f"  for (int64_t r = 0; r < rows; r += {MICRO_ROWS}) {{",
                  f"    switch (rows - r < {MICRO_ROWS} ? rows - r : {MICRO_ROWS}) {{ {cases} }}",
                  "  }", "}"]
    # decode's in-place products with float32 operands (a float16 cache's: _half_helpers)
    parts.append(_decode_tiles(lanes, "f"))
    parts.append("#endif")
    return "\n".join(parts)


TILE_ROWS_MAX = 12      # rows of a register tile of the packed products (AVX-512: 12 x 2 vectors)


def tile_shape(vectors: int, lanes: int) -> tuple[int, int]:
    """(rows, vectors per column group) of the register tile of a product whose columns are
    ``vectors`` vectors: the most accumulators that leave a register for each column vector
    loaded and one for the broadcast (32 registers with AVX-512, else 16); of equal counts the
    wider group (fewer broadcasts per multiply-add)."""
    registers = 32 if lanes >= 16 else 16
    best = (0, 0, 0)
    for group in (4, 2, 1):
        if vectors % group:
            continue
        rows = max(1, min(TILE_ROWS_MAX, (registers - group - 1) // group))
        best = max(best, (rows * group, group, rows))
    return best[2], best[1]


def even_rows(total: int, most: int) -> int:
    """Rows per register tile that cover ``total`` rows in as few tiles of at most ``most`` rows
    as possible, evened out (32 in tiles of 12: 11 + 11 + 10, not 12 + 12 + 8)."""
    tiles = -(-total // most)
    return -(-total // tiles)


def column_tile_shapes(lanes: int, value_dim: int) -> tuple:
    """((rows, group) of the column form's score product over KEY_BLOCK keys, (rows, group) of its
    output product over ``value_dim`` rows), both over COLUMN_TILE columns."""
    rows, group = tile_shape(COLUMN_TILE // lanes, lanes)
    return (even_rows(KEY_BLOCK, rows), group), (even_rows(value_dim, rows), group)


def _tiled_product(lanes: int, rows: int, group: int, accumulate: bool) -> str:
    """``rs_att_{qk|pv}{rows}x{group}``: ``c[r][j] (+)= sum_k a[r*lda + k*ak] * b[k*ldb + j]`` for
    ``rows`` rows and ``cols`` columns (a multiple of ``lanes``), groups of ``group`` column
    vectors held in registers over the whole reduction (then single vectors); "qk" overwrites
    c (the score tile), "pv" adds to it (the output rows). Inlined where ``K`` and ``cols`` are
    constants, so the loops are fixed-trip."""
    name = f"rs_att_{'pv' if accumulate else 'qk'}{rows}x{group}"
    rr = range(rows)

    def block(width: int) -> list[str]:
        vv = range(width)
        init = (lambda r, v: f"rs_af_load(c + {r} * ldc + j + {v * lanes})") if accumulate else \
            (lambda r, v: "rs_af_splat(0.0f)")
        return [
            f"  for (; j + {width * lanes} <= cols; j += {width * lanes}) {{",
            *(f"    rs_af c{r}_{v} = {init(r, v)};" for r in rr for v in vv),
            "    for (int64_t k = 0; k < K; ++k) {",
            "      const float* restrict bk = b + k * ldb + j;",
            *(f"      const rs_af b{v} = rs_af_load(bk + {v * lanes});" for v in vv),
            *(f"      {{ const rs_af x = rs_af_splat(a[{r} * lda + k * ak]); "
              + " ".join(f"c{r}_{v} += x * b{v};" for v in vv) + " }" for r in rr),
            "    }",
            *(f"    rs_af_store(c + {r} * ldc + j + {v * lanes}, c{r}_{v});" for r in rr for v in vv),
            "  }"]
    return "\n".join([
        f"#ifndef RS_ATT_{name.upper()}", f"#define RS_ATT_{name.upper()}",
        f"static inline __attribute__((always_inline)) void {name}(float* restrict c, int64_t ldc, "
        "const float* restrict a, int64_t lda, int64_t ak, const float* restrict b, int64_t ldb, int64_t K, "
        "int64_t cols) {",
        "  int64_t j = 0;",
        *block(group),
        *(block(1) if group > 1 else []),
        "}", "#endif"])


def _tiled_products(lanes: int, kind: str, rows: int, group: int) -> str:
    """The ``kind`` ("qk"/"pv") register tiles for 1..``rows`` rows and their dispatcher
    ``rs_att_{kind}_{rows}x{group}(n, ...)`` over ``n`` rows."""
    accumulate = kind == "pv"
    parts = [_tiled_product(lanes, r, group, accumulate) for r in range(1, rows + 1)]
    name = f"rs_att_{kind}_{rows}x{group}"
    cases = " ".join(f"case {r}: rs_att_{kind}{r}x{group}(c + i * ldc, ldc, a + i * lda, lda, ak, b, ldb, K, cols); "
                     "break;" for r in range(1, rows + 1))
    parts += [f"#ifndef RS_ATT_{name.upper()}", f"#define RS_ATT_{name.upper()}",
              f"static inline __attribute__((always_inline)) void {name}(int64_t n, float* restrict c, "
              "int64_t ldc, const float* restrict a, int64_t lda, int64_t ak, const float* restrict b, int64_t ldb, "
              "int64_t K, int64_t cols) {",
              f"  for (int64_t i = 0; i < n; i += {rows}) {{",
              f"    switch (n - i < {rows} ? n - i : {rows}) {{ {cases} }}",
              "  }", "}", "#endif"]
    return "\n".join(parts)


EXP_FLOOR = -80.0       # rs_att_vexp (as the prelude's rs_expf) gives 0 below exp(-80)


def _vector_exp(lanes: int) -> str:
    """``rs_att_vexp``: exp of a vector, for the softmax's ``score - max`` (at most 0). Range
    reduction ``x = n ln2 + r`` (|r| <= ln2/2, ln2 split in two so ``n * ln2_hi`` is exact), the
    degree-7 Taylor polynomial of exp(r) (truncation below 1e-8 relative), ``2^n`` from the
    exponent bits; ``n`` by the round-to-nearest of adding 1.5 * 2^23, no float-to-int
    conversion (undefined for NaN in C). Below ``EXP_FLOOR`` 0, as ``rs_expf``; NaN stays NaN.
    Plain vector arithmetic: one code for every vector width."""
    coefficients = [1.0 / math.factorial(i) for i in range(7, 1, -1)]
    horner = "rs_af_splat(" + f"{coefficients[0]!r}f)"
    for c in coefficients[1:]:
        horner = f"({horner} * r + rs_af_splat({c!r}f))"
    return "\n".join([
        "#ifndef RS_ATT_VEXP", "#define RS_ATT_VEXP",
        f"typedef int32_t rs_ai __attribute__((vector_size({lanes * 4})));",
        "static inline rs_af rs_att_vexp(rs_af x) {",
        f"  const rs_af lo = rs_af_splat({EXP_FLOOR!r}f), hi = rs_af_splat(88.0f);",
        "  const rs_ai under = x < lo, over = x > hi;",
        "  rs_ai xi = (rs_ai)x;",
        "  xi = (xi & ~under) | ((rs_ai)lo & under);",
        "  xi = (xi & ~over) | ((rs_ai)hi & over);",
        "  x = (rs_af)xi;",
        "  const rs_af big = rs_af_splat(12582912.0f);",
        "  const rs_af kf = x * rs_af_splat(1.44269504088896341f) + big;",
        "  const rs_af n = kf - big;",
        "  const rs_af r = (x - n * rs_af_splat(0.693359375f)) - n * rs_af_splat(-2.12194440e-4f);",
        f"  const rs_af p = ({horner} * r + rs_af_splat(1.0f)) * r + rs_af_splat(1.0f);",
        "  const rs_ai e = ((rs_ai)kf - (rs_ai)big + 127) << 23;",
        "  return (rs_af)((rs_ai)(p * (rs_af)e) & ~under);",
        "}",
        *_transpose(lanes),
        # b where b > a, else a (a NaN score does not replace the running max, as the scalar max)
        "static inline rs_af rs_af_max(rs_af a, rs_af b) {",
        "  const rs_ai m = b > a; return (rs_af)(((rs_ai)b & m) | ((rs_ai)a & ~m)); }",
        "#endif"])


def _transpose(lanes: int) -> list[str]:
    """``rs_att_transpose(m)``: the lanes x lanes block in the vectors m[0..lanes) transposed in
    place, by log2(lanes) rounds of interleaving row i with row i + lanes/2 (each round moves
    one bit of the row index into the column index), two-input shuffles gcc emits as vpermt2ps
    or unpacks (a scalar copy moved the q and output tiles one float per store)."""
    half = lanes // 2
    lo = ", ".join(str(i // 2 + (lanes if i % 2 else 0)) for i in range(lanes))
    hi = ", ".join(str(half + i // 2 + (lanes if i % 2 else 0)) for i in range(lanes))
    lines = ["static inline __attribute__((always_inline)) void rs_att_transpose(rs_af* restrict m) {",
             f"  const rs_ai lo = {{{lo}}}, hi = {{{hi}}};",
             *(f"  rs_af t{i} = m[{i}];" for i in range(lanes))]
    rounds = lanes.bit_length() - 1
    for step in range(rounds):
        src, dst = ("t", "u") if step % 2 == 0 else ("u", "t")
        declare = "rs_af " if step == 0 else ""
        for i in range(half):
            pair = f"{src}{i}, {src}{i + half}"
            lines.append(f"  {declare}{dst}{2 * i} = __builtin_shuffle({pair}, lo);")
            lines.append(f"  {declare}{dst}{2 * i + 1} = __builtin_shuffle({pair}, hi);")
    final = "t" if rounds % 2 == 0 else "u"
    lines += [*(f"  m[{i}] = {final}{i};" for i in range(lanes)), "}"]
    return lines


HALF_AHEAD = 2          # column blocks of a float16 operand's row prefetched ahead
HALF_GROUP = 8          # rows of a float16 operand far apart (keys) swept together


def _half_helpers(lanes: int) -> str:
    """float16 operands (a half-precision KV cache), widened to float32 as they are loaded: 8
    at a time with F16C's ``vcvtph2ps`` (16 with AVX-512F), else by the prelude's exact bit
    conversion ``rs_half_to_float`` (``RS_ATT_NO_F16C`` forces it); products accumulate in
    float32.

    ``rs_att_outer_h`` (``_decode_tiles``) is the decode products' register tiles with a float16
    ``b``, each element loaded and widened once."""
    vec = {8: ("__m256", "_mm256_cvtph_ps", "__m128i", "_mm_loadu_si128", "defined(__F16C__) && defined(__AVX__)"),
           16: ("__m512", "_mm512_cvtph_ps", "__m256i", "_mm256_loadu_si256",
               "defined(__F16C__) && defined(__AVX512F__)")}.get(lanes)
    parts = ["#ifndef RS_ATT_HALF_HELPERS", "#define RS_ATT_HALF_HELPERS"]
    # no F16C spelling for other vector widths (SSE's 4 lanes): the bit conversion only
    parts += _widening_load("rs_att_hload", "uint16_t", lanes, "rs_half_to_float(p[i])", None if vec is None else (
        vec[0], f"{vec[1]}({vec[3]}((const {vec[2]}*)p))", vec[4], "RS_ATT_F16C", "RS_ATT_NO_F16C"))
    parts += [
        "static inline void rs_att_widen(float* restrict dst, const uint16_t* restrict src, int64_t n) {",
        "  int64_t j = 0;",
        f"  for (; j + {lanes} <= n; j += {lanes}) rs_af_store(dst + j, rs_att_hload(src + j));",
        "  for (; j < n; ++j) dst[j] = rs_half_to_float(src[j]);",
        "}"]
    parts += [_decode_tiles(lanes, "h"), "#endif"]
    return "\n".join(parts)


def _widening_load(name: str, elem: str, lanes: int, scalar: str, vector) -> list:
    """C lines of ``rs_af name(const elem* p)``: ``lanes`` values widened to float32, by
    ``vector = (register type, expression of p, guard, macro, disabling macro)`` where the guard
    holds and the disabling macro is not defined (the macro is then defined), else by ``scalar``
    (an expression of p and i) per lane. ``vector=None``: the scalar loop only."""
    lines = []
    if vector is not None:
        wide, expression, guard, macro, disable = vector
        lines += [f"#if {guard} && !defined({disable})", "#include <immintrin.h>", f"#define {macro} 1", "#endif"]
    lines.append(f"static inline rs_af {name}(const {elem}* p) {{")
    if vector is not None:
        lines += [f"#ifdef {macro}", f"  const {wide} x = {expression};",
                  "  rs_af v; memcpy(&v, &x, sizeof v); return v;", "#else"]
    lines.append(f"  rs_af v; for (int i = 0; i < {lanes}; ++i) v[i] = {scalar}; return v;")
    if vector is not None:
        lines.append("#endif")
    return lines + ["}"]


def _byte_helpers(lanes: int) -> str:
    """int8 operands (a q8 KV cache: codes, one float32 scale per head and key), widened to float32
    as they are loaded: 16 at a time with AVX-512F (``vpmovsxbd`` + ``vcvtdq2ps``), 8 with AVX2,
    else a scalar loop (``RS_ATT_NO_I8VEC`` forces it, which a test compiles); the products
    accumulate in float32 and the scales are applied outside them (``rs_att_widen_bk``: a key
    block's row times its keys' scales; ``rs_att_widen_bv``: a value row times its one scale;
    decode multiplies the scores and the weights instead, see attention_c_source).

    ``rs_att_outer_b`` (``_decode_tiles``) is the decode products' register tiles with an int8
    ``b``: a quarter of the float32 bytes, a half of float16's."""
    vec = {8: ("__m256", "_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)p)))",
               "defined(__AVX2__)"),
           16: ("__m512", "_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)p)))",
                "defined(__AVX512F__)")}.get(lanes)
    parts = ["#ifndef RS_ATT_BYTE_HELPERS", "#define RS_ATT_BYTE_HELPERS"]
    parts += _widening_load("rs_att_bload", "int8_t", lanes, "(float)p[i]", None if vec is None else (
        vec[0], vec[1], vec[2], "RS_ATT_I8VEC", "RS_ATT_NO_I8VEC"))
    parts += [
        "static inline void rs_att_widen_bk(float* restrict dst, const int8_t* restrict src, "
        "const float* restrict scale, int64_t n) {",
        "  int64_t j = 0;",
        f"  for (; j + {lanes} <= n; j += {lanes})",
        "    rs_af_store(dst + j, rs_att_bload(src + j) * rs_af_load(scale + j));",
        "  for (; j < n; ++j) dst[j] = (float)src[j] * scale[j];",
        "}",
        "static inline void rs_att_widen_bv(float* restrict dst, const int8_t* restrict src, float scale, int64_t n) {",
        "  int64_t j = 0;",
        f"  for (; j + {lanes} <= n; j += {lanes}) rs_af_store(dst + j, rs_att_bload(src + j) * rs_af_splat(scale));",
        "  for (; j < n; ++j) dst[j] = (float)src[j] * scale;",
        "}"]
    parts += [_decode_tiles(lanes, "b"), "#endif"]
    return "\n".join(parts)


def decode_widths(lanes: int, rows: int) -> tuple:
    """Column blocks (in vectors) of the decode products' register tiles for ``rows`` rows, widest
    first: rows x widest accumulators + a loaded vector per column within the registers (32 with
    AVX-512, else 16; the query rows' broadcasts are memory operands of the multiply-adds), then
    narrower blocks for what is left of the columns (a head dim of 4 vectors with AVX-512: one
    block of 4, not 3 + a latency-bound 1). With 16 registers 3 rows x 4 spilled an
    accumulator to the stack (a store-to-load round trip per step of the reduction), hence 3 x 3."""
    if lanes >= 16:
        widest = min(8, 31 // (rows + 1))
    else:
        widest = {1: 4, 2: 4, 3: 3}.get(rows, 2)
    return (widest, *(w for w in (4, 2, 1) if w < widest))


def _decode_tiles(lanes: int, kind: str) -> str:
    """``rs_att_outer_{h|f}(rows, c, ldc, a, lda, ak, b, ldb, K, cols, init)``: ``c[r][j] (+)= sum_k
    a[r*lda + k*ak] * b[k*ldb + j]`` (``init``: overwrite c) with a float16 (``h``, widened as
    loaded) or float32 ``b``, register-tiled for few rows (decode: the query heads of one kv head):
    a block of columns x all rows stays in registers over the reduction, so each element of b is
    loaded (and widened) once and the accumulators are not stored in between (the row stream
    kernel this replaced loaded and stored its output rows per step of the reduction: bound by L1
    stores). Rows of b far apart (keys: a cache ``(kv, D, capacity)``'s rows are a capacity
    apart, each on its own page) are swept HALF_GROUP at a time, a few streams the hardware
    prefetcher follows (all K rows at once were K streams: stalled on loads), with the same
    columns of the next group's rows prefetched."""
    btype, load, scalar, size = {
        "f": ("float", "rs_af_load", "b[k * ldb + j]", 4),
        "h": ("uint16_t", "rs_att_hload", "rs_half_to_float(b[k * ldb + j])", 2),
        "b": ("int8_t", "rs_att_bload", "(float)b[k * ldb + j]", 1)}[kind]
    line = 64 // size          # elements of b per cache line
    parts = [f"#ifndef RS_ATT_OUTER_{kind.upper()}", f"#define RS_ATT_OUTER_{kind.upper()}"]
    for rows in range(1, MICRO_ROWS + 1):
        rr = range(rows)
        body = [
            f"static inline void rs_att_outer_{kind}{rows}(float* restrict c, int64_t ldc, const float* restrict a, "
            f"int64_t lda, int64_t ak, const {btype}* restrict b, int64_t ldb, int64_t K, int64_t cols, int init) {{",
            f"  const int64_t kstep = ldb > cols ? {HALF_GROUP} : K;",
            "  for (int64_t k0 = 0; k0 < K; k0 += kstep) {",
            "  const int64_t k1 = k0 + kstep < K ? k0 + kstep : K;",
            "  const int zero = init && k0 == 0, ahead = kstep < K && k1 < K;",
            "  int64_t j = 0;"]
        for nv in decode_widths(lanes, rows):
            width, vv = nv * lanes, range(nv)
            body += [
                f"  for (; j + {width} <= cols; j += {width}) {{",
                *(f"    rs_af c{r}_{v} = zero ? rs_af_splat(0.0f) : rs_af_load(c + {r} * ldc + j + {v * lanes});"
                  for r in rr for v in vv),
                "    for (int64_t k = k0; k < k1; ++k) {",
                f"      const {btype}* restrict bk = b + k * ldb + j;",
                # the next group's rows at these columns (far rows), else further along this row
                *(f"      if (ahead) __builtin_prefetch(bk + {HALF_GROUP} * ldb + {o}, 0, 3);"
                  for o in range(0, width, line)),
                f"      if (!ahead) __builtin_prefetch(bk + {HALF_AHEAD * width}, 0, 3);",
                *(f"      const rs_af b{v} = {load}(bk + {v * lanes});" for v in vv),
                *(f"      {{ const rs_af x = rs_af_splat(a[{r} * lda + k * ak]); "
                  + " ".join(f"c{r}_{v} += x * b{v};" for v in vv) + " }" for r in rr),
                "    }",
                *(f"    rs_af_store(c + {r} * ldc + j + {v * lanes}, c{r}_{v});" for r in rr for v in vv),
                "  }"]
        body += [
            "  for (; j < cols; ++j) {",
            *(f"    float s{r} = zero ? 0.0f : c[{r} * ldc + j];" for r in rr),
            "    for (int64_t k = k0; k < k1; ++k) {",
            f"      const float bk = {scalar};",
            *(f"      s{r} += a[{r} * lda + k * ak] * bk;" for r in rr),
            "    }",
            *(f"    c[{r} * ldc + j] = s{r};" for r in rr),
            "  }",
            "  }",
            "}"]
        parts += body
    cases = " ".join(f"case {n}: rs_att_outer_{kind}{n}(c + r * ldc, ldc, a + r * lda, lda, ak, b, ldb, K, cols, "
                     "init); break;" for n in range(1, MICRO_ROWS + 1))
    parts += [f"static inline void rs_att_outer_{kind}(int64_t rows, float* restrict c, int64_t ldc, "
              f"const float* restrict a, int64_t lda, int64_t ak, const {btype}* restrict b, int64_t ldb, int64_t K, "
              "int64_t cols, int init) {",
              f"  for (int64_t r = 0; r < rows; r += {MICRO_ROWS}) {{",
              f"    switch (rows - r < {MICRO_ROWS} ? rows - r : {MICRO_ROWS}) {{ {cases} }}",
              "  }", "}", "#endif"]
    return "\n".join(parts)


class AttentionC:
    """The pieces of one kernel's C text that come from its PrimFunc (names, dims, strides,
    the score expression); ``attention_c_source`` assembles them."""

    def __init__(self, *, symbol: str, lanes: int, head_dim: int, value_dim: int, declarations: list[str],
                 heads: str, rows: str, keys_used: str, key_strides: dict, value_strides: dict,
                 q: str, keys: str, values: str, out: str, score: str, mask_kind: str,
                 live: str | None, fill: float, row_locals: list[str], half_keys: bool = False,
                 half_values: bool = False, row_local_parts: tuple = (), key_scale: str | None = None,
                 value_scale: str | None = None):
        self.__dict__.update(locals())
        del self.__dict__["self"]


def _product(kind: str, rows: str, c: str, ldc: str, a: str, lda: str, b: str, b_outer: str,
             b_inner: str, depth: str, cols: str) -> str:
    """One call of a micro-kernel: ``c[r][j] += sum_k a[r][k] * B(k, j)`` where B's element
    (k, j) is at ``b + k * b_outer + j * b_inner``; ``kind`` "outer" when j is contiguous
    (b_inner 1), "dot" when k is (b_outer 1)."""
    if kind == "outer":
        return f"rs_att_outer({rows}, {c}, {ldc}, {a}, {lda}, 1, {b}, {b_outer}, {depth}, {cols});"
    return f"rs_att_dot({rows}, {c}, {ldc}, {a}, {lda}, {b}, {b_inner}, {depth}, {cols});"


def _layout_kind(inner_role: str, outer_role: str, axes: str) -> str:
    """'outer' when the product's column role is the buffer's last axis, 'dot' when the
    reduced role is, else 'gather'."""
    last = axes.split(",")[-1]
    return "outer" if last == inner_role else "dot" if last == outer_role else "gather"


def attention_c_source(k: AttentionC, key_axes: str, value_axes: str) -> str:
    """``int32_t symbol(void* const* rs_buffers, const int64_t* rs_syms)``: the fused attention."""
    kb, rt, d, dv = KEY_BLOCK, ROW_TILE, k.head_dim, k.value_dim
    ks, vs = k.key_strides, k.value_strides
    # float16 or int8 (q8: codes with a float32 scale per head and key, k.key_scale the head's
    # scales) operands are widened per block, or by the decode tiles as they are loaded
    q8k, q8v = k.key_scale is not None, k.value_scale is not None
    narrow_k, narrow_v = k.half_keys or q8k, k.half_values or q8v
    ketype, vetype = ("int8_t" if q8k else "uint16_t"), ("int8_t" if q8v else "uint16_t")
    key_row_stride, value_row_stride = ks["D"], vs["M"]

    def widen_key_row(dst: str, src: str) -> str:     # row x of a key block: keys kb .. kb + w
        if q8k:
            return f"rs_att_widen_bk({dst}, {src}, {k.key_scale} + kb, w);"
        return f"rs_att_widen({dst}, {src}, w);"

    def widen_value_row(dst: str, src: str, j: str) -> str:    # the values of key kb + j
        if q8v:
            return f"rs_att_widen_bv({dst}, {src}, ({k.value_scale})[kb + {j}], {dv});"
        return f"rs_att_widen({dst}, {src}, {dv});"
    key_kind = _layout_kind("M", "D", key_axes)      # scores: columns are keys, reduced over D
    value_kind = _layout_kind("DV", "M", value_axes)  # output: columns are DV, reduced over keys
    # keys: "outer" reads (D, keys) rows along the keys; otherwise, when several micro tiles
    # share a block (pack) or the layout has neither axis innermost, the used keys are first
    # copied transposed, once per call, into kt_t (heads, D, used)
    key_transposed = key_kind != "outer"
    value_transposed = value_kind != "outer"
    key_source = f"{k.keys} + h * ({ks['B']})"
    value_source = f"{k.values} + h * ({vs['B']})"
    transposes = []
    # kt_t: the keys copied once per call, blocked (heads, blocks, D, KEY_BLOCK) (each block's
    # (D, KEY_BLOCK) tile contiguous, the packed layout itself); v_t: the values (heads, used, DV).
    # A layout with neither axis innermost always; a transposed one when several micro tiles of
    # the row form share a block (pack). (float16 operands are "outer": never copied here.)
    transposes += [
        "if (kt_t) {",
        "  #pragma omp for schedule(static)",
        "  for (int64_t hb = 0; hb < heads * key_blocks; ++hb) {",
        f"    const int64_t h = hb / key_blocks, j0 = hb % key_blocks * {kb};",
        f"    const int64_t w = used - j0 < {kb} ? used - j0 : {kb};",
        f"    float* restrict dst = kt_t + hb * {d} * {kb};",
        f"    const float* src = {key_source} + j0 * ({ks['M']});",
        f"    for (int64_t x = 0; x < {d}; ++x) {{",
        f"      for (int64_t j = 0; j < w; ++j) dst[x * {kb} + j] = src[j * ({ks['M']}) + x * ({ks['D']})];",
        # a ragged last block is zero-padded: the score product then runs whole vectors
        f"      for (int64_t j = w; j < {kb}; ++j) dst[x * {kb} + j] = 0.0f;",
        "    }",
        "  }",
        "}"]
    transposes += [
        "if (v_t) {",
        "  #pragma omp for schedule(static)",
        "  for (int64_t hj = 0; hj < heads * used; ++hj) {",
        "    const int64_t h = hj / used, j = hj % used;",
        f"    float* restrict dst = v_t + hj * {dv};",
        f"    const float* src = {value_source} + j * ({vs['M']});",
        f"    for (int64_t x = 0; x < {dv}; ++x) dst[x] = src[x * ({vs['DV']})];",
        "  }",
        "}"]
    qk_rows, qk_group = tile_shape(kb // k.lanes, k.lanes)
    tiled_pv = dv % k.lanes == 0
    pv_rows, pv_group = tile_shape(dv // k.lanes, k.lanes) if tiled_pv else (0, 0)

    def qk(block: str) -> str:     # scores of the tile over a packed, zero-padded key block
        return f"rs_att_qk_{qk_rows}x{qk_group}(rows, s, {kb}, qt, {d}, 1, {block}, {kb}, {d}, {kb});"

    def pv(block: str, ld: str) -> str:     # the output rows += weights x a block of values
        if tiled_pv:
            return f"rs_att_pv_{pv_rows}x{pv_group}(rows, o, {dv}, s, {kb}, 1, {block}, {ld}, w, {dv});"
        return f"rs_att_outer(rows, o, {dv}, s, {kb}, 1, {block}, {ld}, w, {dv});"

    combine = [    # the rows of tile ``tile``: their chunks' partials merged
        "for (int64_t r = 0; r < rows; ++r) {",
        "  float mx = -INFINITY;",
        "  for (int64_t c = 0; c < chunks; ++c) {",
        f"    const float m = partials[((tile * chunks + c) * {rt} + r) * ({dv} + 2)];",
        "    mx = m > mx ? m : mx;",
        "  }",
        f"  float acc[{dv}] = {{0}};",
        "  float total = 0.0f;",
        "  for (int64_t c = 0; c < chunks; ++c) {",
        f"    const float* part = partials + ((tile * chunks + c) * {rt} + r) * ({dv} + 2);",
        "    const float weight = rs_expf(part[0] - mx);",
        "    total += weight * part[1];",
        f"    for (int64_t x = 0; x < {dv}; ++x) acc[x] += weight * part[2 + x];",
        "  }",
        "  const float inv = 1.0f / total;",
        f"  float* restrict dst = {k.out} + (h * head_rows + i0 + r) * {dv};",
        f"  for (int64_t x = 0; x < {dv}; ++x) dst[x] = acc[x] * inv;",
        "}",
    ]

    packed_block = f"kt_t + (h * key_blocks + kb / {kb}) * {d} * {kb}"

    def packed_key_block() -> list[str]:
        """The scores s (rows x KEY_BLOCK) of a block: from kt_t, else packed into kpack
        (zero-padded) and multiplied there, else (few rows) in place over its w keys."""
        if narrow_k:   # float16 keys, "outer" layout (attention_c checks it)
            return [
                f"if (kt_t) {qk(packed_block)}",
                "else {",
                f"  const {ketype}* restrict kin = {key_source} + kb * ({ks['M']});",
                f"  if (kb + {kb} < k1) for (int64_t x = 0; x < {d}; ++x) {{",
                f"    __builtin_prefetch(kin + x * ({ks['D']}) + {kb}, 0, 3);",
                f"    __builtin_prefetch(kin + x * ({ks['D']}) + {kb + 32}, 0, 3); }}",
                f"  for (int64_t x = 0; x < {d}; ++x) {{ "
                + widen_key_row(f"kpack + x * {kb}", f"kin + x * ({key_row_stride})"),
                f"    if (w < {kb}) memset(kpack + x * {kb} + w, 0, (size_t)({kb} - w) * sizeof(float)); }}",
                f"  {qk('kpack')}",
                "}"]
        if key_kind == "outer":
            return [
                f"if (kt_t) {qk(packed_block)}",
                "else {",
                f"  const float* restrict kin = {key_source} + kb * ({ks['M']});",
                # rows a cache's capacity apart are as many streams as the head dim: the hardware
                # prefetcher does not follow them, so the next block's lines are asked for here
                f"  if (kb + {kb} < k1) for (int64_t x = 0; x < {d}; ++x) {{",
                f"    __builtin_prefetch(kin + x * ({ks['D']}) + {kb}, 0, 3);",
                f"    __builtin_prefetch(kin + x * ({ks['D']}) + {kb + 16}, 0, 3); }}",
                "  if (pack) {",     # the block in L1, rows one after another: every micro tile reads it
                f"    for (int64_t x = 0; x < {d}; ++x) {{",
                f"      memcpy(kpack + x * {kb}, kin + x * ({ks['D']}), (size_t)w * sizeof(float));",
                f"      if (w < {kb}) memset(kpack + x * {kb} + w, 0, (size_t)({kb} - w) * sizeof(float));",
                "    }",
                f"    {qk('kpack')}",
                "  } else {",
                "    memset(s, 0, sizeof s);",
                f"    rs_att_outer(rows, s, {kb}, qt, {d}, 1, kin, {ks['D']}, {d}, w);",
                "  }",
                "}"]
        if key_kind == "dot":    # kt_t when pack
            return [f"if (kt_t) {qk(packed_block)}",
                    "else {",
                    "  memset(s, 0, sizeof s);",
                    "  " + _product("dot", "rows", "s", str(kb), "qt", str(d), f"{key_source} + kb * ({ks['M']})",
                                    ks["D"], ks["M"], str(d), "w"),
                    "}"]
        return [qk(packed_block)]     # gathered: kt_t always

    def packed_value_block() -> list[str]:
        """o (rows x DV) += p (rows x w) x the block's values: from v_t, else in place or packed."""
        from_vt = pv(f"v_t + (h * used + kb) * {dv}", str(dv))
        # One call of the (always inlined) row-tile driver after the source is chosen: a call
        # per source compiled the driver's row variants once each (15% of a Llama module's gcc time)
        if narrow_v:   # float16 values, "outer" layout
            return [f"const float* restrict pv_src = v_t ? v_t + (h * used + kb) * {dv} : vpack;",
                    "if (!v_t) {",
                    f"  const {vetype}* restrict vin = {value_source} + kb * ({vs['M']});",
                    f"  for (int64_t j = 0; j < w; ++j) "
                    f"{widen_value_row(f'vpack + j * {dv}', f'vin + j * ({value_row_stride})', 'j')}",
                    "}",
                    pv("pv_src", str(dv))]
        if value_kind == "outer":
            return ["const float* restrict pv_src;",
                    "int64_t pv_ld;",
                    f"if (v_t) {{ pv_src = v_t + (h * used + kb) * {dv}; pv_ld = {dv}; }}",
                    "else {",
                    f"  const float* restrict vin = {value_source} + kb * ({vs['M']});",
                    f"  if (pack && ({vs['M']}) != {dv}) {{",
                    f"    for (int64_t j = 0; j < w; ++j) memcpy(vpack + j * {dv}, vin + j * ({vs['M']}), "
                    f"{dv} * sizeof(float));",
                    f"    pv_src = vpack; pv_ld = {dv};",
                    f"  }} else {{ pv_src = vin; pv_ld = {vs['M']}; }}",
                    "}",
                    pv("pv_src", "pv_ld")]
        if value_kind == "dot":     # v_t when pack
            return [f"if (v_t) {from_vt}",
                    "else " + _product("dot", "rows", "o", str(dv), "s", str(kb), f"{value_source} + kb * ({vs['M']})",
                                       vs["M"], vs["DV"], "w", str(dv))]
        return [from_vt]     # gathered: v_t always

    def packed_softmax(row_locals: list[str]) -> list[str]:
        """Per row of the tile: the score expression and the running max in one pass over the
        block, then exp (vectorized, rs_att_vexp) and the sum in a second; the columns past w
        are -inf (weight 0)."""
        return [
            "for (int64_t r = 0; r < rows; ++r) {",
            "  const int64_t rs_row = i0 + r;",
            *row_locals,
            f"  float* restrict sr = s + r * {kb};",
            "  float mx = rmax[r];",
            "  #pragma omp simd reduction(max:mx)",
            "  for (int64_t j = 0; j < w; ++j) {",
            "    const int64_t rs_key = kb + j;",
            "    const float rs_s = sr[j];",
            f"    const float rs_v = {k.score};",
            "    sr[j] = rs_v;",
            "    mx = rs_v > mx ? rs_v : mx;",
            "  }",
            f"  for (int64_t j = w; j < {kb}; ++j) sr[j] = -INFINITY;",
            "  const rs_af mv = rs_af_splat(mx);",
            "  rs_af acc = rs_af_splat(0.0f);",
            f"  for (int64_t j = 0; j < {kb}; j += {k.lanes}) {{",
            "    const rs_af p = rs_att_vexp(rs_af_load(sr + j) - mv);",
            "    rs_af_store(sr + j, p);",
            "    acc += p;",
            "  }",
            # the max moves in few blocks (about log of their count): rescale only then; the
            # sums stay vectors until the end (a horizontal sum per block was a chain of adds)
            "  if (mx != rmax[r]) {",
            "    const float alpha = rs_expf(rmax[r] - mx);",
            "    rsumv[r] = rsumv[r] * rs_af_splat(alpha) + acc;",
            f"    for (int64_t x = 0; x < {dv}; ++x) o[r * {dv} + x] *= alpha;",
            "  } else rsumv[r] += acc;",
            "  rmax[r] = mx;",
            "}"]

    ct = COLUMN_TILE
    col_vectors = ct // k.lanes
    column_tiles = column_tile_shapes(k.lanes, dv)
    # the column form's key block: K(j, x) broadcast from a[j * lda + x * ak]. float32 keys in
    # place (a cache's (kv, D, capacity) too: a register tile's keys at one x are contiguous); a
    # layout with neither axis innermost from kt_t; float16 widened per block into kpack
    # (D, KEY_BLOCK) by each task. Copies once per call before the tasks were rejected: their
    # barrier waits for a descheduled thread on a loaded machine (a 16-token float16 prefill:
    # 0.37-0.48 ms against 0.16-0.27 without, two threads); copying float32 cache blocks per task
    # was 15% slower than reading them in place (their rows, 8 KiB apart, share one L1 set)
    if key_kind == "dot" or (key_kind == "outer" and not narrow_k):
        col_keys, col_key_pack = (f"{key_source} + kb * ({ks['M']})", ks["M"], ks["D"]), []
    elif key_kind == "gather":
        col_keys, col_key_pack = (packed_block, "1", str(kb)), []
    else:
        col_keys = ("kpack", "1", str(kb))
        col_key_pack = [
            f"const {ketype}* restrict kin = {key_source} + kb * ({ks['M']});",
            # rows a capacity apart are as many streams as the head dim: the hardware prefetcher
            # does not follow them, so the next block's lines are asked for here
            f"if (kb + {kb} < used) for (int64_t x = 0; x < {d}; ++x) {{",
            f"  __builtin_prefetch(kin + x * ({ks['D']}) + {kb}, 0, 3);",
            f"  __builtin_prefetch(kin + x * ({ks['D']}) + {kb + 32}, 0, 3); }}",
            f"for (int64_t x = 0; x < {d}; ++x) "
            + widen_key_row(f"kpack + x * {kb}", f"kin + x * ({key_row_stride})")]
    # values V(j, x) from a[x * lda + j * ak]: in place, unless float16 (widened per block into
    # vpack) or float32 rows a multiple of 4 KiB apart (a block's rows then share a few L1 sets
    # and evict each other between the output's register tiles; copying rows 2 KiB apart
    # measured 2-5% slower than reading them in place); gathered from v_t
    far = vs["M"] if value_kind == "outer" else vs["DV"]
    col_values_in_place = (f"{value_source} + kb * ({vs['M']})", vs["DV"], vs["M"])
    col_values_packed = ("vpack", "1", str(dv))
    if narrow_v:
        col_value_pack = [f"const {vetype}* restrict vin = {value_source} + kb * ({vs['M']});",
                          f"for (int64_t j = 0; j < w; ++j) "
                          f"{widen_value_row(f'vpack + j * {dv}', f'vin + j * ({value_row_stride})', 'j')}"]
    else:
        col_value_pack = [f"const float* restrict vin = {value_source} + kb * ({vs['M']});",
                          f"for (int64_t j = 0; j < w; ++j) for (int64_t x = 0; x < {dv}; ++x) "
                          f"vpack[j * {dv} + x] = vin[j * ({vs['M']}) + x * ({vs['DV']})];"]
    # the column form's per-row locals: those that read the row in arrays filled once per task
    # (read per lane), the others (e.g. constants of the mask's arithmetic) once per task
    row_arrays = [(t, n, e) for t, n, e, per_row in k.row_local_parts if per_row]
    task_locals = [f"const {t} {n} = {e}; (void){n};" for t, n, e, per_row in k.row_local_parts if not per_row]
    # inside a loop over the tile's rows r: the per-row locals read from arrays filled once per task
    row_reads = [f"const {t} {n} = {n}_a[r]; (void){n};" for t, n, _ in row_arrays]

    def column_body() -> list[str]:
        """One task of the column form: rows i0..i0+rows (at most COLUMN_TILE) of head h over all
        keys, chunks == 1. The score tile sT (keys x rows), the weights in its place and the output
        oT (DV x rows) are transposed, the rows along vectors: sT = K qT and oT += V^T pT are
        register-tiled products that read the keys and values as broadcasts (in place when a
        key's D values are contiguous, no per-call transpose), and the online softmax's max,
        exp and sums run down the key axis, vector by vector, with no horizontal reductions."""
        floor = (f"{k.fill!r}f + 104.0f" if k.mask_kind == "where" else f"{DEAD_MASK / 10!r}f")
        skip = [] if k.live is None else [
            "int dead = 1;",
            "for (int64_t r = 0; r < rows; ++r) if (!(cm[r] > " + floor + ")) { dead = 0; break; }",
            # the block's first key first (a causal mask's last rows allow it: most live blocks
            # end here), then the others into a flag per row: no horizontal reduction per key
            "if (dead) {",
            "  const int64_t rs_key = kb;",
            "  int live = 0;",
            "  #pragma omp simd reduction(|:live)",
            "  for (int64_t r = 0; r < rows; ++r) {",
            "    const int64_t rs_row = i0 + r;",
            *(f"    {line}" for line in row_reads),
            f"    live |= ({k.live}) != 0;",
            "  }",
            "  if (live) dead = 0;",
            "}",
            "if (dead && w > 1) {",
            f"  int32_t lv[{ct}] = {{0}};",
            "  for (int64_t j = 1; j < w; ++j) {",
            "    const int64_t rs_key = kb + j;",
            "    #pragma omp simd",
            "    for (int64_t r = 0; r < rows; ++r) {",
            "      const int64_t rs_row = i0 + r;",
            *(f"      {line}" for line in row_reads),
            f"      lv[r] |= ({k.live}) != 0;",
            "    }",
            "  }",
            "  int32_t any = 0;",
            "  for (int64_t r = 0; r < rows; ++r) any |= lv[r];",
            "  if (any) dead = 0;",
            "}",
            "if (dead) continue;"]
        (qr, qg), (pr, pg) = column_tiles
        L = k.lanes
        q_transposed = [
            f"for (int64_t r0 = 0; r0 < {ct}; r0 += {L}) for (int64_t x0 = 0; x0 < {d}; x0 += {L}) {{",
            f"  rs_af m[{L}];",
            f"  for (int64_t i = 0; i < {L}; ++i) m[i] = r0 + i < rows ? "
            f"rs_af_load({k.q} + (h * head_rows + i0 + r0 + i) * {d} + x0) : rs_af_splat(0.0f);",
            "  rs_att_transpose(m);",
            f"  for (int64_t i = 0; i < {L}; ++i) rs_af_store(qT + (x0 + i) * {ct} + r0, m[i]);",
            "}"]
        out_transposed = [
            f"for (int64_t r0 = 0; r0 < rows; r0 += {L}) for (int64_t x0 = 0; x0 < {dv}; x0 += {L}) {{",
            f"  rs_af m[{L}];",
            f"  for (int64_t i = 0; i < {L}; ++i) m[i] = rs_af_load(oT + (x0 + i) * {ct} + r0);",
            "  rs_att_transpose(m);",
            f"  for (int64_t i = 0; i < {L} && r0 + i < rows; ++i)",
            f"    rs_af_store({k.out} + (h * head_rows + i0 + r0 + i) * {dv} + x0, "
            "m[i] * rs_af_splat(1.0f / rsum[r0 + i]));",
            "}"]
        key_ptr, key_ld, key_ak = col_keys
        vv = range(col_vectors)
        if value_kind == "gather":
            values = [pv_call(f"v_t + (h * used + kb) * {dv}", "1", str(dv))]
        elif narrow_v:
            values = [*col_value_pack, pv_call(*col_values_packed)]
        else:
            values = [f"if (({far}) * 4 % 4096 == 0) {{", *("  " + line for line in col_value_pack),
                      f"  {pv_call(*col_values_packed)}", f"}} else {pv_call(*col_values_in_place)}"]
        return [
            "const int64_t tile = task;",
            f"const int64_t h = tile % heads, i0 = (row_tiles - 1 - tile / heads) * {ct};",
            f"const int64_t rows = head_rows - i0 < {ct} ? head_rows - i0 : {ct};",
            f"float qT[{d} * {ct}] __attribute__((aligned(64)));",
            f"float sT[{kb} * {ct}] __attribute__((aligned(64)));",
            f"float oT[{dv} * {ct}] __attribute__((aligned(64)));",
            f"float cm[{ct}] __attribute__((aligned(64)));",
            *([f"float kpack[{d} * {kb}] __attribute__((aligned(64)));"] if col_key_pack else []),
            *([f"float vpack[{kb} * {dv}] __attribute__((aligned(64)));"] if value_kind != "gather" else []),
            f"rs_af sumv[{col_vectors}];",
            *(f"{t} {n}_a[{ct}];" for t, n, _ in row_arrays),
            *task_locals,
            "for (int64_t r = 0; r < rows; ++r) {",
            "  const int64_t rs_row = i0 + r;",
            *(f"  {n}_a[r] = {e};" for _, n, e in row_arrays),
            "}",
            # rows past the tile's: zero queries, finite scores, never written out
            *(q_transposed if d % L == 0 else [
                "for (int64_t r = 0; r < rows; ++r) {",
                f"  const float* restrict qr = {k.q} + (h * head_rows + i0 + r) * {d};",
                f"  for (int64_t x = 0; x < {d}; ++x) qT[x * {ct} + r] = qr[x];",
                "}",
                f"for (int64_t r = rows; r < {ct}; ++r) for (int64_t x = 0; x < {d}; ++x) qT[x * {ct} + r] = 0.0f;"]),
            "memset(oT, 0, sizeof oT);",
            f"for (int64_t r = 0; r < {ct}; ++r) cm[r] = -INFINITY;",
            *(f"sumv[{v}] = rs_af_splat(0.0f);" for v in vv),
            f"for (int64_t kb = 0; kb < used; kb += {kb}) {{",
            f"  const int64_t w = used - kb < {kb} ? used - kb : {kb};",
            *(f"  {line}" for line in skip),
            *(f"  {line}" for line in col_key_pack),
            f"  rs_att_qk_{qr}x{qg}(w, sT, {ct}, {key_ptr}, {key_ld}, {key_ak}, qT, {ct}, {d}, {ct});",
            # the score expression along each key's row of rows, then the running max down the keys
            *(f"  rs_af mnew{v} = rs_af_load(cm + {v * k.lanes});" for v in vv),
            "  for (int64_t j = 0; j < w; ++j) {",
            "    const int64_t rs_key = kb + j;",
            f"    float* restrict sj = sT + j * {ct};",
            "    #pragma omp simd",
            "    for (int64_t r = 0; r < rows; ++r) {",
            "      const int64_t rs_row = i0 + r;",
            *(f"      {line}" for line in row_reads),
            "      const float rs_s = sj[r];",
            f"      sj[r] = {k.score};",
            "    }",
            *(f"    mnew{v} = rs_af_max(mnew{v}, rs_af_load(sj + {v * k.lanes}));" for v in vv),
            "  }",
            *(f"  const rs_af mold{v} = rs_af_load(cm + {v * k.lanes});" for v in vv),
            *(f"  rs_af bsum{v} = rs_af_splat(0.0f);" for v in vv),
            "  for (int64_t j = 0; j < w; ++j) {",
            f"    float* restrict sj = sT + j * {ct};",
            *(f"    {{ const rs_af p = rs_att_vexp(rs_af_load(sj + {v * k.lanes}) - mnew{v}); "
              f"rs_af_store(sj + {v * k.lanes}, p); bsum{v} += p; }}" for v in vv),
            "  }",
            # the max moves in few blocks (about the log of their count): rescale only then
            *(f"  rs_af_store(cm + {v * k.lanes}, mnew{v});" for v in vv),
            *(f"  {{ const rs_af alpha = rs_att_vexp(mold{v} - mnew{v}); sumv[{v}] = sumv[{v}] * alpha + bsum{v};"
              f" if (memcmp(&mold{v}, &mnew{v}, sizeof(rs_af))) for (int64_t x = 0; x < {dv}; ++x) {{"
              f" float* restrict ox = oT + x * {ct} + {v * k.lanes}; rs_af_store(ox, rs_af_load(ox) * alpha); }} }}"
              for v in vv),
            *(f"  {line}" for line in values),
            "}",
            f"float rsum[{ct}] __attribute__((aligned(64)));",
            *(f"rs_af_store(rsum + {v * k.lanes}, sumv[{v}]);" for v in vv),
            *(out_transposed if dv % L == 0 else [
                "for (int64_t r = 0; r < rows; ++r) {",
                "  const float inv = 1.0f / rsum[r];",
                f"  float* restrict dst = {k.out} + (h * head_rows + i0 + r) * {dv};",
                f"  for (int64_t x = 0; x < {dv}; ++x) dst[x] = oT[x * {ct} + r] * inv;",
                "}"])]

    def pv_call(ptr: str, lda: str, ak: str) -> str:
        (pr, pg) = column_tiles[1]
        return f"rs_att_pv_{pr}x{pg}({dv}, oT, {ct}, {ptr}, {lda}, {ak}, sT, {ct}, w, {ct});"

    def task_body(kb: int) -> list[str]:
        """One task's C statements with blocks of ``kb`` keys: packed blocks for several
        micro tiles, else (``kb`` > KEY_BLOCK: decode) in place, register-tiled over all rows
        (``rs_att_outer_f``/``_h``: each operand element loaded once)."""
        # kcols: the score columns computed. A block copied into kpack or kt_t is zero-padded to
        # kb keys, so its product runs whole vectors over all kb columns (the scores past w are
        # never read); rs_att_outer's column tail is scalar, which made a ragged block (n = 31:
        # 31 keys) cost 6x a whole one. Keys read in place compute only their w columns.
        key_block = [
            "const float* restrict kblock; int64_t kld, kcols = w;",
            *([f"if (kt_t) {{ kblock = kt_t + (h * key_blocks + kb / {kb}) * {d} * {kb}; kld = {kb}; "
               f"kcols = {kb}; }} else"]
              if key_transposed else []),
            f"{{ kblock = {key_source} + kb * ({ks['M']}); kld = {ks['D']}; }}",
            # rows a cache's capacity apart are as many streams as the head dim: the hardware
            # prefetcher does not follow them, so the next block's lines are asked for here
            f"if (kld != {kb} && kb + {kb} < k1) for (int64_t x = 0; x < {d}; ++x) {{",
            f"  __builtin_prefetch(kblock + x * kld + {kb}, 0, 3);",
            f"  __builtin_prefetch(kblock + x * kld + {kb + 16}, 0, 3); }}",
            # the block in L1, rows one after another: every micro tile reads it
            f"if (pack && kld != {kb}) {{",
            f"  for (int64_t x = 0; x < {d}; ++x) {{",
            f"    memcpy(kpack + x * {kb}, kblock + x * kld, (size_t)w * sizeof(float));",
            f"    if (w < {kb}) memset(kpack + x * {kb} + w, 0, (size_t)({kb} - w) * sizeof(float));",
            "  }",
            f"  rs_att_outer(rows, s, {kb}, qt, {d}, 1, kpack, {kb}, {d}, {kb});",
            "}",
        ]
        if narrow_k:   # float16 keys, "outer" layout (attention_c checks it)
            key_block = [
                f"const {ketype}* restrict kblock = {key_source} + kb * ({ks['M']});",
                f"const int64_t kld = {ks['D']};",
                f"if (kb + {kb} < k1) for (int64_t x = 0; x < {d}; ++x) {{",
                f"  __builtin_prefetch(kblock + x * kld + {kb}, 0, 3);",
                f"  __builtin_prefetch(kblock + x * kld + {kb + 32}, 0, 3); }}"]
            if kb == KEY_BLOCK:
                key_block += [
                    f"for (int64_t x = 0; x < {d}; ++x) {{ {widen_key_row(f'kpack + x * {kb}', 'kblock + x * kld')}",
                    f"  if (w < {kb}) memset(kpack + x * {kb} + w, 0, (size_t)({kb} - w) * sizeof(float)); }}",
                    f"rs_att_outer(rows, s, {kb}, qt, {d}, 1, kpack, {kb}, {d}, {kb});"]
            else:
                # q8: the codes' products, each score then times its key's scale (in the score loop)
                key_block += [f"rs_att_outer_{'b' if q8k else 'h'}(rows, s, {kb}, qt, {d}, 1, kblock, kld, {d}, w, 1);"]
        elif key_kind == "dot":
            in_place = f"{key_source} + kb * ({ks['M']})"
            key_block += ["else if (!kt_t) " + _product("dot", "rows", "s", str(kb), "qt", str(d),
                                                       in_place, ks["D"], ks["M"], str(d), "w"),
                          f"else rs_att_outer(rows, s, {kb}, qt, {d}, 1, kblock, kld, {d}, kcols);"]
        else:
            key_block += [f"else rs_att_outer_f(rows, s, {kb}, qt, {d}, 1, kblock, kld, {d}, kcols, 1);"]
        value_block = [
            "const float* restrict vblock; int64_t vld;",
            *([f"if (v_t) {{ vblock = v_t + (h * used + kb) * {dv}; vld = {dv}; }} else"] if value_transposed else []),
            f"{{ vblock = {value_source} + kb * ({vs['M']}); vld = {vs['M']}; }}",
        ]
        if narrow_v:   # float16 values, "outer" layout
            value_block = [f"const {vetype}* restrict vblock = {value_source} + kb * ({vs['M']});",
                           f"const int64_t vld = {vs['M']};"]
            if kb == KEY_BLOCK:
                value_block += [f"for (int64_t j = 0; j < w; ++j) "
                                f"{widen_value_row(f'vpack + j * {dv}', 'vblock + j * vld', 'j')}",
                                f"rs_att_outer(rows, o, {dv}, s, {kb}, 1, vpack, {dv}, w, {dv});"]
            else:
                if q8v:   # the weights times their values' scales (the sums took them unscaled)
                    value_block += [
                        f"{{ const float* restrict vsc = {k.value_scale} + kb;",
                        "  for (int64_t r = 0; r < rows; ++r) {",
                        f"    float* restrict sr = s + r * {kb};",
                        "    #pragma omp simd",
                        "    for (int64_t j = 0; j < w; ++j) sr[j] *= vsc[j];",
                        "  } }"]
                value_block += [f"rs_att_outer_{'b' if q8v else 'h'}(rows, o, {dv}, s, {kb}, 1, vblock, vld, w, "
                                f"{dv}, 0);"]
        elif value_kind == "dot":
            in_place = f"{value_source} + kb * ({vs['M']})"
            value_block += ["if (!v_t) " + _product("dot", "rows", "o", str(dv), "s", str(kb),
                                                   in_place, vs["M"], vs["DV"], "w", str(dv)),
                            f"else rs_att_outer(rows, o, {dv}, s, {kb}, 1, vblock, vld, w, {dv});"]
        else:
            value_block += [
                f"if (pack && vld != {dv}) {{",
                f"  for (int64_t j = 0; j < w; ++j) memcpy(vpack + j * {dv}, vblock + j * vld, {dv} * sizeof(float));",
                f"  vblock = vpack; vld = {dv};",
                "}",
                f"rs_att_outer_f(rows, o, {dv}, s, {kb}, 1, vblock, vld, w, {dv}, 0);"]
        row_locals = [f"  {line}" for line in k.row_locals]
        if k.live is None:
            skip = []
        else:
            # the block is skipped when no score of the tile survives the mask and the weights
            # of the removed ones are exactly 0 at every row's running max
            floor = (f"{k.fill!r}f + 104.0f" if k.mask_kind == "where" else f"{DEAD_MASK / 10!r}f")
            skip = [
                "int dead = 1;",
                "for (int64_t r = 0; r < rows && dead; ++r) {",
                "  const int64_t rs_row = i0 + r;",
                *row_locals,
                "  if (!(rmax[r] > " + floor + ")) { dead = 0; break; }",
                "  for (int64_t j = 0; j < w; ++j) {",
                "    const int64_t rs_key = kb + j;",
                f"    if ({k.live}) {{ dead = 0; break; }}",
                "  }",
                "}",
                "if (dead) continue;"]
            if kb == KEY_BLOCK:    # the row maxima first, then each row's mask in one vector pass
                skip = [
                    "int dead = 1;",
                    "for (int64_t r = 0; r < rows; ++r) if (!(rmax[r] > " + floor + ")) { dead = 0; break; }",
                    "for (int64_t r = 0; r < rows && dead; ++r) {",
                    "  const int64_t rs_row = i0 + r;",
                    *row_locals,
                    "  int live = 0;",
                    "  #pragma omp simd reduction(|:live)",
                    f"  for (int64_t j = 0; j < w; ++j) {{ const int64_t rs_key = kb + j; live |= ({k.live}) != 0; }}",
                    "  if (live) dead = 0;",
                    "}",
                    "if (dead) continue;"]
        if kb == KEY_BLOCK:
            key_block, value_block = packed_key_block(), packed_value_block()
            block_body = [*key_block, *packed_softmax(row_locals), *value_block]
        else:
            block_body = [
                # the in-place products of "outer" keys overwrite the scores; the others add to them
                *([] if narrow_k or key_kind == "outer" else ["memset(s, 0, sizeof s);"]),
                *key_block,
                "for (int64_t r = 0; r < rows; ++r) {",
                "  const int64_t rs_row = i0 + r;",
                *row_locals,
                f"  float* restrict sr = s + r * {kb};",
                *([f"  const float* restrict ksc = {k.key_scale} + kb;"] if q8k else []),
                "  float mx = rmax[r];",    # the scores and their max in one pass
                "  #pragma omp simd reduction(max:mx)",
                "  for (int64_t j = 0; j < w; ++j) {",
                "    const int64_t rs_key = kb + j;",
                f"    const float rs_s = sr[j]{' * ksc[j]' if q8k else ''};",
                f"    const float rs_v = {k.score};",
                "    sr[j] = rs_v;",
                "    mx = rs_v > mx ? rs_v : mx;",
                "  }",
                "  const float alpha = rs_expf(rmax[r] - mx);",
                # the exps a vector at a time (rs_att_vexp), the block's last vector padded with
                # -inf (weight 0): a scalar rs_expf loop stayed scalar, its sum a store-to-load
                # chain through memory (two thirds of the decode kernel's time at 1024 keys)
                f"  const int64_t wv = (w + {k.lanes - 1}) / {k.lanes} * {k.lanes};",
                "  for (int64_t j = w; j < wv; ++j) sr[j] = -INFINITY;",
                "  const rs_af mv = rs_af_splat(mx);",
                "  rs_af acc = rs_af_splat(0.0f);",
                f"  for (int64_t j = 0; j < wv; j += {k.lanes}) {{",
                "    const rs_af p = rs_att_vexp(rs_af_load(sr + j) - mv);",
                "    rs_af_store(sr + j, p);",
                "    acc += p;",
                "  }",
                "  rsum[r] = rsum[r] * alpha + rs_af_sum(acc);",
                "  rmax[r] = mx;",
                f"  if (alpha != 1.0f) for (int64_t x = 0; x < {dv}; ++x) o[r * {dv} + x] *= alpha;",
                "}",
                *value_block]
        task = [
            "const int64_t tile = task / chunks, chunk = task % chunks;",
            # the last row tiles of every head first: with a causal mask they have the most keys,
            # and the dynamic schedule ends on the short ones (the threads finish together)
            f"const int64_t h = tile % heads, i0 = (row_tiles - 1 - tile / heads) * {rt};",
            f"const int64_t rows = head_rows - i0 < {rt} ? head_rows - i0 : {rt};",
            "const int64_t k0 = chunk * chunk_keys;",
            "const int64_t k1 = k0 + chunk_keys < used ? k0 + chunk_keys : used;",
            f"const float* restrict qt = {k.q} + (h * head_rows + i0) * {d};",
            f"float s[{rt if kb == KEY_BLOCK else MICRO_ROWS} * {kb}] __attribute__((aligned(64)));",
            f"float o[{rt} * {dv}] __attribute__((aligned(64)));",
            # packed blocks: only with the short blocks (in place, pack is 0 and they are unused)
            (f"float kpack[{d} * {kb}] __attribute__((aligned(64)));" if kb == KEY_BLOCK
             else "float* const kpack = NULL; const int pack = 0; (void)pack;"),
            *([f"float vpack[{kb} * {dv}] __attribute__((aligned(64)));" if kb == KEY_BLOCK
               else "float* const vpack = NULL;"] if not value_transposed else []),
            f"float rmax[{rt}], rsum[{rt}];",
            f"for (int64_t r = 0; r < {rt}; ++r) rmax[r] = -INFINITY, rsum[r] = 0.0f;",
            f"memset(o, 0, (size_t)rows * {dv} * sizeof(float));",    # the rows past ``rows`` are never read
            *([f"rs_af rsumv[{rt}];", f"for (int64_t r = 0; r < {rt}; ++r) rsumv[r] = rs_af_splat(0.0f);"]
              if kb == KEY_BLOCK else []),
            f"for (int64_t kb = k0; kb < k1; kb += {kb}) {{",
            f"  const int64_t w = k1 - kb < {kb} ? k1 - kb : {kb};",
            *(f"  {line}" for line in skip),
            *(f"  {line}" for line in block_body),
            "}",
            *(["for (int64_t r = 0; r < rows; ++r) rsum[r] = rs_af_sum(rsumv[r]);"] if kb == KEY_BLOCK else []),
            "if (chunks == 1) {",
            "  for (int64_t r = 0; r < rows; ++r) {",
            "    const float inv = 1.0f / rsum[r];",
            f"    float* restrict dst = {k.out} + (h * head_rows + i0 + r) * {dv};",
            f"    for (int64_t x = 0; x < {dv}; ++x) dst[x] = o[r * {dv} + x] * inv;",
            "  }",
            "} else {",
            "  for (int64_t r = 0; r < rows; ++r) {",
            f"    float* restrict part = partials + (task * {rt} + r) * ({dv} + 2);",
            "    part[0] = rmax[r]; part[1] = rsum[r];",
            f"    memcpy(part + 2, o + r * {dv}, {dv} * sizeof(float));",
            "  }",
            # the tile's last chunk to finish combines them: no barrier between the phases
            # (each one costs a scheduler slice when a team thread waits for its core)
            "  if (__atomic_add_fetch(&finished[tile], 1, __ATOMIC_ACQ_REL) == chunks) {",
            *("    " + line for line in combine),
            "  }",
            "}",
        ]
        return task

    ind = lambda lines, n: [" " * n + line for line in lines]  # noqa: E731
    need_kt = ("pack && !columns" if key_kind == "dot" else "1") if key_transposed else "0"
    need_v = ("pack && !columns" if value_kind == "dot" else "1") if value_transposed else "0"
    return "\n".join([
        f"/* fused attention: keys {key_axes} ({key_kind}), values {value_axes} ({value_kind}), "
        f"blocks of {kb} keys, tiles of {rt} rows"
        + "".join(f", {'int8' if q8 else 'float16'} {name}" for name, half, q8 in
                  (("keys", narrow_k, q8k), ("values", narrow_v, q8v)) if half)
        + " */",
        f"int32_t {k.symbol}(void* const* rs_buffers, const int64_t* rs_syms) {{",
        *ind(k.declarations, 2),
        "  int32_t rs_status = STATUS_OK;",
        "  (void)rs_buffers; (void)rs_syms;",
        f"  const int64_t heads = {k.heads}, head_rows = {k.rows}, used = {k.keys_used};",
        # more rows than one row tile (prefill): the column form, in tiles of COLUMN_TILE rows
        f"  const int64_t tile_rows = head_rows > {rt} ? {COLUMN_TILE} : {rt};",
        "  const int64_t row_tiles = (head_rows + tile_rows - 1) / tile_rows, tiles = heads * row_tiles;",
        "  if (tiles <= 0) return rs_status;",
        "  if (used <= 0) {  /* no keys: the product with an empty softmax is 0 */",
        f"    memset({k.out}, 0, (size_t)(heads * head_rows * {dv}) * sizeof(float));",
        "    return rs_status;",
        "  }",
        # several micro tiles of rows share each key block: copy it into L1 once
        f"  const int pack = head_rows > {MICRO_ROWS};",
        # more rows than a row tile (prefill): the column form (column_body)
        f"  const int columns = head_rows > {rt}; (void)columns;",
        # few tiles (decode): split the keys; the count depends on the shape alone
        "  int64_t chunks = 1;",
        f"  if (head_rows <= {rt} && tiles < {FEW_TILES} && used > {2 * kb}) {{",
        f"    chunks = (used + {CHUNK_KEYS - 1}) / {CHUNK_KEYS};",
        f"    if (tiles * chunks < {MIN_TASKS}) chunks = ({MIN_TASKS} + tiles - 1) / tiles;",
        f"    if (tiles * chunks > {MAX_TASKS}) chunks = {MAX_TASKS} / tiles > 1 ? {MAX_TASKS} / tiles : 1;",
        "  }",
        "  int64_t chunk_keys = (used + chunks - 1) / chunks;",
        f"  chunk_keys = (chunk_keys + {kb - 1}) / {kb} * {kb};",
        "  chunks = (used + chunk_keys - 1) / chunk_keys;",
        "  const int64_t tasks = tiles * chunks;",
        "  float* partials = NULL;",
        "  int64_t* finished = NULL;   /* per tile: its chunks done */",
        "  float* kt_t = NULL;",
        "  float* v_t = NULL;",
        "  if (chunks > 1) partials = (float*)malloc((size_t)(tasks * "
        f"{rt} * ({dv} + 2)) * sizeof(float));",
        f"  const int64_t key_blocks = (used + {kb - 1}) / {kb};",
        f"  if ({need_kt}) kt_t = (float*)malloc((size_t)(heads * key_blocks * {d} * {kb}) * sizeof(float));",
        f"  if ({need_v}) v_t = (float*)malloc((size_t)(heads * used * {dv}) * sizeof(float));",
        "  if (chunks > 1) finished = (int64_t*)calloc((size_t)tiles, sizeof(int64_t));",
        f"  if ((chunks > 1 && (!partials || !finished)) || (({need_kt}) && !kt_t) || (({need_v}) && !v_t)) {{",
        "    free(partials); free(finished); free(kt_t); free(v_t);",
        "    return STATUS_NO_MEMORY;",
        "  }",
        f"  const int parallel = heads * head_rows * used * {d + dv} >= {PARALLEL_MIN_WORK} && tasks > 1;",
        "  #pragma omp parallel if(parallel) num_threads(rs_threads())",
        "  {",
        *ind(transposes, 4),
        "    #pragma omp for schedule(dynamic, 1) nowait",
        "    for (int64_t task = 0; task < tasks; ++task) {",
        "      if (columns) {",
        *ind(column_body(), 8),
        "      } else if (pack || kt_t || v_t) {",
        *ind(task_body(kb), 8),
        # decode (a micro tile per head, keys read in place): long blocks, so that each row
        # of a cache laid out (kv, D, capacity) is read in long runs (the stride between rows
        # is the capacity: short runs are as many scattered streams as the head dim)
        "      } else {",
        "        float* const kt_t = NULL; float* const v_t = NULL; (void)kt_t; (void)v_t;",
        *ind(task_body(DIRECT_BLOCK), 8),
        "      }",
        "    }",
        "  }",
        "  free(partials); free(finished); free(kt_t); free(v_t);",
        "  return rs_status;",
        "}",
    ])


def _row_invariant_locals(value, key_vars: tuple, emitter, row_var=None) -> tuple:
    """(``value`` with its maximal subexpressions that do not read the key or the score
    replaced by per-row locals, the locals as (C type, name, C expression, whether it reads
    ``row_var``)): an integer division by the
    rows of a group then runs once per row and block instead of once per score. Branches of
    a select stay in place (hoisted, a division there could run where it would not)."""
    from tensorir import expr as E
    from tensorir.functor import collect, iter_children, substitute

    from .codegen import c_type

    hoisted, declarations = {}, []

    def reads_key(node) -> bool:
        return bool(collect(node, lambda n: any(n is v for v in key_vars) or isinstance(n, E.BufferLoad)))

    def walk(node):
        if isinstance(node, (E.Var, E.IntImm, E.FloatImm)) or not isinstance(node, E.PrimExpr):
            return
        if not reads_key(node):
            var = E.Var(f"rs_rowv{len(hoisted)}", node.dtype)
            hoisted[node] = var
            return
        children = [node.condition] if isinstance(node, E.Select) else list(iter_children(node))
        for child in children:
            walk(child)

    walk(value)
    for node, var in hoisted.items():
        name = emitter.names.get(var, var.name, internal=True)
        per_row = row_var is None or bool(collect(node, lambda n: n is row_var))
        declarations.append((c_type(node.dtype), name, emitter.expr(node), per_row))
    return substitute(value, hoisted), declarations


def _select_score(value, emitter) -> str | None:
    """A ``where`` score ``cond ? a : b`` as ``rs_att_select(cond, a, b)`` when both values are
    float arithmetic that cannot fault (no division, call or load): the score loop then vectorizes.
    Written as a C conditional, gcc does not if-convert it (the multiply in its branch could raise
    a floating-point exception where the source would not run it) and the loop stays scalar."""
    from tensorir import expr as E
    from tensorir.functor import collect

    safe = (E.Var, E.IntImm, E.FloatImm, E.Add, E.Sub, E.Mul, E.Min, E.Max, E.Cast)
    if not isinstance(value, E.Select) or value.dtype != "float32":
        return None
    for branch in (value.true_value, value.false_value):
        if collect(branch, lambda n: isinstance(n, E.PrimExpr) and not isinstance(n, safe)):
            return None
    return (f"rs_att_select({emitter.expr(value.condition)}, {emitter.cast_to(value.true_value, 'float32')}, "
            f"{emitter.cast_to(value.false_value, 'float32')})")


def attention_c(func, symbol: str, layout: dict, lanes: int) -> str | None:
    """The generated kernel for the marked fused attention ``func`` (the function before
    lowering), or None when its head dims are not constants (then the loop nest is compiled)."""
    from tensorir import expr as E
    from tensorir import stmt as S
    from tensorir.functor import collect, substitute

    from .codegen import _KERNEL_LOCALS, CFunctionEmitter, _symbol_declarations

    buffers = func.buffer_params
    q, keys, values, out = (buffers[layout[role]] for role in ("q", "kt", "v", "out"))
    scale_of = {id(keys): layout.get("kscale"), id(values): layout.get("vscale")}
    if any((buf.dtype == "int8") != (scale_of[id(buf)] is not None) for buf in (keys, values)):
        return None
    head_dim, value_dim = q.shape[2], out.shape[2]
    if not (isinstance(head_dim, E.IntImm) and isinstance(value_dim, E.IntImm)):
        return None
    blocks = collect(func.body, lambda n: isinstance(n, S.Block) and n.name == "mask")
    if len(blocks) != 1 or not isinstance(blocks[0].body, S.BufferStore):
        return None
    block = blocks[0]
    emitter = CFunctionEmitter(func, symbol)
    emitter.names.used.update(_KERNEL_LOCALS | {"rs_s", "rs_row", "rs_key", "h", "kb", "w", "s", "o", "r",
                                                "rows", "i0", "k0", "k1", "qt", "rmax", "rsum", "kpack",
                                                "vpack", "dead", "sr", "mx", "alpha", "sum", "dst", "inv",
                                                "part", "partials", "tile", "tiles", "row_tiles", "used",
                                                "chunk_keys", "item", "total", "weight", "parallel", "m"})
    declarations = []
    for position, buf in enumerate(buffers):
        name = emitter.names.get(buf, f"rs_in_{buf.name}", internal=True)
        ctype = {"float32": "float", "bool": "bool", "float16": "uint16_t", "int8": "int8_t"}.get(buf.dtype)
        if ctype is None or (buf.dtype in ("float16", "int8") and buf is not keys and buf is not values):
            return None
        const = "" if buf is out else "const "
        declarations.append(f"{const}{ctype}* restrict {name} = ({const}{ctype}*)rs_buffers[{position}];")
    declarations += _symbol_declarations(emitter, func)
    # the score of (head, row, key) from the nest's "mask" block: its tile load is the product
    store = block.body
    tile_loads = collect(store.value, lambda n: isinstance(n, E.BufferLoad) and n.buffer is store.buffer)
    iters = {iv.var.name: iv.var for iv in block.iter_vars}
    named = {"rs_s": E.Var("rs_s", "float32"), "h": E.Var("h", "int64"),
             "rs_row": E.Var("rs_row", "int64"), "rs_key": E.Var("rs_key", "int64")}
    for name, var in named.items():
        emitter.names.pin(var, name)
    vmap = {load: named["rs_s"] for load in tile_loads}
    vmap.update({iters["vh"]: named["h"], iters["vi"]: named["rs_row"], iters["vt"]: named["rs_key"],
                 iters["vo"]: E.IntImm(0, iters["vo"].dtype)})
    value, row_locals = _row_invariant_locals(substitute(store.value, vmap),
                                              (named["rs_key"], named["rs_s"]), emitter, named["rs_row"])
    score = _select_score(value, emitter) or emitter.cast_to(value, "float32")
    live = None
    kind = layout["mask"]
    if kind == "where" and isinstance(value, E.Select):
        live = emitter.expr(value.condition)
    elif kind == "add" and isinstance(value, E.Add):
        product_side = [side for side in (value.a, value.b)
                        if collect(side, lambda n: n is named["rs_s"])]
        if len(product_side) == 1:
            term = value.b if product_side[0] is value.a else value.a
            live = f"({emitter.cast_to(term, 'float32')}) > {DEAD_MASK!r}f"

    def dims(buf):
        return [emitter.expr(dim) for dim in buf.shape]

    def strides(buf, axes: str) -> dict:
        return dict(zip(axes.split(","), _axis_strides(dims(buf))))

    # float16 keys/values are widened row by row: only along the layout's contiguous axis ("outer")
    half_keys, half_values = keys.dtype == "float16", values.dtype == "float16"
    if (keys.dtype != "float32" and _layout_kind("M", "D", layout["keys"]) != "outer") or \
            (values.dtype != "float32" and _layout_kind("DV", "M", layout["values"]) != "outer"):
        return None
    # q8: the scales of one head's consecutive keys must be contiguous (the cache's (kv, 1, capacity)
    # key scales and (kv, capacity, 1) value scales are): a vector of them per block of keys
    scale_heads = {}
    for buf, axes_key in ((keys, "kscale_axes"), (values, "vscale_axes")):
        position = scale_of[id(buf)]
        if position is None:
            continue
        scale = buffers[position]
        axes = layout[axes_key].split(",")
        if scale.dtype != "float32" or any(not (isinstance(dim, E.IntImm) and dim.value == 1)
                                           for dim in scale.shape[axes.index("M") + 1:]):
            return None
        stride = strides(scale, layout[axes_key])["B"]
        scale_heads[id(buf)] = f"({emitter.names.by_id[id(scale)]} + h * ({stride}))"
    if layout["m"] == "param":
        (used,) = [p for p in func.params if isinstance(p, E.Var) and p.name == "m"]
        keys_used = emitter.names.get(used, used.name)
    elif isinstance(layout["m"], int):
        keys_used = str(layout["m"])
    else:
        keys_used = f"(int64_t)({dims(keys)[layout['keys'].split(',').index('M')]})"
    q_dims = dims(q)
    pieces = AttentionC(
        symbol=symbol, lanes=lanes, head_dim=int(head_dim.value), value_dim=int(value_dim.value),
        declarations=declarations, heads=f"(int64_t)({q_dims[0]})", rows=f"(int64_t)({q_dims[1]})",
        keys_used=f"(int64_t)({keys_used})", key_strides=strides(keys, layout["keys"]),
        value_strides=strides(values, layout["values"]), q=emitter.names.by_id[id(q)],
        keys=emitter.names.by_id[id(keys)], values=emitter.names.by_id[id(values)],
        out=emitter.names.by_id[id(out)], score=score, mask_kind=kind, live=live,
        fill=float(layout.get("fill", 0.0)),
        row_locals=[f"const {t} {n} = {e}; (void){n};" for t, n, e, _ in row_locals],
        row_local_parts=row_locals, half_keys=half_keys,
        half_values=half_values, key_scale=scale_heads.get(id(keys)), value_scale=scale_heads.get(id(values)))
    helpers = _micro_kernels(lanes) + ("\n" + _half_helpers(lanes) if half_keys or half_values else "")
    if scale_heads:
        helpers += "\n" + _byte_helpers(lanes)
    helpers += "\n" + _vector_exp(lanes) + "\n" + _tiled_products(lanes, "qk", *tile_shape(KEY_BLOCK // lanes, lanes))
    if int(value_dim.value) % lanes == 0:
        helpers += "\n" + _tiled_products(lanes, "pv", *tile_shape(int(value_dim.value) // lanes, lanes))
    (qk_rows, qk_group), (pv_rows, pv_group) = column_tile_shapes(lanes, int(value_dim.value))
    helpers += "\n" + _tiled_products(lanes, "qk", qk_rows, qk_group)
    helpers += "\n" + _tiled_products(lanes, "pv", pv_rows, pv_group)
    return helpers + "\n" + attention_c_source(pieces, layout["keys"], layout["values"])


__all__ = ["ATTENTION_LAYOUT_ATTR", "attention_c", "attention_c_source", "generated_attention_enabled"]
