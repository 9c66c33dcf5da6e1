"""Script texts shared by the script tests: the paper's figures in this syntax."""

FIGURE2 = '''
@R.ir_module
class Module:
    @T.prim_func
    def exp(X: T.Buffer(("n", 4), "float32"), Y: T.Buffer(("n", 4), "float32")):
        n = T.int64()
        for i, j in T.grid(n, 4):
            with T.block("exp"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.exp(X[vi, vj])

    @R.function
    def main(x: R.Tensor(("n", 4), "f32")) -> R.Tensor(("n * 2",), "f32"):
        n = R.sym_var()
        with R.dataflow():
            lv0 = R.call_tir(Module.exp, [x], R.Tensor((n, 4), "f32"))
            lv1 = R.call_dps_library("cutlass.rms_norm", [lv0], R.Tensor((n, 4), "f32"))
            f0 = Module.subfunc
            lv2 = f0(lv1)
            lv3 = R.split(lv2, indices_or_sections=2)
            lv4 = lv3[0]
            R.output(lv4)
        return lv4

    @R.function
    def subfunc(x: R.Tensor(("n", 4), "f32")) -> R.Tensor(("n * 4",), "f32"):
        n = R.sym_var()
        with R.dataflow():
            lv0 = R.flatten(x)
            lv1 = R.nn.relu(lv0)
            R.output(lv1)
        return lv1
'''

# Deduced annotations of Figure 2's main (the figure's own annotations).
FIGURE2_MAIN_ANNOTATIONS = {
    "lv0": 'R.Tensor((n, 4), dtype="float32")',
    "lv1": 'R.Tensor((n, 4), dtype="float32")',
    "f0": 'R.Callable([R.Tensor(("k", 4), dtype="float32")], R.Tensor(("k * 4",), dtype="float32"))',
    "lv2": 'R.Tensor((n * 4,), dtype="float32")',
    "lv3": 'R.Tuple(R.Tensor((n * 2,), dtype="float32"), R.Tensor((n * 2,), dtype="float32"))',
    "lv4": 'R.Tensor((n * 2,), dtype="float32")',
}

FIGURE3 = '''
@R.function
def symbolic_shape_fn(x: R.Tensor(("n", 2, 2), "f32")):
    n, m = R.sym_var(), R.sym_var()
    lv0 = R.reshape(x, R.shape([n, 4]))
    lv1 = R.flatten(lv0)
    lv2 = R.unique(lv1)
    lv3 = R.match_cast(lv2, R.Tensor((m,), "f32"))
    lv4 = R.exp(lv3)
    return lv4
'''

FIGURE3_ANNOTATIONS = {
    "lv0": 'R.Tensor((n, 4), dtype="float32")',
    "lv1": 'R.Tensor((n * 4,), dtype="float32")',
    "lv2": 'R.Tensor(ndim=1, dtype="float32")',
    "lv3": 'R.Tensor((m,), dtype="float32")',
    "lv4": 'R.Tensor((m,), dtype="float32")',
}

FIGURE7 = '''
@R.ir_module
class Module:
    @R.function
    def subfn(s: R.Shape(["n", "m"])) -> R.Tensor(("n * m",), "f32"):
        lv0 = R.zeros(s, "f32")
        lv1 = R.flatten(lv0)
        return lv1

    @R.function
    def main(x: R.Tensor(("n",), "f32"), y: R.Shape(ndim=2)):
        n = R.sym_var()
        f0: R.Callable([R.Shape(["n", "m"])], R.Tensor(("n * m",), "f32")) = Module.subfn
        lv0 = f0(R.shape([n, 4]))
        lv1 = Module.subfn(R.shape([3, 4]))
        lv2 = subfn(R.shape([n + 1, 4]))
        lv3 = subfn(y)
        return (lv0, lv1, lv2, lv3)
'''

FIGURE7_ANNOTATIONS = {
    "lv0": 'R.Tensor((n * 4,), dtype="float32")',
    "lv1": 'R.Tensor((12,), dtype="float32")',
    "lv2": 'R.Tensor(((n + 1) * 4,), dtype="float32")',
    "lv3": 'R.Tensor(ndim=1, dtype="float32")',
}

FIGURE8 = '''
@R.ir_module
class Module:
    @R.function
    def fused_add_relu(x: R.Tensor(("n * 2",), "f32"), y: R.Tensor(("n * 2",), "f32"),
                       s: R.Shape(["n"])) -> R.Tensor(("n * 2",), "f32"):
        n = R.sym_var()
        lv0 = R.add(x, y)
        lv1 = R.nn.relu(lv0)
        return lv1

    @R.function
    def main(x: R.Tensor(("n", 2), "f32")):
        n = R.sym_var()
        lv0: R.Tensor(("2 * n",), "f32") = R.flatten(x)
        lv1 = Module.fused_add_relu(lv0, lv0, R.shape([n]))
        return lv1
'''

FIGURE8_MAIN_ANNOTATIONS = {
    "lv0": 'R.Tensor((2 * n,), dtype="float32")',
    "lv1": 'R.Tensor((n * 2,), dtype="float32")',
}
