"""Graph functions (after the pipeline) -> VM instructions.

Every graph-level variable gets a register (a binding ``b = a`` shares
``a``'s register); constants are preloaded into registers once per frame.
Shape lowering (``shape_lowering``) supplies the checks, the table slots of
symbolic variables and the kernels' symbol vectors. Both the high-level
cross-level calls (``call_tir``, ``call_dps_library``: outputs allocated
fresh) and the forms CallTIRRewrite / StaticPlanBlockMemory produce
(``builtin.alloc_tensor``, ``memory.alloc_storage/alloc_tensor``,
``call_tir_dps``, ``call_dps_library_dps``, kills) are accepted; any other
operator runs through its NumPy reference (``CallFallback``).
"""
from __future__ import annotations

from collections import Counter

from tensorir import expr as E
from tensorir.dispatch import ClassDispatch, handles
from tensorir.arith import simplify
from tensorir.function import PrimFunc
from tensorir.functor import collect, substitute
from tensorir.variants import VariantError, check_variant, variant_guards

from .. import expr as rx
from ..analysis.written_params import packed_call_outputs, written_arguments, written_parameter_vars
from ..interpreter.arguments import int_range
from ..interpreter.values import ShapeTuple
from ..irmodule import IRModule
from ..op.registry import reference_attrs
from ..struct_info import PrimStructInfo, ShapeStructInfo, TensorStructInfo, TupleStructInfo
from . import instructions as I
from .instructions import VMBuildError
from .shape_lowering import (CallSiteBuilder, MatchBuilder, bind_kernel_call, format_expr, function_bounds,
                             range_check)
from .sym_table import SymTable, vars_of

_EMPTY_TUPLE = ()


class KernelUse:
    """What codegen needs of a prim_func: its signature and the kernel's symbol order."""

    def __init__(self, name: str, func: PrimFunc):
        from backends.kernel_signature import kernel_sym_vars
        self.name = name
        self.func = func
        self.sym_vars = kernel_sym_vars(func)
        self._loop_counts = None

    @property
    def loop_counts(self) -> list:
        """The kernel's loop-nest and allocation counts over its symbolic vars (``loop_nest_counts``)."""
        if self._loop_counts is None:
            from tensorir.analysis.loop_counts import loop_nest_counts
            self._loop_counts = loop_nest_counts(self.func.body, self.sym_vars)
        return self._loop_counts


def _var_factors(e):
    """The symbolic vars multiplied in a count, as a Counter (``n * ((n + 63) // 64) * 64``: n
    twice; constants, constant offsets and divisions by constants drop out); None for any other
    form (then no buffer is taken to span it)."""
    if isinstance(e, E.IntImm):
        return Counter()
    if isinstance(e, E.Var):
        return Counter([e.name])
    if isinstance(e, E.Mul):
        a, b = _var_factors(e.a), _var_factors(e.b)
        return None if a is None or b is None else a + b
    if isinstance(e, (E.Add, E.Sub)):
        a, b = _var_factors(e.a), _var_factors(e.b)
        if a is None or b is None:
            return None
        return a | b
    if isinstance(e, (E.FloorDiv, E.FloorMod)) and isinstance(e.b, E.IntImm):
        return _var_factors(e.a)
    if isinstance(e, E.Cast):
        return _var_factors(e.value)
    return None


def _divides_by_symbolic(e) -> bool:
    """Whether ``e`` divides (or takes a remainder) by anything but a constant."""
    return bool(collect(e, lambda node: isinstance(node, (E.FloorDiv, E.FloorMod, E.Div))
                        and not isinstance(node.b, E.IntImm)))


def _product_factors(shape):
    out = Counter()
    for dim in shape:
        factors = _var_factors(dim)
        if factors is None:
            return None
        out += factors
    return out


