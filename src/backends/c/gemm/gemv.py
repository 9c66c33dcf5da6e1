"""C source of the generated GEMV: one row of A times B (``c[0, :] = a[0, :] @ op(b)``), the
single-token product of decode and of the workloads at ``n = 1``.

One row has nothing to reuse: every element of B is used once, so the product runs at the rate
B streams in, and the kernel's job is to keep that stream fast and free of extra traffic:

- **no packing**: B is read where it lies, ``GEMV_ROWS`` rows at a time, each row swept left
  to right across a chunk of the columns (that many long contiguous runs, which the hardware
  prefetchers follow; one pass over B in all);
- **the output chunk stays in L1**: ``y[j] += x[p] * b[p, j] + ... + x[p+7] * b[p+7, j]`` costs
  one vector load and store of ``y`` per ``GEMV_ROWS`` multiply-adds; the chunk's width is
  derived from the L1 size (``params.gemv_cols``: half of L1);
- **threads split B's rows** (``k``): each streams one contiguous block of B (prefetchers stop
  at page boundaries, so splitting the columns instead cut every row's run in pieces: 10-15%
  slower with B out of cache) into its own partial row, then each adds the partials for its
  share of the columns and applies the epilogue there. Each thread always gets the same rows,
  so a B that fits in the cores' L2s together stays split between them from call to call. One
  thread when B fits in half of one L2 (``params.gemv_split_bytes``): it streams from there in
  less time than a hand-over to another thread costs.

``trans_b`` (B stored ``(n, k)``): output ``j`` is the dot product of B's row ``j`` with ``a``;
``GEMV_ROWS`` rows of B are read at once, each contiguous, into as many vector accumulators, and
threads split the rows of B (the output columns), again one contiguous block each.
"""
from __future__ import annotations

from .microkernel import register_pin, vector_type
from .params import GemmParams

GEMV_ROWS = 8   # rows of B per sweep: enough multiply-adds per load/store of y, few enough streams


def _tree(terms: list[str]) -> str:
    """``(t0 + t1) + (t2 + t3) ...``: a short dependency chain (multiply-adds contract to FMA)."""
    while len(terms) > 1:
        terms = [f"({terms[i]} + {terms[i + 1]})" if i + 1 < len(terms) else terms[i]
                 for i in range(0, len(terms), 2)]
    return terms[0]


def _hsum(vt: str, lanes: int) -> str:
    """``hsum(v)``: the sum of a vector's lanes by rotate-and-add, log2(lanes) steps. A scalar loop
    over the lanes (float adds are not reassociated) cost as much as a 576-long dot product's
    multiply-adds: 8 dot products of a 576 x 1536 weight stored (out, in), one row, ran at 0.80x
    OpenBLAS's GEMV."""
    if lanes == 1 or lanes & (lanes - 1):
        return (f"static float hsum(const {vt} v) {{\n  float s = 0.0f;\n"
                f"  for (int i = 0; i < {lanes}; ++i) s += v[i];\n  return s;\n}}")
    steps, step = [], lanes // 2
    while step:
        steps.append(", ".join(str((i + step) % lanes) for i in range(lanes)))
        step //= 2
    index = f"rs_gemm_i32x{lanes}"
    gcc = "\n".join(f"  s = s + __builtin_shuffle(s, ({index}){{{m}}});" for m in steps)
    clang = "\n".join(f"  s = s + __builtin_shufflevector(s, s, {m});" for m in steps)
    return (f"typedef int {index} __attribute__((vector_size({lanes * 4})));\n"
            f"static float hsum(const {vt} v) {{\n  {vt} s = v;\n#if defined(__clang__)\n{clang}\n#else\n"
            f"{gcc}\n#endif\n  return s[0];\n}}")


# Most rows of A the skinny variant computes as dot products with B stored (n, k) (each row tile
# streams B once). 2 threads, 576 x 1536 stored (out, in), against packing B (AVX-512, 4-row tiles):
# 2 rows 0.038 ms vs 0.238 (OpenBLAS 0.162), 4 rows 0.049 vs 0.238, 8 rows 0.097 vs 0.261, 16 rows
# 0.173 vs 0.302 (OpenBLAS 0.232); at 24 rows level with OpenBLAS, at 32 0.57 vs the packed 0.40.
NT_DOT_ROWS = 16


