"""relaxscript: the graph-level IR, passes, VM and build of the compiler.

Public names are imported lazily so that each submodule stays independent.
"""
from __future__ import annotations

from tensorir.errors import (AllocationError, IndexOutOfRangeError, IRError, KernelDivisionByZeroError,
                             ParseError, ShapeMismatchError, ShapeDivisionByZeroError)
from tensorir.lazy_exports import lazy_exports
from tensorir.structural import (StructuralMismatch, assert_structural_equal, structural_equal,
                                 structural_hash)

from .expr import (Binding, BindingBlock, Call, Constant, DataflowBlock, DataflowVar, Expr,
                   ExternFunc, Function, GlobalVar, If, MatchCast, Op, PrimValue, SeqExpr, ShapeExpr,
                   StringImm, Tuple, TupleGetItem, Var, VarBinding)
from .irmodule import IRModule
from .struct_info import (FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo,
                          StructInfo, TensorStructInfo, TupleStructInfo)

# name -> submodule that defines it (loaded on first use)
_LAZY = {
    "R": "relaxscript.script.namespace",
    "I": "relaxscript.script.ir_namespace",
    "ir_module": "relaxscript.script.parser",
    "function": "relaxscript.script.parser",
    "from_source": "relaxscript.script.parser",
    "BlockBuilder": "relaxscript.block_builder",
    "interpret": "relaxscript.interpreter",
    "op": "relaxscript.op",
    "transform": "relaxscript.transform",
    "analysis": "relaxscript.analysis",
    "build": "relaxscript.vm",  # the package: "relaxscript.vm.build" would name the module
    "get_pipeline": "relaxscript.vm",
    "VirtualMachine": "relaxscript.vm.runtime",
    "Executable": "relaxscript.vm.executable",
    "ExecutableFormatError": "relaxscript.vm.file_format",
    "well_formed": "relaxscript.analysis",
    "device": "relaxscript.vm.device_arrays",
    "tensor": "relaxscript.vm.device_arrays",
    "Target": "backends.target",
    "register_func": "relaxscript.packed_functions",
    "PackedArgumentWriteError": "relaxscript.packed_functions",
    "register_c_func": "relaxscript.packed_functions",
    "unregister_func": "relaxscript.packed_functions",
}


__getattr__, __dir__ = lazy_exports('relaxscript', _LAZY, globals())