class FunctionCompiler(ClassDispatch):
    def __init__(self, mod: IRModule, name: str, func: rx.Function, kernels: dict):
        self.mod = mod
        self.name = name
        self.func = func
        self.kernels = kernels              # prim_func name -> KernelUse (filled as used)
        self.packed_outputs = None          # analysis.packed_call_outputs, when first needed
        self.table = SymTable(name)
        self.bounds = function_bounds(func, name)
        self.defined: set = set()
        self.origins: dict = {}
        self.def_point: dict = {}           # symbolic var -> (index, MatchValues)
        self.regs: dict = {}
        self.num_regs = 0
        self.reg_names: dict = {}
        self.code: list = []
        self.constants: dict = {}
        self.aliasing: set = set()          # registers that may view frame-owned storage
        self.static_storages: set = set()
        self.vectors: dict = {}
        self.counted: set = set()           # loop counts already checked (sym_code trees)
        # MakeTuple folding: a field taken from a tuple built in this function is the field's own
        # register (no GetItem); a MakeTuple nothing else reads is dropped at the end
        self.tuple_defs: dict = {}          # tuple register -> (MakeTuple instruction, field registers)
        self.tuple_reads: set = set()       # tuple registers read other than by a field access
        self.field_regs: set = set()        # registers that are fields of some built tuple
        self.reg_aliases: dict = {}         # field register -> names of the folded accesses
        # registers a kernel or library call writes without the VM allocating them: a parameter
        # among them must be writeable, and a device target copies it back to the host array
        self.updated_regs: set = set()

    # ---------------------------------------------------------------- registers
    def new_reg(self, name: str = "") -> int:
        self.num_regs += 1
        self.reg_names[self.num_regs - 1] = name
        return self.num_regs - 1

    def const_reg(self, value) -> int:
        reg = self.new_reg("const")
        self.constants[reg] = value
        return reg

    def emit(self, ins) -> int:
        self.code.append(ins)
        return len(self.code) - 1

    # ---------------------------------------------------------------- entry
    def compile(self) -> I.VMFunction:
        func = self.func
        match = MatchBuilder(self.table, self.name, self.defined, self.origins, self.bounds)
        for param in func.params:
            reg = self.regs[param] = self.new_reg(param.name_hint)
            match.add(reg, param.struct_info, param.name_hint, f"parameter '{param.name_hint}'")
        params_match = self._emit_match(match)
        result = self.compile_seq(func.body)
        self.emit(I.Ret(result, copy_escaping=result in self.aliasing))
        unread = {id(ins) for reg, (ins, _) in self.tuple_defs.items() if reg not in self.tuple_reads}
        code = drop_instructions(self.code, {i for i, ins in enumerate(self.code) if id(ins) in unread})
        param_regs = [self.regs[p] for p in func.params]
        written = self._written_params(param_regs)
        # known only now; checked with the other parameters, before any kernel runs: the updated
        # arguments of call_tir_inplace, the arguments a call_tir_dps kernel may write, the
        # outputs of call_dps_library_dps (analysis/written_params.py)
        for i in sorted({w if type(w) is int else w[0] for w in written}):
            name = func.params[i].name_hint
            match.writeable(param_regs[i], name, f"parameter '{name}'")
        params_match.checks, params_match.messages = list(match.checks), list(match.messages)
        return I.VMFunction(self.name, tuple(p.name_hint for p in func.params), self.num_regs,
                            self.table.size, code, self.constants, self.reg_names,
                            {reg: tuple(names) for reg, names in self.reg_aliases.items()}, written)

    def _written_params(self, param_regs: list) -> tuple:
        """``VMFunction.written_params``: the index of each parameter a call writes in its own
        register, and ``(index, register)`` for one written through another register (a
        match_cast's copy of it), where a device target finds the array to copy back."""
        written = {i for i, reg in enumerate(param_regs) if reg in self.updated_regs}
        pairs = set()
        for i, vars_ in written_parameter_vars(self.func, self.mod).items():
            regs = {self.regs[v] for v in vars_ if v in self.regs} - {param_regs[i]}
            pairs |= {(i, reg) for reg in regs}
            if not regs:
                written.add(i)
        return tuple(sorted(written)) + tuple(sorted(pairs))

    def _emit_match(self, match: MatchBuilder, **kw) -> I.MatchValues:
        ins = match.finish(**kw)
        index = self.emit(ins)
        for var in match.newly_defined:
            self.def_point[var] = (index, ins)
        return ins

    # ---------------------------------------------------------------- bodies
    def compile_seq(self, seq: rx.SeqExpr) -> int:
        for block in seq.blocks:
            for binding in block.bindings:
                self.compile_binding(binding)
        return self.materialize(seq.body)

    def compile_binding(self, binding) -> None:
        var = binding.var
        if isinstance(binding, rx.MatchCast):
            src = self.materialize(binding.value)
            dst = self.new_reg(var.name_hint)
            match = MatchBuilder(self.table, self.name, self.defined, self.origins, self.bounds)
            match.add(src, binding.struct_info, var.name_hint, f"match_cast of '{var.name_hint}'")
            self._emit_match(match, dst=dst, src=src, name=var.name_hint)
            if src in self.aliasing:
                self.aliasing.add(dst)
            self.regs[var] = dst
            return
        self.regs[var] = self.compile_value(binding.value, var.name_hint)

    def materialize(self, expr) -> int:
        if isinstance(expr, rx.Var):
            try:
                reg = self.regs[expr]
            except KeyError:
                raise VMBuildError(f"function '{self.name}': variable '{expr.name_hint}' is used "
                                   "before it is bound") from None
        else:
            reg = self.compile_value(expr, "")
        if reg in self.tuple_defs:
            self.tuple_reads.add(reg)
        return reg

    def make_tuple(self, fields: tuple, name: str) -> int:
        dst = self.new_reg(name)
        ins = I.MakeTuple(dst, fields, name)
        self.emit(ins)
        self.tuple_defs[dst] = (ins, fields)
        self.field_regs.update(fields)
        return dst

    def get_item(self, tuple_expr, index: int, name: str) -> int:
        """A tuple field's register: the field's own one when the tuple was built here (its
        registers are written once and hold the field for the rest of the call), else a GetItem."""
        reg = self.regs.get(tuple_expr) if isinstance(tuple_expr, rx.Var) else None
        if reg in self.tuple_defs:
            field = self.tuple_defs[reg][1][index]
            if name and name != self.reg_names.get(field):
                self.reg_aliases.setdefault(field, []).append(name)   # instruments see this name too
            return field
        src = self.materialize(tuple_expr)
        dst = self.new_reg(name)
        self.emit(I.GetItem(dst, src, index, name))
        if src in self.aliasing:
            self.aliasing.add(dst)
        return dst

    def compile_value(self, value, name: str) -> int:
        handler = self.handler_for(type(value))
        if handler is None:
            raise VMBuildError(f"function '{self.name}': the VM cannot compile {type(value).__name__} "
                               f"(bound to '{name}'); local functions must be lifted to the module first")
        return handler(self, value, name)

    @handles(rx.Var)
    def compile_var(self, value: rx.Var, name: str) -> int:
        return self.materialize(value)

    @handles(rx.Constant)
    def compile_constant(self, value: rx.Constant, name: str) -> int:
        return self.const_reg(value.data)

    @handles(rx.StringImm)
    def compile_string(self, value: rx.StringImm, name: str) -> int:
        return self.const_reg(value.value)

    @handles(rx.ShapeExpr)
    def compile_shape(self, value: rx.ShapeExpr, name: str) -> int:
        return self.shape_value(value.values, name)

    @handles(rx.PrimValue)
    def compile_prim_value(self, value: rx.PrimValue, name: str) -> int:
        if isinstance(value.value, (E.IntImm, E.FloatImm)):
            return self.const_reg(value.value.value)
        dst = self.new_reg(name)
        self.emit(I.MakePrim(dst, self.table.code(value.value, self.defined), name))
        return dst

    @handles(rx.Tuple)
    def compile_tuple(self, value: rx.Tuple, name: str) -> int:
        regs = tuple(self.materialize(f) for f in value.fields)
        if all(r in self.constants for r in regs):
            return self.const_reg(tuple(self.constants[r] for r in regs))
        dst = self.make_tuple(regs, name)
        if any(r in self.aliasing for r in regs):
            self.aliasing.add(dst)
        return dst

    @handles(rx.TupleGetItem)
    def compile_get_item(self, value: rx.TupleGetItem, name: str) -> int:
        return self.get_item(value.tuple_value, value.index, name)

    @handles(rx.SeqExpr)
    def compile_nested_seq(self, value: rx.SeqExpr, name: str) -> int:
        return self.compile_seq(value)

    def shape_value(self, values, name: str) -> int:
        if all(isinstance(v, E.IntImm) for v in values):
            return self.const_reg(ShapeTuple(v.value for v in values))
        dst = self.new_reg(name)
        self.emit(I.MakeShape(dst, tuple(self.table.code(v, self.defined) for v in values), name))
        return dst

    @handles(rx.If)
    def compile_if(self, node: rx.If, name: str) -> int:
        cond = self.materialize(node.cond)
        dst = self.new_reg(name)
        branch = self.emit(I.If(cond))
        then_reg = self.compile_seq(node.true_branch)
        self.emit(I.Move(dst, then_reg, name))
        jump = self.emit(I.Goto())
        self.code[branch].else_pc = len(self.code)
        else_reg = self.compile_seq(node.false_branch)
        self.emit(I.Move(dst, else_reg, name))
        self.code[jump].target = len(self.code)
        if then_reg in self.aliasing or else_reg in self.aliasing:
            self.aliasing.add(dst)
        return dst

    # ---------------------------------------------------------------- calls
    @handles(rx.Call)
    def compile_call(self, call: rx.Call, name: str) -> int:
        op = call.op
        if isinstance(op, rx.GlobalVar):
            target = self.mod[op.name_hint]
            args = [self.materialize(a) for a in call.args]
            if isinstance(target, PrimFunc):
                inputs = [a for a in call.args if not isinstance(a.struct_info, (ShapeStructInfo, PrimStructInfo))]
                scalars = [a for a in call.args if isinstance(a.struct_info, (ShapeStructInfo, PrimStructInfo))]
                self.call_kernel(op.name_hint, inputs, self._scalar_exprs(scalars), name)
                return self.const_reg(_EMPTY_TUPLE)
            dst = self.new_reg(name)
            self.emit(I.CallFunc(dst, op.name_hint, tuple(args), name))
            return dst
        if isinstance(op, rx.ExternFunc):   # R.call_packed("name", ...)
            dst = self.new_reg(name)
            args = tuple(self.materialize(a) for a in call.args)
            if self.packed_outputs is None:
                self.packed_outputs = packed_call_outputs(self.func)
            writable = tuple(sorted(self.packed_outputs.get(id(call), ())))
            self.emit(I.CallPacked(dst, op.global_symbol, args, name, writable))
            return dst
        if not isinstance(op, rx.Op):
            raise VMBuildError(f"function '{self.name}': the VM cannot call a {type(op).__name__} "
                               f"(bound to '{name}'); only module functions and operators")
        handler = _CALL_HANDLERS.get(op.name)
        if handler is not None:
            return handler(self, call, name)
        args = tuple(self.materialize(a) for a in call.args)
        dst = self.new_reg(name)
        self.emit(I.CallFallback(dst, op.name, args, reference_attrs(call), name,
                                 isinstance(call.struct_info, TensorStructInfo)))
        if any(a in self.aliasing for a in args):
            self.aliasing.add(dst)
        return dst

    def _scalar_exprs(self, args) -> list:
        exprs = []
        for arg in args:
            if isinstance(arg, rx.ShapeExpr):
                exprs.extend(arg.values)
            elif isinstance(arg, rx.PrimValue):
                exprs.append(arg.value)
            elif isinstance(arg.struct_info, ShapeStructInfo) and arg.struct_info.values is not None:
                exprs.extend(arg.struct_info.values)
            elif isinstance(arg.struct_info, PrimStructInfo) and arg.struct_info.value is not None:
                exprs.append(arg.struct_info.value)
            else:
                raise VMBuildError(f"function '{self.name}': a kernel's scalar argument needs a "
                                   "known symbolic value (R.shape([...]) or R.prim_value)")
        return exprs

    def _tuple_fields(self, expr) -> list:
        if isinstance(expr, rx.Tuple):
            return list(expr.fields)
        sinfo = expr.struct_info
        if isinstance(sinfo, TupleStructInfo):
            return [rx.TupleGetItem(expr, i) for i in range(len(sinfo.fields))]
        return [expr]

    def arg_reg(self, expr) -> tuple[int, object]:
        if isinstance(expr, rx.TupleGetItem):
            sinfo = expr.tuple_value.struct_info.fields[expr.index]
            return self.get_item(expr.tuple_value, expr.index, ""), sinfo
        return self.materialize(expr), expr.struct_info

    def call_kernel(self, kernel_name: str, buffer_exprs, scalar_exprs, name: str,
                    extra_buffers=(), result: int | None = None) -> None:
        prim = self.mod[kernel_name]
        if not isinstance(prim, PrimFunc):
            raise VMBuildError(f"function '{self.name}': '{kernel_name}' is not a prim_func")
        use = self.kernels.get(kernel_name) or self.kernels.setdefault(kernel_name, KernelUse(kernel_name, prim))
        buffer_args = [self.arg_reg(e) for e in buffer_exprs] + list(extra_buffers)
        site = CallSiteBuilder(self.table)
        exprs = bind_kernel_call(self.table, self.defined, self.name, kernel_name, prim, use.sym_vars,
                                 buffer_args, scalar_exprs, site)
        base = self.sym_vector(exprs, site)
        self.check_loop_counts(kernel_name, use, exprs, site)
        scalar_names = tuple(v.name for v in prim.scalar_params)
        scalar_slots = tuple(base + use.sym_vars.index(v) for v in prim.scalar_params)
        kernel_name, variants = self.kernel_variants(kernel_name, prim, use, exprs, site)
        call_site = site.build(self.defined)
        self.emit(I.CallKernel(kernel_name, tuple(r for r, _ in buffer_args), base, len(exprs),
                               scalar_names, scalar_slots, None if call_site.empty() else call_site,
                               result, name, variants))

    def kernel_variants(self, kernel_name: str, prim: PrimFunc, use: KernelUse, exprs, site) -> tuple:
        """The kernel a call runs and its guarded alternatives (``tensorir.variants``): each
        condition is rewritten over the caller's symbolic values; one that folds to a constant
        decides at build time, the others become one test each in the call's step."""
        try:
            guards = variant_guards(prim)
            for _, vname in guards:
                check_variant(prim, vname, self.mod[vname] if vname in self.mod else None)
        except VariantError as err:
            raise VMBuildError(f"function '{self.name}': {err}") from None
        values = dict(zip(use.sym_vars, exprs))
        visible = self.defined | site.local
        variants = []
        for cond, vname in guards:
            cond = simplify(substitute(cond, values))
            if isinstance(cond, E.IntImm):
                if cond.value:
                    if not variants:   # holds for every call: the variant is the kernel
                        kernel_name = vname
                        break
                    variants.append((("bool", True), vname))
                    break
                continue
            variants.append((self.table.code(cond, visible), vname))
        for _, vname in variants:
            self.kernels.setdefault(vname, KernelUse(vname, self.mod[vname]))
        if kernel_name != use.name:
            self.kernels.setdefault(kernel_name, KernelUse(kernel_name, self.mod[kernel_name]))
        return kernel_name, tuple(variants)

    def check_loop_counts(self, kernel_name: str, use: KernelUse, exprs, site: CallSiteBuilder) -> None:
        """Refuse, where the kernel's symbolic values get known (before any kernel runs), a loop nest
        or allocation of the kernel whose count passes int64: generated code counts with int64, so
        such a nest wraps or never ends (a fused ``sum(ones((a, b)))`` at a = b = 2**32 allocates
        nothing the allocation checks could refuse). A count that is a lone var fits by its own
        check; counts over dims read at the call come from arrays that exist."""
        hi = int_range("int64")[1]
        values = dict(zip(use.sym_vars, exprs))
        covered = [_var_factors(E.IntImm(1)) if not b.shape else _product_factors(b.shape)
                   for b in use.func.buffer_params]
        for count, what in use.loop_counts:
            if _divides_by_symbolic(count):
                continue   # the shape checks that guard the divisor come later
            factors = _var_factors(count)
            if factors and any(c is not None and not factors - c for c in covered):
                # a buffer the kernel reads or writes spans the same symbolic product: it exists
                # (an argument) or is allocated and checked first, so the count fits int64
                continue
            try:
                count = simplify(substitute(count, values))
            except (OverflowError, ValueError):   # constant factors past int64 (a hand-written prim_func)
                count = None
            if count is None or (isinstance(count, E.IntImm) and count.value > hi):
                raise VMBuildError(f"function '{self.name}': kernel '{kernel_name}' has more than {hi} {what} "
                                   "(more than int64 counts)")
            used = list(dict.fromkeys(vars_of(count)))
            if isinstance(count, (E.IntImm, E.Var)) or any(v in site.local for v in used):
                continue
            try:
                code = self.table.code(count, self.defined)
            except VMBuildError:
                continue   # an expression the VM cannot compute: left unchecked, as before
            if code in self.counted:
                continue
            self.counted.add(code)
            target = self.definition_point([count])
            names = ", ".join(f"{v.name} = {{{i}}}" for i, v in enumerate(used))
            target.messages.append(f"function '{self.name}': kernel '{kernel_name}' would have {format_expr(count)}"
                                   f" = {{actual}} {what}, more than int64 counts ({{expected}}; symbolic var "
                                   f"{names})")
            slots = [("t", self.table.slot_of(v)) for v in used]
            target.checks.append(("fail_if", (">", code, ("int", hi)), len(target.messages) - 1, code,
                                  ("int", hi), *slots))

    def definition_point(self, exprs) -> I.MatchValues:
        """The MatchValues after which every var of ``exprs`` has its value."""
        points = [self.def_point[v] for e in exprs for v in vars_of(e) if v in self.def_point]
        return max(points, key=lambda p: p[0])[1] if points else self.code[0]

    def sym_vector(self, exprs, site: CallSiteBuilder) -> int:
        """Contiguous slots holding ``exprs``, filled where their vars get values."""
        if not exprs:
            return -1
        visible = self.defined | site.local
        codes = tuple(self.table.code(e, visible) for e in exprs)
        local = any(v in site.local for e in exprs for v in vars_of(e))
        if not local and codes in self.vectors:
            return self.vectors[codes]
        base = self.table.new_slots(len(codes))
        assignments = [(base + i, code) for i, code in enumerate(codes)]
        if local:
            site.assign.extend(assignments)
            return base
        self.vectors[codes] = base
        target = self.definition_point(exprs)
        target.derived.extend(assignments)
        for expr, (_slot, code) in zip(exprs, assignments):
            if not isinstance(expr, (E.Var, E.IntImm)):   # vars were checked when bound
                # n * n + 1 beyond int64 would reach the kernel wrapped by the table
                cond, text = range_check(code, f"symbolic value {format_expr(expr)}")
                target.messages.append(f"function '{self.name}': {text}")
                target.checks.append(("fail_if", cond, len(target.messages) - 1, code))
        return base

    def alloc_outputs(self, sinfos, name: str) -> list[tuple[int, TensorStructInfo]]:
        outs = []
        for i, sinfo in enumerate(sinfos):
            if not isinstance(sinfo, TensorStructInfo) or sinfo.shape is None or sinfo.dtype is None:
                raise VMBuildError(f"function '{self.name}': output of '{name}' needs a shape and a dtype")
            reg = self.new_reg(name if len(sinfos) == 1 else f"{name}[{i}]")
            self.emit(I.AllocTensor(reg, self.shape_code(sinfo.shape), sinfo.dtype, name=name,
                                    **self.alloc_context(sinfo.shape)))
            outs.append((reg, sinfo))
        return outs

    def alloc_context(self, values) -> dict:
        """What an allocation error names: the shape as written and its vars' slots and origins."""
        from ..interpreter.allocation import shape_text
        used = dict.fromkeys(v for e in values for v in vars_of(e) if self.table.has(v))
        symbols = tuple((v.name, self.table.slot_of(v), self.origins.get(v, "")) for v in used)
        return {"shape_text": shape_text(values), "symbols": symbols}

    def shape_code(self, values) -> tuple:
        return ("tuple", *(self.table.code(v, self.defined) for v in values))

    def pack_outputs(self, outs, call: rx.Call, name: str) -> int:
        single = len(call.sinfo_args) == 1 and isinstance(call.sinfo_args[0], TensorStructInfo)
        if single:
            return outs[0][0]
        return self.make_tuple(tuple(r for r, _ in outs), name)


