"""DESIGN.md's example module, in decorator form and as script text (shared by tests)."""
from relaxscript import R, function, ir_module
from tensorir import T, prim_func


@ir_module
class DesignModule:
    @prim_func
    def exp(x: T.Buffer(("n", 4), "float32"), y: T.Buffer(("n", 4), "float32")):
        n = T.int64()
        for i, j in T.grid(n, 4):
            with T.block("exp"):
                vi, vj = T.axis.remap("SS", [i, j])
                y[vi, vj] = T.exp(x[vi, vj])

    @function
    def main(x: R.Tensor(("n", 4), "float32")) -> R.Tensor(("n * 2",), "float32"):
        n = T.int64()
        with R.dataflow():
            lv0 = R.call_tir(DesignModule.exp, [x], R.Tensor((n, 4), "float32"))
            lv1 = R.call_dps_library("numpy.negative", [lv0], R.Tensor((n, 4), "float32"))
            R.output(lv1)
        lv2 = DesignModule.flat(lv1)
        lv3 = R.split(lv2, 2)
        return lv3[0]

    @function
    def flat(x: R.Tensor(("n", 4), "float32")) -> R.Tensor(("n * 4",), "float32"):
        n = T.int64()
        with R.dataflow():
            lv0 = R.reshape(x, R.shape([n * 4]))
            lv1 = R.nn.relu(lv0)
            R.output(lv1)
        return lv1


DESIGN_TEXT = '''
@R.ir_module
class DesignModule:
    @T.prim_func
    def exp(x: T.Buffer(("n", 4), "float32"), y: T.Buffer(("n", 4), "float32")):
        n = T.int64()
        for i, j in T.grid(n, 4):
            with T.block("exp"):
                vi, vj = T.axis.remap("SS", [i, j])
                y[vi, vj] = T.exp(x[vi, vj])

    @R.function
    def main(x: R.Tensor(("n", 4), "float32")) -> R.Tensor(("n * 2",), "float32"):
        n = T.int64()
        with R.dataflow():
            lv0 = R.call_tir(DesignModule.exp, [x], R.Tensor((n, 4), "float32"))
            lv1 = R.call_dps_library("numpy.negative", [lv0], R.Tensor((n, 4), "float32"))
            R.output(lv1)
        lv2 = DesignModule.flat(lv1)
        lv3 = R.split(lv2, 2)
        return lv3[0]

    @R.function
    def flat(x: R.Tensor(("n", 4), "float32")) -> R.Tensor(("n * 4",), "float32"):
        n = T.int64()
        with R.dataflow():
            lv0 = R.reshape(x, R.shape([n * 4]))
            lv1 = R.nn.relu(lv0)
            R.output(lv1)
        return lv1
'''
