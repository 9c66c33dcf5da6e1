"""Register tile and cache tiles of the generated GEMM, derived from ``MachineParams``.

The derivation is the analytical model of Goto/BLIS that Vortex builds on
(no sampling, no autotuning):

- **register tile ``mr x nr``**: ``nr`` is two vector registers wide (two loads of
  B per k step), and ``mr`` takes the rest of the register file: ``mr * 2``
  accumulators + 2 B vectors + 1 broadcast of A must fit in the registers
  (AVX2's 16: 6 x 16 with 12 accumulators; AVX-512's 32: 14 x 32 with 28);
- **kc**: a packed ``kc x nr`` panel of B stays in half of L1 while the
  ``kc x mr`` panels of A stream past it;
- **mc**: the packed ``mc x kc`` block of A stays in half of L2 (re-read for every
  B panel);
- **nc**: the packed ``kc x nc`` block of B stays in half of L3 (shared by the cores);
- **skinny_nc**: without packed A, B is packed in chunks of ``kc x skinny_nc`` that stay
  in half of L2;
- **gemv_cols**: one row of A (``m == 1``, ``gemv.py``) accumulates into this many output
  columns at a time, kept in half of L1 while rows of B stream past (wider chunks measured
  faster: 1024x4096 one thread 0.36 ms at 4096 columns, 0.41 at 2048, 0.45 at 1024);
- **gemv_split_bytes**: a B smaller than half of one core's L2 is streamed by one thread (from
  there it takes less time than handing work to another thread costs);
- **skinny_rows**: up to this many rows of A (``rows x kc`` floats) fit in half of
  L1 beside the B panel, so A is read in place instead of packed (packing would
  cost as much as the product for so few rows);
- **a_in_place_rows**: with B packed once at build time (``prepacked.py``), up to this many rows
  read A where it lies; more rows pack it per kc block. Half of L1's ways: rows of A a multiple
  of the way size (L1 / ways, 4 KiB on x86) apart all fall into one L1 set, where the kc x nr
  slice of B (half of L1 by kc's derivation) already holds half of the ways, so a tile of more
  rows evicts its own lines. The in-place kernel also keeps one pointer per row, which GCC spills
  to the stack at 14 rows (x86-64 has 16 general registers).
- **min_tail_rows**: the fewest rows the prepacked path gives a last, ragged row tile (it takes the
  rest from the tile before it: 16 rows as 12 + 4, not 14 + 2). A tile of ``r`` rows issues ``r *
  NR_VECTORS`` multiply-adds a k step against ``NR_VECTORS + r`` loads (B's vectors, A's
  broadcasts) and a prefetch; with as many load ports as FMA ports (two each on the x86 cores
  here) the multiply-adds bound it only from ``r = NR_VECTORS + 2`` rows; fewer leave the FMA ports
  idle while it loads. At most half of ``mr``, so the tile giving rows stays the larger.
- **sweep_c_floats**: the skinny variant reads B in place, ``SKINNY_KC`` rows at a time swept across
  the columns, and re-reads the rows of c it accumulates into on every sweep: it takes the columns in
  blocks whose rows of c fill a quarter of L2 (the rest holds B's stream; 16 rows of 4096 columns,
  half of a 512 KiB L2, ran 0.7x the packing path).
- **the packed tile** (``packed_mr x packed_nr``, ``packed_kc``, ``packed_mc``): the medium and large
  variants, which pack A and B on every call, have a register tile of their own. Their k loop is long
  (the whole ``packed_kc``) and nothing streams from memory inside it, so the tile that issues the
  fewest loads per multiply-add wins: ``NR_VECTORS`` B vectors and ``mr`` broadcasts serve
  ``mr * nv`` multiply-adds, so the tile maximizes ``mr * nv / (mr + nv)`` over ``nv`` in 1, 2, 4
  within the register file (AVX-512's 32: 6 x 4 vectors, 2.4, against 14 x 2's 1.75; AVX2's 16:
  6 x 2 as above). ``packed_kc``: the A micro-panel (``mr x kc``) takes a quarter of L1, at most
  512 (each kc block reads and writes the C tile once; from 512 that is under 0.4% of the
  multiply-adds); the B micro-panel then sits in L2 and the kernel prefetches the next one.
  ``packed_mc``: the packed A block in half of L2. One thread, thread CPU time, m = 512 (Xeon, AVX-512,
  48 KiB L1, 2 MiB L2), interleaved: 14 x 32 with kc = 192 (the skinny tile) 134-153 GFLOP/s on the
  workloads' shapes; 6 x 64 with kc = 192 146-158, 256 148-162, 512 156-169 (OpenBLAS 157-163, the
  measured peak 183).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from .machine import MachineParams, machine_params

NR_VECTORS = 2          # vector registers across one row of the register tile
MAX_NC = 4096           # a packed B block larger than this gains nothing and costs memory


@dataclass(frozen=True)
class GemmParams:
    """Everything the emitters need; ``mr``/``nr`` are the register tile (``nr`` a multiple
    of ``lanes``), ``kc``/``mc``/``nc`` the cache blocks (``mc`` a multiple of ``mr``, ``nc``
    of ``nr``)."""
    isa: str
    lanes: int
    mr: int
    nr: int
    kc: int
    mc: int
    nc: int
    skinny_rows: int
    skinny_nc: int
    cores: int
    registers: int = 16     # vector registers of the ISA (the micro-kernel's accumulator budget)
    gemv_cols: int = 2048   # output columns the GEMV keeps in L1 at once
    gemv_split_bytes: int = 1 << 19   # a GEMV's B from this size on is split over the threads
    a_in_place_rows: int = 4          # rows the prepacked path reads A in place for (half of L1's ways)
    min_tail_rows: int = 1            # fewest rows of a prepacked product's last row tile (see above)
    packed_mr: int = 0                # the packed tile (medium and large variants, see above)
    packed_nr: int = 0
    packed_kc: int = 0
    packed_mc: int = 0
    sweep_c_floats: int = 1 << 15     # floats of c the skinny sweep re-reads from L2 (see above)

    @property
    def vectors_per_row(self) -> int:
        return self.nr // self.lanes

    def packed(self) -> "GemmParams":
        """These params with the packed tile as the register tile and cache blocks (what the
        medium and large variants' emitters read)."""
        return replace(self, mr=self.packed_mr, nr=self.packed_nr, kc=self.packed_kc, mc=self.packed_mc)

    def describe(self) -> str:
        return (f"{self.isa}: register tile {self.mr}x{self.nr}, kc={self.kc}, mc={self.mc}, "
                f"nc={self.nc}, A unpacked for m <= {self.skinny_rows}; packed tile "
                f"{self.packed_mr}x{self.packed_nr}, kc={self.packed_kc}, mc={self.packed_mc}; {self.cores} threads")


def _round_down(value: int, multiple: int, minimum: int) -> int:
    return max(minimum, value // multiple * multiple)


# most rows of the packed tile (as for mr): more pointers and broadcasts than that gain nothing
MAX_MR = 16
PACKED_VECTORS = (1, 2, 4)   # B vectors across the packed tile's row that are weighed
MAX_PACKED_KC = 512


def packed_tile(lanes: int, registers: int, l1d_bytes: int, l2_bytes: int) -> tuple[int, int, int, int]:
    """``(mr, nr, kc, mc)`` of the packed tile (see the module docstring)."""
    def loads_ratio(nv: int) -> float:
        rows = min(MAX_MR, (registers - nv - 1) // nv)
        return rows * nv / (rows + nv) if rows >= 1 else 0.0
    nv = max(PACKED_VECTORS, key=loads_ratio)
    mr = max(1, min(MAX_MR, (registers - nv - 1) // nv))
    kc = min(MAX_PACKED_KC, _round_down(l1d_bytes // 4 // (mr * 4), 8, 32))
    mc = _round_down(l2_bytes // 2 // (kc * 4), mr, mr)
    return mr, nv * lanes, kc, mc


def derive_params(machine: MachineParams) -> GemmParams:
    isa = machine.isa
    lanes = isa.lanes
    nr = NR_VECTORS * lanes
    mr = max(1, min(MAX_MR, (isa.registers - NR_VECTORS - 1) // NR_VECTORS))
    kc = min(1024, _round_down(machine.l1d_bytes // 2 // (nr * 4), 8, 32))
    mc = _round_down(machine.l2_bytes // 2 // (kc * 4), mr, mr)
    nc = min(MAX_NC, _round_down(machine.l3_bytes // 2 // (kc * 4), nr, nr))
    skinny_rows = max(1, machine.l1d_bytes // 2 // (kc * 4))
    skinny_nc = min(MAX_NC, _round_down(machine.l2_bytes // 2 // (kc * 4), nr, nr))
    gemv_cols = max(nr, machine.l1d_bytes // 2 // 4 // nr * nr)
    a_in_place_rows = max(1, min(mr, machine.l1d_ways // 2))
    min_tail_rows = max(1, min(mr // 2, NR_VECTORS + 2))
    return GemmParams(isa.name, lanes, mr, nr, kc, mc, nc, skinny_rows, skinny_nc, machine.cores,
                      isa.registers, gemv_cols, machine.l2_bytes // 2, a_in_place_rows, min_tail_rows,
                      *packed_tile(lanes, isa.registers, machine.l1d_bytes, machine.l2_bytes),
                      machine.l2_bytes // 4 // 4)


def gemm_params() -> GemmParams:
    """The tiles for this machine."""
    return derive_params(machine_params())