def drop_instructions(code: list, dead: set) -> list:
    """``code`` without the instructions at ``dead`` indices, jump targets renumbered."""
    if not dead:
        return code
    new_index, kept = {}, []
    for i, ins in enumerate(code):
        new_index[i] = len(kept)
        if i not in dead:
            kept.append(ins)
    new_index[len(code)] = len(kept)
    for ins in kept:
        if isinstance(ins, I.If):
            ins.else_pc = new_index[ins.else_pc]
        elif isinstance(ins, I.Goto):
            ins.target = new_index[ins.target]
    return kept


def _out_sinfos(call: rx.Call) -> list:
    sinfos = list(call.sinfo_args)
    if len(sinfos) == 1 and isinstance(sinfos[0], TupleStructInfo):
        sinfos = list(sinfos[0].fields)
    return sinfos


# ---------------------------------------------------------------- operator handlers
def _call_tir(c: FunctionCompiler, call: rx.Call, name: str) -> int:
    gvar = call.args[0]
    outs = c.alloc_outputs(_out_sinfos(call), name)
    scalars = c._scalar_exprs(call.args[2:3])
    result = outs[0][0] if len(outs) == 1 else None
    c.call_kernel(gvar.name_hint, c._tuple_fields(call.args[1]), scalars, name, extra_buffers=outs,
                  result=result)
    return c.pack_outputs(outs, call, name)


