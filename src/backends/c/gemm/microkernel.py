"""C source of the GEMM micro-kernel: ``C[rows x cols] (+)= A[rows x kc] @ B[kc x cols]`` for one
``mr x nr`` register tile (``rows <= mr``, ``cols <= nr``).

Packed layouts (what a packing routine, or a dequantizer, writes):

- **A_pack** (``a_packed=True``): one ``kc x mr`` panel, k-major: element ``(i, p)`` (row ``i`` of
  the tile, step ``p``) at ``a_pack[p * mr + i]``; rows past ``rows`` are zero (or anything finite).
- **B_pack** (``b_packed=True``): one ``kc x nr`` panel, k-major: element ``(p, j)`` at
  ``b_pack[p * nr + j]``; columns past ``cols`` are zero (or anything finite).

Unpacked forms read the operands where they are, row-major:

- ``a_packed=False``: element ``(i, p)`` at ``a[i * lda + p]``; the parameter list gets ``int lda``
  after ``a``. Rows past ``rows`` are never read (their pointer repeats the last row).
- ``b_packed=False``: element ``(p, j)`` at ``b[p * ldb + j]``; ``int ldb`` follows ``b``. All ``nr``
  columns are read, so the caller uses it only where ``nr`` columns exist.

Signature (``emit_microkernel(name, params)`` with both packed)::

    static inline __attribute__((always_inline))
    void NAME(int kc, const float *restrict a_pack, const float *restrict b_pack,
              float *restrict c, int ldc, int rows, int cols, int accumulate);

``c`` is row-major with row stride ``ldc``; ``accumulate`` non-zero adds to ``c``, zero
overwrites it. The accumulators are ``mr * nr / lanes`` vector registers, written with GCC's
vector extension (one source for AVX-512, AVX2, SSE and the scalar fallback; ``a * b + c``
contracts to FMA where the ISA has it). ``vector_typedefs(params)`` must precede the kernels in
the translation unit (once).
"""
from __future__ import annotations

from .params import GemmParams


def vector_type(params: GemmParams) -> str:
    return f"rs_gemm_f32x{params.lanes}"


def vector_typedefs(params: GemmParams) -> str:
    """The vector type and its unaligned load/store helpers (memcpy compiles to one vmovups)."""
    vt, size = vector_type(params), params.lanes * 4
    return f"""#include <string.h>
typedef float {vt} __attribute__((vector_size({size})));
static inline {vt} {vt}_load(const float *p) {{ {vt} v; memcpy(&v, p, {size}); return v; }}
static inline void {vt}_store(float *p, {vt} v) {{ memcpy(p, &v, {size}); }}
"""


# The asm constraint naming a vector register of the ISA, and the macro of the compiler's target
# that must hold for a register of that width to exist (x86 only; elsewhere no pin)
_VECTOR_REGISTER = {"avx512": ("v", "__AVX512F__"), "avx2": ("x", "__AVX__"), "avx": ("x", "__AVX__"),
                    "sse": ("x", "__SSE2__")}


def register_pin(params: GemmParams, names: list[str]) -> str:
    """An empty asm statement that makes the compiler hold ``names`` in registers. Without it GCC
    folds a B vector's load into each row's FMA as a memory operand (it did at 4 rows): the tile
    then loads B once per row instead of once per k step, and the load ports, not the FMAs,
    bound it (4 rows of 1024x4096 ran slower than 5)."""
    if params.isa not in _VECTOR_REGISTER:
        return ""
    constraint, macro = _VECTOR_REGISTER[params.isa]
    operands = ", ".join(f'"+{constraint}"({name})' for name in names)
    return f'\n#if defined({macro})\n  __asm__("" : {operands});\n#endif\n'



