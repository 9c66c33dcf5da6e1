"""VM symbol code as plain data, and the one generator that turns it into Python.

Instructions never hold Python source: shape lowering describes what to
compute as nested tuples of fixed operators over the symbol table ``t``,
numbered temporaries and integer constants (``("+", ("t", 0), ("int", 4))``),
and checks as a list of fixed check operations. ``render_expr`` and
``render_checks`` validate that data (every operator from the tables below,
every index an int) and generate the source the linker compiles. A saved
executable therefore stores only this data; the code run after ``load`` is
always generated here, never read from the file.
"""
from __future__ import annotations

import string

from tensorir import expr as E
from tensorir.arith.evaluate import has_intrinsic


class SymCodeError(ValueError):
    """Symbol code that is not made of the operators below (a corrupted or foreign executable)."""


_BINARY = {"+": "+", "-": "-", "*": "*", "//": "//", "%": "%", "/": "/",
           "==": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">=",
           "and": "and", "or": "or"}
_CALLS = {"tdiv": "_tdiv", "tmod": "_tmod", "min": "min", "max": "max"}
_CASTS = ("int", "float", "bool")
_PRIM_KINDS = ("bool", "int", "float")
# Float dtypes whose values are rounded after every operation (the interpreter's meaning).
ROUNDED_DTYPES = ("float16", "float32")
_INTRINSIC_DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64",
                     "uint8", "uint16", "uint32", "uint64", "bool")


def _index(value, what: str) -> int:
    if type(value) is not int or value < 0:
        raise SymCodeError(f"{what} must be a non-negative int, got {value!r}")
    return value


def _optional_index(value, what: str):
    return None if value is None else _index(value, what)


def render_expr(tree, temps: bool = False) -> str:
    """Python source of an expression tree; ``temps`` allows ``("v", k)`` (inside checks)."""
    if not isinstance(tree, tuple) or not tree or not isinstance(tree[0], str):
        raise SymCodeError(f"expected an expression tuple, got {tree!r:.80}")
    op, args = tree[0], tree[1:]

    def sub(i: int) -> str:
        return render_expr(args[i], temps)

    def arity(n: int) -> None:
        if len(args) != n:
            raise SymCodeError(f"operator {op!r} takes {n} operand(s), got {len(args)}")

    if op == "int":
        arity(1)
        if type(args[0]) is not int:
            raise SymCodeError(f"an int literal must hold an int, got {args[0]!r}")
        return repr(args[0])
    if op == "bool":
        arity(1)
        if type(args[0]) is not bool:
            raise SymCodeError(f"a bool literal must hold a bool, got {args[0]!r}")
        return repr(args[0])
    if op == "float":
        arity(1)
        if type(args[0]) not in (int, float):
            raise SymCodeError(f"a float literal must hold a number, got {args[0]!r}")
        return f"float({str(float(args[0]))!r})"   # float('inf') and float('nan') too
    if op == "t":
        arity(1)
        return f"t[{_index(args[0], 'a symbol slot')}]"
    if op == "v":
        arity(1)
        if not temps:
            raise SymCodeError("a temporary is only allowed inside checks")
        return f"v{_index(args[0], 'a temporary')}"
    if op in _BINARY:
        arity(2)
        return f"({sub(0)} {_BINARY[op]} {sub(1)})"
    if op in _CALLS:
        arity(2)
        return f"{_CALLS[op]}({sub(0)}, {sub(1)})"
    if op == "not":
        arity(1)
        return f"(not {sub(0)})"
    if op == "select":
        arity(3)
        return f"({sub(1)} if {sub(0)} else {sub(2)})"
    if op == "cast":
        arity(2)
        if args[0] not in _CASTS:
            raise SymCodeError(f"unknown cast {args[0]!r}")
        return f"{args[0]}({sub(1)})"
    if op == "round":
        arity(2)
        if args[0] not in ROUNDED_DTYPES:
            raise SymCodeError(f"cannot round to {args[0]!r}")
        return f"_round({sub(1)}, {args[0]!r})"
    if op == "intrin":
        if len(args) < 2 or not isinstance(args[0], str) or not has_intrinsic(args[0]) \
                or args[0] not in E.INTRINSICS:
            raise SymCodeError(f"unknown intrinsic in {tree!r:.80}")
        if args[1] not in _INTRINSIC_DTYPES:
            raise SymCodeError(f"intrinsic {args[0]!r} with unknown dtype {args[1]!r}")
        if len(args) - 2 != E.INTRINSICS[args[0]]:
            raise SymCodeError(f"intrinsic {args[0]!r} takes {E.INTRINSICS[args[0]]} operand(s), "
                               f"got {len(args) - 2}")
        operands = "".join(render_expr(a, temps) + ", " for a in args[2:])
        return f"_intrin({args[0]!r}, {args[1]!r}, ({operands}))"
    if op == "tuple":
        return "(" + "".join(render_expr(a, temps) + ", " for a in args) + ")"
    if op == "shape_of":
        arity(1)
        if not temps:
            raise SymCodeError("an array's shape is only read inside checks")
        return f"{sub(0)}.shape"
    if op == "item":
        arity(2)
        return f"{sub(0)}[{_index(args[1], 'an item index')}]"
    raise SymCodeError(f"unknown operator {op!r}")