def _call_tir_inplace(c: FunctionCompiler, call: rx.Call, name: str) -> int:
    # The updated arguments are the results: no allocation, the result registers are theirs.
    gvar = call.args[0]
    fields = c._tuple_fields(call.args[1])
    c.call_kernel(gvar.name_hint, fields, c._scalar_exprs(call.args[2:3]), name)
    updated = [fields[i] for i in call.attrs["inplace_indices"]]
    c.updated_regs.update(c.arg_reg(f)[0] for f in updated)
    if isinstance(call.sinfo_args[0], TensorStructInfo):
        return c.arg_reg(updated[0])[0]
    # built, not materialized: a tuple only read field by field is dropped (no MakeTuple per call)
    return c.make_tuple(tuple(c.arg_reg(f)[0] for f in updated), name)


def _call_tir_dps(c: FunctionCompiler, call: rx.Call, name: str) -> int:
    gvar = call.args[0]
    fields = c._tuple_fields(call.args[1])
    c.call_kernel(gvar.name_hint, fields, c._scalar_exprs(call.args[2:3]), name)
    # the arguments its kernel may write (analysis/written_params.py)
    c.updated_regs.update(c.arg_reg(f)[0] for f in written_arguments(call, c.mod))
    return c.const_reg(_EMPTY_TUPLE)


