"""Apply schedule primitives to functions of a TVMScript corpus and compare each result with
TVM's expected function from the same file (block names ignored, as TVM's structural
equality ignores them).

Developer tool (not part of the package, not run by the tests). The corpus files are TVM's
tir-schedule test files copied outside the repository (docs/ARCHITECTURE.md, "s13-corpus3");
each case below names an input function, the expected function and the primitives TVM's test
applies. Usage::

    CORPUS=/tmp/tvm_corpus3 PYTHONPATH=src python tools/schedule_expected_compare.py

``ROOT`` (default: this checkout) selects the sources to test, e.g. an older checkout.
"""

import ast
import os
import sys
import textwrap

ROOT = os.environ.get("ROOT", os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.environ.get("CORPUS", "/tmp/tvm_corpus3")
sys.path[:0] = [ROOT + "/src", ROOT]
import tensorir as tir  # noqa: E402
from tensorir import from_source  # noqa: E402


def funcs(path):
    src = open(path).read()
    tree = ast.parse(src)
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and any("prim_func" in ast.unparse(d) for d in node.decorator_list):
            start = node.decorator_list[0].lineno
            lines = src.splitlines()[start - 1 : node.end_lineno]
            try:
                out[node.name] = from_source(textwrap.dedent("\n".join(lines)))
            except Exception as e:
                print("skip", node.name, str(e)[:80])
    return out


R = funcs(CORPUS + "/tir_schedule_rfactor_p1.py")
B = funcs(CORPUS + "/tir_schedule_blockize.py")
import tensorir.structural as _st  # noqa: E402

_orig = _st._Equal.eq_fields


def _eq_fields(self, a, b, path):  # block names ignored, as TVM compares (both trees)
    if type(a).__name__ == "Block":
        for f in a._fields:
            if not self.eq(getattr(a, f), getattr(b, f), f"{path}.{f}"):
                return False
        return self.eq(a.annotations, b.annotations, path + ".annotations")
    return _orig(self, a, b, path)


_st._Equal.eq_fields = _eq_fields


def check(name, f, expected, action):
    try:
        s = tir.Schedule(f)
        action(s)
        tir.assert_structural_equal(s.func, expected)
        print("OK  ", name)
    except Exception as e:
        print("FAIL", name, type(e).__name__, str(e)[:300])


def rf(loop_idx, axis, block="update"):
    def a(s):
        loops = s.get_loops(s.get_block(block))
        s.rfactor(loops[loop_idx], axis)

    return a


check("matmul_rfactor", R["transformed_matmul"], R["matmul_rfactor"], rf(4, 0))
check("matmul_rfactor_let", R["transformed_matmul_with_let"], R["matmul_rfactor"], rf(4, 0))
check("square_sum_rfactor", R["square_sum"], R["square_sum_rfactor"], rf(2, 1, "C"))
check("ssqrt_rfactor", R["transformed_square_sum_square_root"], R["square_sum_square_root_rfactor"], rf(2, 0, "C"))
check(
    "ssqrt_f1_rfactor",
    R["transformed_square_sum_square_root_factor_one_1"],
    R["square_sum_square_root_factor_one_1_rfactor"],
    rf(2, 0, "C"),
)
check("annot_rfactor", R["square_sum_with_annotation"], R["square_sum_with_annotation_rfactor"], rf(2, 1, "C"))


def bz(block, idx, **kw):
    def a(s):
        loops = s.get_loops(s.get_block(block))
        s.blockize(loops[idx], **kw)

    return a


check("blockize_outer", B["single_elementwise"], B["after_blockize_outer"], bz("B", 0))
check("blockize_inner", B["single_elementwise"], B["after_blockize_inner"], bz("B", 1))
check("blockize_rca", B["before_blockize_rca"], B["after_blockize_rca"], bz("C", 2))
check("blockize_ca", B["before_blockize_compute_at"], B["after_blockize_compute_at"], bz("B", 2))
check("blockize_init", B["rowsum"], B["after_rowsum_blockize"], bz("B", 0))
check(
    "blockize_int64",
    B["single_elementwise_int64"],
    B["after_single_elementwise_int64_blockize"],
    bz("B", 2, preserve_unit_iters=False),
)
check(
    "blockize_int64_p",
    B["single_elementwise_int64"],
    B["after_single_elementwise_int64_blockize_preserve_unit_iters"],
    bz("B", 2),
)
D = funcs(CORPUS + "/tir_schedule_reduction.py")


def dr(block, idx, splits=None):
    def a(s):
        if splits:
            i, j, k = s.get_loops(s.get_block(block))
            io, ii = s.split(i, [16, 8])
            ko, ki = s.split(k, [19, 7])
        loops = s.get_loops(s.get_block(block))
        s.decompose_reduction(s.get_block(block), loops[idx])

    return a


check("decompose0", D["matmul"], D["matmul_decompose0"], dr("update", 0))
check("decompose1", D["rowsum_blockized"], D["matmul_decompose1"], dr("blockized_B", 0))
check("decompose2", D["matmul"], D["matmul_decompose2"], dr("update", 2))
check("decompose4", D["matmul"], D["matmul_decompose4"], dr("update", 1, True))
check("decompose_annot", D["matmul_with_annotation"], D["matmul_decompose_with_annotation"], dr("update", 0))
check("decompose_vec", D["colsum_with_vectorization"], D["colsum_decompose_with_vectorization"], dr("B", 0))
check("decompose_nested", D["nested_block"], D["decomposed_nested_block"], dr("outer", 1))
K = funcs(CORPUS + "/tir_schedule_cache_read_write_p1.py")


def acts(*steps):
    def a(s):
        for kind, blk, idx, scope in steps:
            getattr(s, kind)(s.get_block(blk), idx, scope)

    return a


check(
    "cache_read_elementwise",
    K["elementwise"],
    K["cache_read_elementwise"],
    acts(("cache_read", "B", 0, "global"), ("cache_read", "C", 0, "local")),
)
check(
    "continuous_cache_read",
    K["elementwise"],
    K["continuous_cache_read"],
    acts(("cache_read", "C", 0, "shared"), ("cache_read", "C", 0, "local")),
)
check(
    "cache_read_under_scope",
    K["access_under_scope"],
    K["cache_read_under_scope"],
    acts(("cache_read", "B", 0, "local"), ("cache_read", "C", 0, "global")),
)
check(
    "cache_read_multi_consumer",
    K["func_multi_consumer"],
    K["cache_read_multi_consumer"],
    acts(("cache_read", "B", 0, "global")),
)
check(
    "block_predicate_cache_read",
    K["func_with_block_predicate"],
    K["block_predicate_cache_read"],
    acts(("cache_read", "consumer", 0, "shared")),
)
check(
    "cache_read_int64",
    K["elementwise_shape_int64"],
    K["cache_read_shape_int64"],
    acts(("cache_read", "B", 0, "global")),
)
check(
    "cache_write_elementwise",
    K["elementwise"],
    K["cache_write_elementwise"],
    acts(("cache_write", "B", 0, "local"), ("cache_write", "C", 0, "global")),
)
C = funcs(CORPUS + "/tir_schedule_compute_at_p1.py")


def ca(block, at_block, idx, rev=False):
    def a(s):
        loops = s.get_loops(s.get_block(at_block))
        (s.reverse_compute_at if rev else s.compute_at)(s.get_block(block), loops[idx])

    return a


check("ca_two", C["two_elementwise"], C["two_elementwise_after_compute_at"], ca("B", "C", 0))
check("ca_blockized1", C["blockized_1"], C["blockized_after_compute_at"], ca("B", "C_outer", 1))
check("rca_blockized2", C["blockized_2"], C["blockized_2_after_reverse_compute_at"], ca("C", "B_outer", 1, True))
check("ca_blockized2", C["blockized_2"], C["blockized_2_after_compute_at"], ca("B_outer", "C", 1))
check("ca_cuda0", C["cuda_matmul_0"], C["cuda_matmul_0_after_compute_at"], ca("C", "C_local", 5))
L = funcs(CORPUS + "/tir_schedule_transform_layout_p1.py")
def pm(m, n):
    return (m // 16, n // 16, m % 16, n % 16)


def tl(block, buf, fn):
    def a(s):
        s.transform_layout(s.get_block(block), buf, fn)

    return a


check(
    "tl_intermediate",
    L["two_elementwise"],
    L["two_elementwise_transformed_intermediate_buffer"],
    tl("B", ("write", 0), pm),
)
check("tl_input", L["two_elementwise"], L["two_elementwise_transformed_input_buffer"], tl("B", "A", pm))
check("tl_output", L["two_elementwise"], L["two_elementwise_transformed_output_buffer"], tl("C", ("write", 0), pm))
check(
    "tl_unit", L["two_elementwise_unit_dim"], L["two_elementwise_unit_dim"], tl("B", ("write", 0), lambda i, j: (i, j))
)