def prefetch_c_tile(params: GemmParams) -> str:
    """Prefetch (for writing) the first and last float of each of the tile's rows (its cache lines;
    rows past ``rows`` repeat the last one; a prefetch never faults). The C tile is touched only
    after the k loop, too late for out-of-order execution to hide a miss (a tile of a wide output
    is in L3 or memory by its next kc block), so a kernel with a long k loop asks for it first.
    One thread, thread CPU time, m = 512: 1.08-1.17x on 1024x4096, 512x2816 and 512x1536, level on
    the narrow outputs; with 8 k steps (the skinny sweep) it cost 7-12%, so those kernels skip it."""
    out = []
    for i in range(params.mr):
        row = f"c + (long)({i} < rows ? {i} : rows - 1) * ldc"
        out.append(f"  __builtin_prefetch({row}, 1); __builtin_prefetch({row} + cols - 1, 1);")
    return "\n".join(out)


def k_splits(params: GemmParams) -> int:
    """Independent accumulator sets over alternating k steps. A tile of fewer rows than the
    register file allows (the skinny variant's 1..mr-row kernels) has too few accumulators to
    hide the multiply-add latency; interleaving k steps over several sets of them keeps the same
    number of independent chains as a full tile (``NR_VECTORS * max rows`` accumulators)."""
    full_rows = max(1, (params.registers - params.vectors_per_row - 1) // params.vectors_per_row)
    return max(1, full_rows // params.mr)


def switch_on_rows(signature: str, calls: list[str], preamble: str = "") -> str:
    """``static void <signature>`` whose body calls ``calls[rows - 1]`` (one micro-kernel per row count
    1..len(calls): a ragged tile runs a kernel of exactly its rows) and returns; ``preamble`` (whole
    lines) goes before the switch."""
    cases = "\n".join(f"    case {rows}: {call}; return;" for rows, call in enumerate(calls, 1))
    return f"static void {signature} {{\n{preamble}  switch (rows) {{\n{cases}\n  }}\n}}"


def emit_microkernel(name: str, params: GemmParams, a_packed: bool = True, b_packed: bool = True,
                     prefetch_c: bool = False, a_stride: int | None = None, prefetch_b: bool = False,
                     prefetch_lines: int | None = None) -> str:
    """C source of one micro-kernel function (see the module docstring for its contract);
    ``prefetch_c``: request the C tile's lines before the k loop (``prefetch_c_tile``);
    ``a_stride``: floats per k step of a packed A panel when it is wider than this kernel's
    ``params.mr`` rows (a tile of fewer rows reading an MR-wide panel); ``prefetch_b``: the kernel
    takes ``const float *b_next, long pf_step`` after B and at k step ``p`` asks for the line(s) of
    the ``pf_step`` bytes at ``b_next + p * pf_step`` into L2 (a share of the next B panel, which
    the caller's next tile reads; ``pf_step`` = one panel row, ``nr`` floats, asks for all of it in
    step with this one; NULL: no prefetch); ``prefetch_lines``: requests per k step (default: the
    lines of one panel row; 1 where ``pf_step`` is the stride of rows of something else, as the
    quantized GEMM's next codes, one short run every ``pf_step`` bytes)."""
    vt, lanes, mr, nr = vector_type(params), params.lanes, params.mr, params.nr
    nv = params.vectors_per_row
    splits = k_splits(params)
    a_stride = mr if a_stride is None else a_stride
    a_param = "const float *restrict a_pack" if a_packed else "const float *restrict a, int lda"
    b_param = "const float *restrict b_pack" if b_packed else "const float *restrict b, int ldb"
    if prefetch_b:
        b_param += ", const float *b_next, long pf_step"
    lines = [f"static inline __attribute__((always_inline)) void {name}(int kc, {a_param}, {b_param}, "
             "float *restrict c, int ldc, int rows, int cols, int accumulate) {"]
    acc = [[[f"c{i}_{v}_{u}" for v in range(nv)] for i in range(mr)] for u in range(splits)]
    lines.append(f"  {vt} " + ", ".join(f"{x} = {{0}}" for sets in acc for row in sets for x in row) + ";")
    if not a_packed:  # rows past `rows` alias the last one: read, never stored
        for i in range(mr):
            lines.append(f"  const float *restrict a{i} = a + (long)({i} < rows ? {i} : rows - 1) * lda;")
    b_row = f"b_pack + (long)p * {nr}" if b_packed else "b + (long)p * ldb"
    if prefetch_c:
        lines.append(prefetch_c_tile(params))
    lines.append("  int p = 0;")

    def step(u: int, indent: str) -> None:
        lines.append(f"{indent}{{ const float *restrict bp = {b_row};")
        for v in range(nv):
            lines.append(f"{indent}  {vt} b{v} = {vt}_load(bp + {v * lanes});")
        if prefetch_b:
            # up to as many requests as one panel row has cache lines, spread over pf_step bytes; the
            # j-th only where pf_step spans more than j lines (loop-invariant: gcc unswitches it), as
            # a small tile's share of the next panel is under a line per k step and each request
            # takes a load slot (MLP and Llama at 15-16 rows, the 2-row tile: 3-5% faster)
            per_step = prefetch_lines or max(1, nr * 4 // 64)
            lines.append(f"{indent}  if (b_next) {{ const char *pf = (const char *)b_next + p * pf_step; " + " ".join(
                "__builtin_prefetch(pf, 0, 2);" if j == 0 else
                f"if (pf_step > {64 * j}) __builtin_prefetch(pf + pf_step * {j} / {per_step}, 0, 2);"
                for j in range(per_step)) + " }")
        pin = register_pin(params, [f"b{v}" for v in range(nv)])
        if pin:
            lines.append(f"{indent}  {pin}")
        for i in range(mr):
            scalar = f"a_pack[(long)p * {a_stride} + {i}]" if a_packed else f"a{i}[p]"
            lines.append(f"{indent}  {{ const float s = {scalar}; const {vt} ai = {{" + ", ".join(["s"] * lanes) + "};")
            lines.append(f"{indent}    " + " ".join(f"{acc[u][i][v]} += ai * b{v};" for v in range(nv)) + " }")
        lines.append(f"{indent}  ++p; }}")

    if splits > 1:
        lines.append(f"  for (; p + {splits} <= kc;) {{")
        for u in range(splits):
            step(u, "    ")
        lines.append("  }")
    lines.append("  while (p < kc)")
    step(0, "    ")
    for u in range(1, splits):
        for i in range(mr):
            for v in range(nv):
                lines.append(f"  {acc[0][i][v]} += {acc[u][i][v]};")
    acc0 = acc[0]
    lines.append(f"  if (rows == {mr} && cols == {nr}) {{")
    lines.append("    if (accumulate) {")
    for i in range(mr):
        for v in range(nv):
            ptr = f"c + (long){i} * ldc + {v * lanes}"
            lines.append(f"      {vt}_store({ptr}, {vt}_load({ptr}) + {acc0[i][v]});")
    lines.append("    } else {")
    for i in range(mr):
        for v in range(nv):
            lines.append(f"      {vt}_store(c + (long){i} * ldc + {v * lanes}, {acc0[i][v]});")
    lines.append("    }")
    lines.append("    return;")
    lines.append("  }")
    lines.append(f"  float tile[{mr * nr}];  /* a ragged edge: spill, then copy the valid part */")
    for i in range(mr):
        for v in range(nv):
            lines.append(f"  {vt}_store(tile + {i * nr + v * lanes}, {acc0[i][v]});")
    lines.append("  for (int i = 0; i < rows; ++i)")
    lines.append("    for (int j = 0; j < cols; ++j)")
    lines.append(f"      c[(long)i * ldc + j] = (accumulate ? c[(long)i * ldc + j] : 0.0f) + tile[i * {nr} + j];")
    lines.append("}")
    return "\n".join(lines) + "\n"