def _library_name(call: rx.Call) -> str:
    first = call.args[0]
    if isinstance(first, rx.ExternFunc):
        return first.global_symbol
    if isinstance(first, rx.StringImm):
        return first.value
    raise VMBuildError("call_dps_library needs a library name")


def _call_dps_library(c: FunctionCompiler, call: rx.Call, name: str) -> int:
    inputs = tuple(c.arg_reg(e)[0] for e in c._tuple_fields(call.args[1]))
    outs = c.alloc_outputs(_out_sinfos(call), name)
    c.emit(I.CallLibrary(_library_name(call), inputs, tuple(r for r, _ in outs)))
    return c.pack_outputs(outs, call, name)


def _call_dps_library_dps(c: FunctionCompiler, call: rx.Call, name: str) -> int:
    inputs = tuple(c.arg_reg(e)[0] for e in c._tuple_fields(call.args[1]))
    outputs = tuple(c.arg_reg(e)[0] for e in c._tuple_fields(call.args[2]))
    c.emit(I.CallLibrary(_library_name(call), inputs, outputs))
    c.updated_regs.update(outputs)
    return c.const_reg(_EMPTY_TUPLE)


def _shape_of_arg(c: FunctionCompiler, expr, what: str):
    if isinstance(expr, rx.ShapeExpr):
        return expr.values
    sinfo = expr.struct_info
    if isinstance(sinfo, ShapeStructInfo) and sinfo.values is not None:
        return sinfo.values
    raise VMBuildError(f"function '{c.name}': {what} needs a shape with known symbolic values")


