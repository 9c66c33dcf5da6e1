"""Generated kernel for a several-token quantized linear layer (prefill):
``y(n, N) = epilogue(x(n, K) @ dequantize(codes, scale[, min]))`` with ``n`` known at run time.

The schedule rule ``tensorir.schedule_rules.quantized_gemm`` marks the PrimFunc
(``MICRO_KERNEL_ATTR``); its loop nest stays the function's meaning, and the C emitter puts
the kernel generated here in its place, with the same calling convention.

Why: the loop nest decodes 64 x 64 weight tiles and multiplies them with scalar-indexed
loops (about 20 GFLOP/s). Here each parallel task owns ``nr`` weight columns (one register
tile wide); for each ``kc`` rows it decodes a ``kc x nr`` float32 B panel once (the packed
layout the GEMM micro-kernel reads, L1-sized: no float32 copy of the whole weight exists),
then runs the register-blocked micro-kernel over every ``mr`` rows of ``x`` read in place
(packing ``x`` measured level: the kernel is not bound by its loads), a ragged last tile by a
micro-kernel of exactly its rows, accumulating into a per-task ``rows x nr`` run; after the last
``kc`` block every element passes through the epilogue once and ``y`` is written in its final
form. Rows come in chunks of at most ``mc`` (the chunk of ``x`` stays in L2), evened out in
whole register tiles; a chunk and a column panel make one task, tasks handed to the threads
as they come for them, two adjacent panels at a time. One token (``n == 1`` at run time) calls the one-token GEMV
(``quantized_gemv.py``), which streams the codes once without decoding a panel.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace

from .gemm.machine import MachineParams, machine_params
from .gemm.microkernel import emit_microkernel, switch_on_rows, vector_type, vector_typedefs
from .gemm.params import GemmParams, derive_params
from .quantized_gemv import BLOCK, FORMATS, ColumnEpilogue, FLOAT32_SCALES, ScaleLoads, VectorFeatures, gemv_source

MICRO_KERNEL_ATTR = "c.quantized_gemm"
MAX_CHUNK_ROWS = 256     # rows per task: the accumulator run (rows x nr floats) is a stack array


def generated_gemm_enabled() -> bool:
    """False when ``RELAXSCRIPT_GENERATED_GEMM=0`` (or ``RELAXSCRIPT_GENERATED_KERNELS=0``, which
    turns off every generated kernel): compile the several-token loop nest instead, to compare
    prefill with and without this kernel while the one-token GEMV stays."""
    return os.environ.get("RELAXSCRIPT_GENERATED_GEMM", "1") != "0"


@dataclass(frozen=True)
class GemmTile:
    """Register tile ``mr x nr`` (``nr`` two vectors wide), ``kc`` weight rows decoded per
    panel (whole 32-row blocks), ``mc`` rows of ``x`` per task."""
    lanes: int
    mr: int
    nr: int
    kc: int
    mc: int


def gemm_tile(params: GemmParams, depth: int, l2_bytes: int) -> GemmTile:
    """The GEMM's register tile ``mr x nr`` (``backends/c/gemm/params.py``: derived from the
    vector width and register count), ``kc`` its L1-sized panel depth rounded down to whole
    32-row blocks, and ``mc`` so that a task's rows of ``x`` (``mc x depth`` floats), which
    every column panel reads again, stay in half of L2 (measured at 256 tokens, 576 wide:
    whole 256-row chunks ran at 17-35 GFLOP/s where 64 tokens ran at 85)."""
    kc = max(BLOCK, params.kc // BLOCK * BLOCK)
    fit = l2_bytes // 2 // (depth * 4)
    mc = max(params.mr, min(MAX_CHUNK_ROWS, fit) // params.mr * params.mr)
    return GemmTile(params.lanes, params.mr, params.nr, kc, mc)


def _decode_panel_source(name: str, fmt: str, cols: int, tile: GemmTile, lanes: int,
                         scales: ScaleLoads = FLOAT32_SCALES) -> str:
    """``static void name(codes, scale, mins, float* b_pack, int64_t k0, int64_t kc, int64_t c0,
    int width)``: weight rows ``k0 .. k0 + kc`` (whole blocks) of columns ``c0 .. c0 + width``
    decoded into the k-major ``kc x nr`` panel, columns past ``width`` zero; the scales (and
    mins) read as ``scales`` says."""
    per_byte, offset, has_min = FORMATS[fmt]
    code_t = "int8_t" if fmt == "q8_0" else "uint8_t"
    widen = "rs_qwiden_s8" if fmt == "q8_0" else "rs_qwiden_u8"
    nr = tile.nr
    byte_rows = BLOCK // per_byte
    shift = f" + (float)({offset})" if offset else ""

    def value(code: str, u: str) -> str:   # the float of one code (vector or scalar form)
        scaled = f"s{u} * ({code}{shift})"
        return f"{scaled} + m{u}" if has_min else scaled

    vector = []
    for v in range(nr // lanes):
        vector.append(f"const rs_qf s{v} = {scales.vector(f'scale + mrow + {v * lanes}')};")
        if has_min:
            vector.append(f"const rs_qf m{v} = {scales.vector(f'mins + mrow + {v * lanes}')};")
    vector.append(f"for (int r = 0; r < {byte_rows}; ++r) {{")
    vector.append(f"  const {code_t}* p = block + (int64_t)r * {cols};")
    vector.append(f"  float* out = panel + (int64_t)r * {nr};")
    for v in range(nr // lanes):
        if per_byte == 2:
            vector.append(f"  {{ const rs_qi q = {widen}(p + {v * lanes});")
            low = value("__builtin_convertvector(q & 15, rs_qf)", str(v))
            vector.append(f"    rs_qstore_f(out + {v * lanes}, {low});")
            vector.append(f"    rs_qstore_f(out + {byte_rows * nr + v * lanes}, "
                          f"{value('__builtin_convertvector(q >> 4, rs_qf)', str(v))}); }}")
        else:
            vector.append(f"  rs_qstore_f(out + {v * lanes}, "
                          f"{value(f'__builtin_convertvector({widen}(p + {v * lanes}), rs_qf)', str(v))});")
    vector.append("}")
    scalar = ["for (int j = 0; j < width; ++j) {",
              f"  const float sj = {scales.scalar('scale[mrow + j]')};"
              + (f" const float mj = {scales.scalar('mins[mrow + j]')};" if has_min else ""),
              f"  for (int r = 0; r < {byte_rows}; ++r) {{",
              f"    const int code = block[(int64_t)r * {cols} + j];"]
    if per_byte == 2:
        scalar += [f"    panel[(int64_t)r * {nr} + j] = {value('(float)(code & 15)', 'j')};",
                   f"    panel[(int64_t)(r + {byte_rows}) * {nr} + j] = {value('(float)(code >> 4)', 'j')};"]
    else:
        scalar += [f"    panel[(int64_t)r * {nr} + j] = {value('(float)code', 'j')};"]
    scalar += ["  }", "}",
               f"for (int r = 0; r < {BLOCK}; ++r)",
               f"  for (int j = width; j < {nr}; ++j) panel[(int64_t)r * {nr} + j] = 0.0f;"]
    ind = "\n      "
    return "\n".join([
        f"static void {name}(const {code_t}* restrict codes, const {scales.c_type}* restrict scale, "
        f"const {scales.c_type}* restrict mins, float* restrict b_pack, int64_t k0, int64_t kc, int64_t c0, "
        "int width) {",
        "  (void)mins;",
        f"  for (int64_t b = k0 / {BLOCK}; b < (k0 + kc) / {BLOCK}; ++b) {{",
        f"    const {code_t}* block = codes + b * {byte_rows * cols} + c0;",
        f"    const int64_t mrow = b * {cols} + c0;",
        f"    float* panel = b_pack + (b - k0 / {BLOCK}) * {BLOCK * nr};",
        f"    if (width == {nr}) {{",
        "      " + ind.join(vector),
        "    } else {",
        "      " + ind.join(scalar),
        "    }",
        "  }",
        "}"])


def gemm_source(symbol: str, fmt: str, rows: int, cols: int, roles: dict[str, int],
                features: VectorFeatures, row_count: str, symbol_lines: tuple[str, ...] = (),
                epilogue: ColumnEpilogue | None = None, one_row_epilogue: ColumnEpilogue | None = None,
                row_operand: str | None = None, machine: MachineParams | None = None,
                buffer_count: int = 0, activations: str | None = None, scale_dtype: str = "float32",
                pair: bool = False) -> str:
    """C source of ``int32_t symbol(void* const* buffers, const int64_t* syms)`` computing
    ``y[i, c] = epilogue(sum_r x[i, r] * dequantize(codes)[r, c])`` for the run-time row count
    ``row_count`` (a C expression over the names ``symbol_lines`` declare from ``rs_syms``).
    ``rows``/``cols`` are the weight's (K, N); ``roles`` maps codes/scale/min/x/y to buffer
    positions. The epilogue's statements read ``rs_row``, ``rs_col`` and ``rs_prod``;
    ``one_row_epilogue`` is the same chain at row 0, for the one-token GEMV. Without an ``x``
    role, ``row_operand`` is ``x[rs_row, rs_k]`` as a C expression over the parameters (a
    reshape/transpose in front of the product): the kernel gathers ``x``'s rows first (a few
    tokens, a small buffer); one token then calls the GEMV with that buffer as ``x``, one
    position past the function's ``buffer_count`` buffers. ``activations="q8_0"``: ``x`` is to
    be rounded to 8-bit block codes first (``R.fake_quantize``): one token passes it to the
    GEMV unrounded (it rounds and multiplies integer codes), several are rounded once into a
    buffer the micro-kernel reads. ``scale_dtype``: the scales' and mins' (float16: widened
    as the panels are decoded). ``pair``: ``cols`` is two halves of ``N = cols / 2`` columns and
    ``y`` has ``N`` (``gemv_source``'s pair epilogue, reading ``rs_prod`` and ``rs_prod_hi``): each
    task computes its panel of both halves into two runs, then the epilogue per element."""
    if fmt not in FORMATS:
        raise ValueError(f"quantized gemm: unsupported format {fmt!r} (have {sorted(FORMATS)})")
    if rows % BLOCK or rows <= 0 or cols <= 0:
        raise ValueError(f"quantized gemm: {rows} x {cols} is not whole {BLOCK}-row blocks")
    has_min = FORMATS[fmt][2]
    scales = ScaleLoads(scale_dtype)
    machine = machine or machine_params()
    params = derive_params(machine)
    if params.nr % features.lanes:
        raise ValueError(f"quantized gemm: the register tile's {params.nr} columns are not whole "
                         f"{features.name} vectors")
    if pair and (epilogue is None or cols % 2):
        raise ValueError(f"quantized gemm: a pair epilogue needs an epilogue and an even column count, not {cols}")
    tile = gemm_tile(params, rows, machine.l2_bytes)
    kc = min(tile.kc, rows)
    mr, nr, mc = tile.mr, tile.nr, tile.mc
    out_cols = cols // 2 if pair else cols     # y's columns; a task's panel is of each half
    panels = -(-out_cols // nr)
    code_t = "int8_t" if fmt == "q8_0" else "uint8_t"
    if ("x" in roles) == (row_operand is not None):
        raise ValueError("quantized gemm: give x either as a buffer role or as a row operand")
    gemv_roles = roles if row_operand is None else roles | {"x": buffer_count}
    one_row = gemv_source(f"{symbol}_one_row", fmt, rows, cols, gemv_roles, features, one_row_epilogue,
                          activations, scale_dtype, pair)
    operands = [f"  const {code_t}* restrict codes = (const {code_t}*)rs_buffers[{roles['codes']}];",
                f"  const {scales.c_type}* restrict scale = (const {scales.c_type}*)rs_buffers[{roles['scale']}];",
                f"  const {scales.c_type}* restrict mins = "
                + (f"(const {scales.c_type}*)rs_buffers[{roles['min']}];" if has_min else "NULL;"),
                f"  float* restrict y = (float*)rs_buffers[{roles['y']}];",
                *(f"  {line}" for line in symbol_lines)]
    if row_operand is None:
        operands.append(f"  const float* restrict x = (const float*)rs_buffers[{roles['x']}];")
        rows_of_x = [f"  if (rs_rows == 1) return {symbol}_one_row(rs_buffers, rs_syms);"]
        release = []
    else:
        rows_of_x = [
            f"  float* restrict rs_xrows = (float*)malloc(sizeof(float) * (size_t)rs_rows * {rows} + 64);",
            "  if (rs_xrows == NULL) return STATUS_NO_MEMORY;",
            f"  #pragma omp parallel for schedule(static) if(rs_rows * {rows} >= 65536) num_threads(rs_threads())",
            "  for (int64_t rs_row = 0; rs_row < rs_rows; ++rs_row)",
            f"    for (int64_t rs_k = 0; rs_k < {rows}; ++rs_k)",
            f"      rs_xrows[rs_row * {rows} + rs_k] = {row_operand};",
            "  const float* restrict x = rs_xrows;",
            "  if (rs_rows == 1) {",
            f"    void* rs_args[{buffer_count + 1}];",
            f"    memcpy(rs_args, rs_buffers, sizeof(void*) * {buffer_count});",
            f"    rs_args[{buffer_count}] = rs_xrows;",
            f"    rs_status = {symbol}_one_row(rs_args, rs_syms);",
            "    free(rs_xrows);",
            "    return rs_status;",
            "  }"]
        release = ["  free(rs_xrows);"]
    if activations is not None:
        from .quantized_gemv_int8 import round_rows_c
        rows_of_x += [
            f"  float* restrict rs_xq = (float*)malloc(sizeof(float) * (size_t)rs_rows * {rows} + 64);",
            "  if (rs_xq == NULL) {" + " ".join(release) + " return STATUS_NO_MEMORY; }",
            *round_rows_c("rs_rows", rows, "x", "rs_xq"),
            "  x = rs_xq;"]
        release = release + ["  free(rs_xq);"]
        # x is reassigned to the rounded rows
        operands = [line.replace("const float* restrict x =", "const float* x =") for line in operands]
        rows_of_x = [line.replace("const float* restrict x = rs_xrows;", "const float* x = rs_xrows;")
                     for line in rows_of_x]
    if epilogue:
        operands += [f"  {line}" for line in epilogue.declarations]
        store = ["          const float rs_prod = run[(int64_t)(rs_row - r0) * " + str(nr) + " + j];",
                 *(["          const float rs_prod_hi = run_hi[(int64_t)(rs_row - r0) * " + str(nr) + " + j];"]
                   if pair else []),
                 *(f"          {line}" for line in epilogue.statements),
                 f"          y[rs_row * {out_cols} + rs_col] = {epilogue.result};"]
    else:
        store = [f"          y[rs_row * {cols} + rs_col] = run[(int64_t)(rs_row - r0) * {nr} + j];"]
    rows_fn = f"rs_qgemm_{vector_type(params)}_{mr}x{nr}_rows"
    byte_rows = BLOCK // FORMATS[fmt][0]
    return "\n".join([
        one_row,   # first: its helpers (rs_qf, rs_qwiden_*) serve the panel decoder too
        "#include <omp.h>",
        f"#ifndef RS_QGEMM_{vector_type(params)}",   # the typedefs once per translation unit
        f"#define RS_QGEMM_{vector_type(params)}",
        vector_typedefs(params),
        "#endif",
        row_kernels_source(rows_fn, params),
        _decode_panel_source(f"{symbol}_decode", fmt, cols, tile, features.lanes, scales),
        f"/* {fmt} gemm n x {rows} x {cols} for {features.name}: register tile {mr} x {nr}, "
        f"{kc} weight rows decoded per panel, up to {mc} rows per chunk{', float16 scales' if scales.half else ''} */",
        f"int32_t {symbol}(void* const* rs_buffers, const int64_t* rs_syms) {{",
        *operands,
        "  int32_t rs_status = STATUS_OK;",
        "  (void)rs_syms; (void)mins;",
        f"  const int64_t rs_rows = {row_count};",
        "  if (rs_rows <= 0) return STATUS_OK;",
        *rows_of_x,
        # row chunks evened out in whole register tiles (256 rows in 252 + 4 decoded every panel
        # twice and ran a 4-row chunk through its own pass)
        f"  const int64_t tiles = (rs_rows + {mr - 1}) / {mr}, chunks = (rs_rows + {mc - 1}) / {mc};",
        f"  const int64_t tasks = chunks * {panels};",
        # tasks handed out as threads come for them, two adjacent panels at a time (they share the
        # codes' cache lines): a thread on a core another process also runs does fewer of them (a
        # static split waits for it at the end), and no thread is left the ragged rest (the static
        # split of chunk-major tasks gave one thread the whole first chunk at 256 tokens)
        f"  int rs_team = rs_rows * {rows * cols} >= 262144 ? rs_threads() : 1;",
        "  if (rs_team > (tasks + 1) / 2) rs_team = (int)((tasks + 1) / 2);",
        "  #pragma omp parallel for schedule(dynamic, 2) num_threads(rs_team) if(rs_team > 1)",
        "  for (int64_t task = 0; task < tasks; ++task) {",
        f"    float panel[{kc * nr}] __attribute__((aligned(64)));",
        f"    float run[{mc * nr}] __attribute__((aligned(64)));",
        *([f"    float run_hi[{mc * nr}] __attribute__((aligned(64)));"] if pair else []),
        f"    const int64_t chunk = task / {panels}, c0 = task % {panels} * {nr};",
        f"    const int64_t r0 = tiles * chunk / chunks * {mr};",
        f"    const int64_t rs_end = tiles * (chunk + 1) / chunks * {mr};",
        "    const int64_t r1 = rs_end < rs_rows ? rs_end : rs_rows;",
        f"    const int width = {out_cols} - c0 < {nr} ? (int)({out_cols} - c0) : {nr};",
        # a pair epilogue: the same panel of the product's second half, into its own run
        *(["    for (int half = 0; half < 2; ++half) {",
           f"    const int64_t pc = c0 + half * {out_cols};",
           "    float* restrict acc_run = half ? run_hi : run;"] if pair else
          ["    {", "    const int64_t pc = c0;", "    float* restrict acc_run = run;"]),
        f"    for (int64_t k0 = 0; k0 < {rows}; k0 += {kc}) {{",
        f"      const int depth = {rows} - k0 < {kc} ? (int)({rows} - k0) : {kc};",
        f"      {symbol}_decode(codes, scale, mins, panel, k0, depth, pc, width);",
        "      /* a ragged last tile multiplies only its rows */",
        # the first row tile asks for the next panel's codes (the next kc rows, else the next columns),
        # one byte row per k step: rows `cols` bytes apart, which the hardware prefetchers did not
        # follow (weights from L3, one thread: 16 tokens 1.08-1.16x, 64 1.03-1.05x; the same requests
        # in one burst after the decode filled the miss buffers and gained nothing)
        f"      const int64_t rs_nk = k0 + {kc} < {rows} ? k0 + {kc} : 0, rs_nc = rs_nk ? pc : pc + {nr};",
        f"      const char* rs_next = rs_nc < {cols} ? (const char*)(codes + rs_nk / {BLOCK} * {byte_rows * cols} "
        "+ rs_nc) : NULL;",
        f"      for (int64_t i = r0; i < r1; i += {mr})",
        f"        {rows_fn}(r1 - i < {mr} ? (int)(r1 - i) : {mr}, depth, x + i * {rows} + k0, {rows}, panel,",
        f"                  i == r0 ? (const float*)rs_next : NULL, {cols}, acc_run + (i - r0) * {nr}, k0 > 0);",
        "    }",
        "    }",
        "    for (int64_t rs_row = r0; rs_row < r1; ++rs_row)",
        "      for (int j = 0; j < width; ++j) {",
        "          const int64_t rs_col = c0 + j;",
        *store,
        "      }",
        "  }",
        *release,
        "  return rs_status;",
        "}"])


def row_kernels_source(name: str, params: GemmParams) -> str:
    """``static void name(int rows, int kc, const float* a, int lda, const float* b_pack,
    const float* b_next, long pf_step, float* c, int acc)``: ``c[rows x nr] (+)= a[rows x kc] @
    b_pack`` (``a`` read in place, ``c`` ``nr`` floats a row) by a micro-kernel of exactly ``rows``
    rows, ``1 <= rows <= mr``; at k step ``p`` it asks for the line at ``b_next + p * pf_step``
    bytes (NULL: none). Emitted once
    per translation unit (every quantized GEMM of one machine shares them): a ragged last tile
    through the ``mr``-row kernel paid for ``mr`` rows (16 tokens ran as 14 + 14)."""
    out, calls = [f"#ifndef {name.upper()}", f"#define {name.upper()}"], []
    for rows in range(1, params.mr + 1):
        out.append(emit_microkernel(f"{name}{rows}", replace(params, mr=rows), a_packed=False, b_packed=True,
                                    prefetch_b=True, prefetch_lines=1))
        calls.append(f"{name}{rows}(kc, a, lda, b_pack, b_next, pf_step, c, {params.nr}, {rows}, {params.nr}, acc)")
    out.append(switch_on_rows(f"{name}(int rows, int kc, const float* a, int lda, const float* b_pack, "
                              "const float* b_next, long pf_step, float* c, int acc)", calls))
    out.append("#endif")
    return "\n".join(out)