def _check_line(op: tuple) -> list[str]:
    if not isinstance(op, tuple) or not op or not isinstance(op[0], str):
        raise SymCodeError(f"expected a check tuple, got {op!r:.80}")
    kind, args = op[0], op[1:]
    shapes = {"load": 2, "tensor": 3, "rank": 3, "dtype": 3, "contiguous": 2, "writeable": 2, "prim": 4,
              "shape": 3, "shape_len": 3, "tuple": 3, "let": 2, "store": 2}
    if kind == "tensor" and len(args) == 4:   # with the dtype a list or scalar converts to
        dtype = args[3]
        dtype = "None" if dtype is None else f"_dt[{_index(dtype, 'a dtype index')}]"
        args = args[:3]
    elif kind == "tensor":
        dtype = "None"
    if kind in shapes and len(args) != shapes[kind]:
        raise SymCodeError(f"check {kind!r} takes {shapes[kind]} fields, got {len(args)}")
    if kind == "fail_if":
        if len(args) < 3:
            raise SymCodeError("check 'fail_if' needs a condition, a message and a value")
        cond, message = render_expr(args[0], True), _index(args[1], "a message index")
        values = ", ".join(render_expr(a, True) for a in args[2:])
        return [f"if {cond}: _fail({message}, {values})"]
    if kind == "let":
        return [f"v{_index(args[0], 'a temporary')} = {render_expr(args[1], True)}"]
    if kind == "store":
        return [f"t[{_index(args[0], 'a symbol slot')}] = {render_expr(args[1], True)}"]
    if kind not in shapes:
        raise SymCodeError(f"unknown check {kind!r}")
    v = f"v{_index(args[0], 'a temporary')}"
    if kind == "load":
        return [f"{v} = regs[{_index(args[1], 'a register')}]"]
    message = _index(args[1] if kind in ("tensor", "contiguous", "writeable", "prim", "shape") else args[2],
                     "a message index")
    if kind == "tensor":
        # not an exact ndarray: a subclass is viewed as a plain array (its shape property is not
        # trusted); a list or scalar converts to the dtype where the value can be written back
        writeback = _optional_index(args[2], "a register")
        lines = [f"if type({v}) is not _ndarray:"]
        if writeback is None:
            return lines + [f"    {v} = _as_tensor({v}, {message}, convert=False)"]
        return lines + [f"    {v} = _as_tensor({v}, {message}, {dtype}); regs[{writeback}] = {v}"]
    if kind == "rank":
        ndim = _index(args[1], "a rank")
        return [f"if {v}.ndim != {ndim}: _fail({message}, f'rank {{{v}.ndim}} (shape {{{v}.shape}})')"]
    if kind == "dtype":
        dtype = _index(args[1], "a dtype index")
        return [f"if {v}.dtype != _dt[{dtype}]: _fail({message}, _dtype_text({v}.dtype))"]
    if kind == "contiguous":
        return [f"if not {v}.flags.c_contiguous: "
                f"_fail({message}, 'a non-contiguous view (use np.ascontiguousarray)')"]
    if kind == "writeable":   # a device target's own arrays have no NumPy flags
        return [f"if type({v}) is _ndarray and not {v}.flags.writeable: "
                f"_fail({message}, 'a read-only array (a kernel updates it in place)')"]
    if kind in ("prim", "shape"):
        if kind == "prim":
            if args[2] not in _PRIM_KINDS:
                raise SymCodeError(f"unknown scalar kind {args[2]!r}")
            message, writeback = _index(args[1], "a message index"), args[3]
            lines = [f"{v} = _as_prim({v}, {args[2]!r}, {message})"]
        else:
            writeback = args[2]
            lines = [f"{v} = _as_shape({v}, {message})"]
        writeback = _optional_index(writeback, "a register")
        return lines + ([] if writeback is None else [f"regs[{writeback}] = {v}"])
    if kind == "shape_len":
        return [f"if len({v}) != {_index(args[1], 'a length')}: _fail({message}, list({v}))"]
    # kind == "tuple"
    count = _index(args[1], "a tuple length")
    return [f"if type({v}) is not tuple or len({v}) != {count}: _fail({message}, _describe({v}))"]


def render_checks(checks, derived=(), copy: tuple | None = None) -> str:
    """Source of ``def _match(regs, t)``: the checks, then ``derived`` ``(slot, expr)``
    assignments, then a match_cast's register copy ``(dst, src)``."""
    if not isinstance(checks, (list, tuple)) or not isinstance(derived, (list, tuple)):
        raise SymCodeError("checks and derived assignments must be sequences")
    body = [line for op in checks for line in _check_line(op)]
    for item in derived:
        if not isinstance(item, tuple) or len(item) != 2:
            raise SymCodeError(f"a derived assignment is (slot, expression), got {item!r:.80}")
        body.append(f"t[{_index(item[0], 'a symbol slot')}] = {render_expr(item[1])}")
    if copy is not None:
        body.append(f"regs[{_index(copy[0], 'a register')}] = regs[{_index(copy[1], 'a register')}]")
    return "def _match(regs, t):\n" + "\n".join("    " + line for line in body or ["pass"]) + "\n"


def check_message(text) -> str:
    """A check's message template: only ``{actual}``, ``{expected}`` and ``{0}``, ``{1}``... fields."""
    if not isinstance(text, str):
        raise SymCodeError(f"a message must be a string, got {type(text).__name__}")
    try:
        parts = list(string.Formatter().parse(text))
    except ValueError as err:
        raise SymCodeError(f"malformed message template {text!r:.80}: {err}") from None
    for _, field, spec, conversion in parts:
        if field is None:
            continue
        if not (field in ("actual", "expected") or field.isdigit()) or spec or conversion:
            raise SymCodeError(f"message template {text!r:.80} has a field {field!r} "
                               "(only actual, expected and numbered values)")
    return text