def _builtin_alloc_tensor(c: FunctionCompiler, call: rx.Call, name: str) -> int:
    dst = c.new_reg(name)
    shape = _shape_of_arg(c, call.args[0], "R.builtin.alloc_tensor")
    c.emit(I.AllocTensor(dst, c.shape_code(shape), call.attrs["dtype"], name=name, **c.alloc_context(shape)))
    return dst


def _alloc_storage(c: FunctionCompiler, call: rx.Call, name: str) -> int:
    dst = c.new_reg(name)
    (size,) = _shape_of_arg(c, call.args[0], "R.memory.alloc_storage")
    static = size.value if isinstance(size, E.IntImm) else None
    c.emit(I.AllocStorage(dst, c.table.code(size, c.defined), static, name, **c.alloc_context([size])))
    if static is not None:
        c.static_storages.add(dst)
    return dst


def _memory_alloc_tensor(c: FunctionCompiler, call: rx.Call, name: str) -> int:
    storage = c.materialize(call.args[0])
    offset = call.args[1].value if isinstance(call.args[1], rx.PrimValue) else \
        call.args[1].struct_info.value
    if offset is None:
        raise VMBuildError(f"function '{c.name}': R.memory.alloc_tensor needs a known offset")
    shape = _shape_of_arg(c, call.args[2], "R.memory.alloc_tensor")
    static = storage in c.static_storages and isinstance(offset, E.IntImm) and \
        all(isinstance(d, E.IntImm) for d in shape)
    dst = c.new_reg(name)
    c.emit(I.AllocTensor(dst, c.shape_code(shape), call.attrs["dtype"], storage,
                         c.table.code(offset, c.defined), static, name, **c.alloc_context(shape)))
    c.aliasing.add(dst)
    return dst