def nt_cols(params: GemmParams) -> int:
    """Rows of B (outputs) per tile of ``dot_block_nt``: 4 with 32 vector registers, 2 with 16 (each
    loaded vector of B serves every row of the tile, each vector of A every output)."""
    return 4 if params.registers >= 32 else 2


def nt_rows(params: GemmParams) -> int:
    """Most rows of A per tile of ``dot_block_nt``: ``rows x nt_cols`` accumulators, ``nt_cols``
    vectors of B and one of A within the register file (AVX2's 16: 6 x 2; AVX-512's 32: 6 x 4).
    Fewer passes over B than 4-row tiles: 16 rows stream it three times, not four."""
    cols = nt_cols(params)
    return max(1, (params.registers - cols - 1) // cols)


def _dot_tile_nt(rows: int, params: GemmParams) -> str:
    """``dot_tile_nt<rows>``: c[i, j] = a[i, :] . b[j, :] for ``rows`` rows of A (row stride k) and
    ``w`` rows of B (stride ldb), ``nt_cols`` outputs at a time, all in registers; c's row stride n."""
    vt, lanes, cols = vector_type(params), params.lanes, nt_cols(params)
    # A's vector in a register: GCC otherwise folded its load into each output's multiply-add (one
    # load per multiply-add; 16 rows of 576 x 1536 ran 0.77x OpenBLAS)
    pin = register_pin(params, ["av"])
    acc = ", ".join(f"d{r}_{o} = {{0}}" for r in range(rows) for o in range(cols))
    a_ptrs = " ".join(f"const float* restrict a{r} = a + {r} * k;" for r in range(rows))
    b_ptrs = " ".join(f"const float* restrict q{o} = b + (j + {o}) * ldb;" for o in range(cols))
    step = (" ".join(f"const {vt} b{o} = {vt}_load(q{o} + p);" for o in range(cols)) + "\n"
            + "\n".join(f"      {{ {vt} av = {vt}_load(a{r} + p);{pin}"
                         + " ".join(f"d{r}_{o} += av * b{o};" for o in range(cols)) + " }" for r in range(rows)))
    sums = " ".join(f"float t{r}_{o} = hsum(d{r}_{o});" for r in range(rows) for o in range(cols))
    tail = " ".join(f"t{r}_{o} += a{r}[p] * q{o}[p];" for r in range(rows) for o in range(cols))
    stores = " ".join(f"c[{r} * n + j + {o}] = t{r}_{o};" for r in range(rows) for o in range(cols))
    return f"""static void dot_tile_nt{rows}(long k, long w, const float* restrict a, const float* restrict b, long ldb,
                            float* c, long n) {{
  const long vec_end = k / {lanes} * {lanes};
  {a_ptrs}
  long j = 0;
  for (; j + {cols} <= w; j += {cols}) {{
    {b_ptrs}
    {vt} {acc};
    long p = 0;
    for (; p < vec_end; p += {lanes}) {{
      {step}
    }}
    {sums}
    for (; p < k; ++p) {{ {tail} }}
    {stores}
  }}
  for (; j < w; ++j)
    for (long i = 0; i < {rows}; ++i) {{
      const float* x = a + i * k; const float* q = b + j * ldb;
      float v = 0.0f;
      for (long p = 0; p < k; ++p) v += x[p] * q[p];
      c[i * n + j] = v;
    }}
}}
"""


def _dot_block_nt(params: GemmParams) -> str:
    """``dot_block_nt``: c[i0 + i, j0 + j] = a[i0 + i, :] . b[j0 + j, :] for a few rows of A and a
    run of B's rows (B stored (n, k), each row contiguous), then the epilogue. The rows go in the
    fewest tiles of at most ``nt_rows`` (evened out: 8 rows as 4 + 4, each tile a kernel of exactly its
    rows), each keeping rows x nt_cols dot products in registers, so every vector of B loaded serves
    all the tile's rows and nothing is packed (the packed path copies and transposes B first, a pass
    as long as the product for a few rows)."""
    most = nt_rows(params)
    tiles = "\n".join(_dot_tile_nt(rows, params) for rows in range(1, most + 1))
    cases = " ".join(f"case {rows}: dot_tile_nt{rows}(k, w, at, bt, ldb, ct, n); break;" for rows in range(1, most + 1))
    return f"""{tiles}
#define NT_ROWS {most}
static void dot_block_nt(long h, long k, long w, const float* restrict a, const float* restrict b, long ldb,
                         float* c, long n, long i0, long j0, const epilogue_t* e) {{
  const long tiles = (h + NT_ROWS - 1) / NT_ROWS;
  const float* bt = b + j0 * ldb;
  for (long t = 0, r0 = 0; t < tiles; ++t) {{
    const int rows = (int)(h / tiles + (t < h % tiles ? 1 : 0));
    const float* at = a + (i0 + r0) * k;
    float* ct = c + (i0 + r0) * n + j0;
    switch (rows) {{ {cases} }}
    r0 += rows;
  }}
  if (has_epilogue(e))
    apply_epilogue(c + i0 * n + j0, n, (int)h, (int)w, e->bias == NULL ? NULL : e->bias + j0,
                   e->residual == NULL ? NULL : e->residual + i0 * n + j0, e->act);
}}
"""


def emit_gemv(params: GemmParams) -> str:
    """``gemv_rows`` (rows ``[p0, p1)`` of B into a partial row), ``gemv_add`` (the partials' sum
    and the epilogue) and ``gemv_block_nt`` for the translation unit of
    ``driver.emit_gemm_library``; needs ``vector_typedefs``, ``min_long``, ``epilogue_t`` and
    ``apply_epilogue`` before it."""
    vt, lanes, rows = vector_type(params), params.lanes, GEMV_ROWS
    broadcasts = "\n".join(f"      const float s{i} = x[p + {i}]; const {vt} x{i} = {{"
                           + ", ".join([f"s{i}"] * lanes) + "};" for i in range(rows))
    row_ptrs = "\n".join(f"      const float* restrict r{i} = bc + (p + {i}) * ldb;" for i in range(rows))
    vector_sum = _tree([f"x{i} * {vt}_load(r{i} + j)" for i in range(rows)])
    scalar_sum = _tree([f"s{i} * r{i}[j]" for i in range(rows)])
    dot_ptrs = "\n".join(f"    const float* restrict q{i} = b + (j0 + j + {i}) * ldb;" for i in range(rows))
    dot_acc = ", ".join(f"d{i} = {{0}}" for i in range(rows))
    dot_step = " ".join(f"d{i} += xv * {vt}_load(q{i} + p);" for i in range(rows))
    dot_tail = " ".join(f"t[{i}] += x[p] * q{i}[p];" for i in range(rows))
    return f"""#define GEMV_ROWS {rows}
#define GEMV_CHUNK {params.gemv_cols}
#define GEMV_SPLIT_BYTES {params.gemv_split_bytes}L
{_hsum(vt, lanes)}

/* y[0 : w) = x[p0 : p1] @ b[p0 : p1, 0 : w) (b row-major with row stride ldb, already at the
   first column); chunks of GEMV_CHUNK columns stay in L1 while GEMV_ROWS rows stream past */
static void gemv_rows(long p0, long p1, long w, const float* restrict x, const float* restrict b, long ldb,
                      float* restrict y) {{
  for (long jc = 0; jc < w; jc += GEMV_CHUNK) {{
    const long wc = min_long(GEMV_CHUNK, w - jc), vec_end = wc / {lanes} * {lanes};
    float* restrict yc = y + jc;
    const float* restrict bc = b + jc;
    for (long j = 0; j < wc; ++j) yc[j] = 0.0f;
    long p = p0;
    for (; p + GEMV_ROWS <= p1; p += GEMV_ROWS) {{
{broadcasts}
{row_ptrs}
      long j = 0;
      for (; j < vec_end; j += {lanes}) {vt}_store(yc + j, {vt}_load(yc + j) + {vector_sum});
      for (; j < wc; ++j) yc[j] += {scalar_sum};
    }}
    for (; p < p1; ++p) {{
      const float s = x[p]; const {vt} xs = {{{", ".join(["s"] * lanes)}}};
      const float* restrict r = bc + p * ldb;
      long j = 0;
      for (; j < vec_end; j += {lanes}) {vt}_store(yc + j, {vt}_load(yc + j) + xs * {vt}_load(r + j));
      for (; j < wc; ++j) yc[j] += s * r[j];
    }}
  }}
}}

/* c[j0 : j1) += the other threads' partial rows, then the epilogue on that share */
static void gemv_add(long j0, long j1, float* c, float* const* parts, int count, const epilogue_t* e) {{
  for (int u = 1; u < count; ++u)
    for (long j = j0; j < j1; ++j) c[j] += parts[u][j];
  if (has_epilogue(e) && j1 > j0)
    apply_epilogue(c + j0, 0, 1, (int)(j1 - j0), e->bias == NULL ? NULL : e->bias + j0,
                   e->residual == NULL ? NULL : e->residual + j0, e->act);
}}

/* c[0, j0 : j0+w) = x @ b[j0 : j0+w, :]^T (b is n x k): GEMV_ROWS dot products at once */
static void gemv_block_nt(long k, long w, const float* restrict x, const float* restrict b, long ldb, float* c,
                          long j0, const epilogue_t* e) {{
  const long vec_end = k / {lanes} * {lanes};
  long j = 0;
  for (; j + GEMV_ROWS <= w; j += GEMV_ROWS) {{
{dot_ptrs}
    {vt} {dot_acc};
    long p = 0;
    for (; p < vec_end; p += {lanes}) {{ const {vt} xv = {vt}_load(x + p); {dot_step} }}
    float t[GEMV_ROWS] = {{{", ".join(f"hsum(d{i})" for i in range(rows))}}};
    for (; p < k; ++p) {{ {dot_tail} }}
    for (int i = 0; i < GEMV_ROWS; ++i) c[j0 + j + i] = t[i];
  }}
  for (; j < w; ++j) {{
    const float* q = b + (j0 + j) * ldb;
    float v = 0.0f;
    for (long p = 0; p < k; ++p) v += x[p] * q[p];
    c[j0 + j] = v;
  }}
  if (has_epilogue(e))
    apply_epilogue(c + j0, 0, 1, (int)w, e->bias == NULL ? NULL : e->bias + j0,
                   e->residual == NULL ? NULL : e->residual + j0, e->act);
}}

{_dot_block_nt(params)}
#define GEMV_MAX_THREADS 256
/* one row: c = act(x @ op(b) + bias + residual) */
static int gemv(long n, long k, const float* x, const float* b, int trans_b, float* c, const epilogue_t* e,
                int threads) {{
  if ((double)n * k * sizeof(float) < GEMV_SPLIT_BYTES) threads = 1;
  if (threads > GEMV_MAX_THREADS) threads = GEMV_MAX_THREADS;
  if (trans_b) {{   /* threads split b's rows (the outputs), whole cache lines of c apart */
    const long units = (n + NR - 1) / NR;
    const int parts = (int)min_long(threads, units);
    #pragma omp parallel num_threads(parts) if(parts > 1)
    {{
      const int t = omp_get_thread_num(), count = omp_get_num_threads();
      const long j0 = units * t / count * NR, j1 = min_long(n, units * (t + 1) / count * NR);
      if (j1 > j0) gemv_block_nt(k, j1 - j0, x, b, k, c, j0, e);
    }}
    return 0;
  }}
  const int parts = (int)min_long(threads, k / GEMV_ROWS);
  if (parts <= 1) {{
    gemv_rows(0, k, n, x, b, n, c);
    gemv_add(0, n, c, NULL, 1, e);
    return 0;
  }}
  float* partial[GEMV_MAX_THREADS];
  int status = 0;
  #pragma omp parallel num_threads(parts) reduction(|:status)
  {{
    const int t = omp_get_thread_num(), count = omp_get_num_threads();
    /* thread 0 accumulates into c itself, the others into their own pack buffer */
    float* y = t == 0 ? c : grow(&rs_pack_b, &rs_pack_b_cap, (size_t)n);
    partial[t] = y;
    if (y == NULL) status = -1;
    else {{
      const long rows_per = (k / count) / GEMV_ROWS * GEMV_ROWS;
      const long p0 = rows_per * t, p1 = t == count - 1 ? k : rows_per * (t + 1);
      gemv_rows(p0, p1, n, x, b, n, y);
    }}
    #pragma omp barrier
    int ok = 1;
    for (int u = 0; u < count; ++u) ok &= partial[u] != NULL;
    if (ok) {{
      const long units = (n + NR - 1) / NR;
      gemv_add(units * t / count * NR, min_long(n, units * (t + 1) / count * NR), c, partial, count, e);
    }}
  }}
  return status;
}}
"""