def _kill(c: FunctionCompiler, call: rx.Call, name: str) -> int:
    arg = call.args[0]
    if isinstance(arg, rx.Var):
        reg = c.regs.get(arg)
        if reg not in c.field_regs:   # a tuple's field may still be read through its register
            c.emit(I.Kill(c.materialize(arg)))
    return c.const_reg(_EMPTY_TUPLE)


def _shape_of(c: FunctionCompiler, call: rx.Call, name: str) -> int:
    sinfo = call.args[0].struct_info
    if isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None and \
            all(v in c.defined for d in sinfo.shape for v in vars_of(d)):
        return c.shape_value(sinfo.shape, name)
    dst = c.new_reg(name)
    c.emit(I.ShapeOf(dst, c.materialize(call.args[0]), name))
    return dst


def _call_packed(c: FunctionCompiler, call: rx.Call, name: str) -> int:
    args = tuple(c.materialize(a) for a in call.args[1:])
    dst = c.new_reg(name)
    c.emit(I.CallPacked(dst, _library_name(call), args, name))
    return dst


_CALL_HANDLERS = {
    "relax.call_tir": _call_tir,
    "relax.call_tir_dps": _call_tir_dps,
    "relax.call_tir_inplace": _call_tir_inplace,
    "relax.call_dps_library": _call_dps_library,
    "relax.call_dps_packed": _call_dps_library,
    "relax.call_dps_library_dps": _call_dps_library_dps,
    "relax.builtin.alloc_tensor": _builtin_alloc_tensor,
    "relax.memory.alloc_storage": _alloc_storage,
    "relax.memory.alloc_tensor": _memory_alloc_tensor,
    "relax.memory.kill_storage": _kill,
    "relax.memory.kill_tensor": _kill,
    "relax.shape_of": _shape_of,
    "relax.call_packed": _call_packed,
    "relax.call_pure_packed": _call_packed,
}


def compile_module(mod: IRModule) -> tuple[dict, dict]:
    """VM functions of every graph function, and the kernels they use (name -> KernelUse)."""
    kernels: dict = {}
    functions = {}
    for name, func in mod.relax_functions.items():
        functions[name] = FunctionCompiler(mod, name, func, kernels).compile()
    return functions, kernels
