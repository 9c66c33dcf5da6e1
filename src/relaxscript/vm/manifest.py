"""Executable <-> manifest (plain JSON data) and payload (library bytes, constant arrays).

Values are JSON scalars and lists; everything else is a one-key object:
``{"tuple": [...]}``, ``{"dict": [[key, value], ...]}``, ``{"shape": [...]}``
(a ShapeTuple), ``{"array": {...}}`` (a numeric array in the payload),
``{"scalar": {...}}`` (a NumPy scalar), ``{"record": [name, {field: value}]}``
(a VM instruction, call site or function) and ``{"node": index}`` (a loop-level
IR node of the "interp" target's prim_funcs, kept in a table so shared vars
and buffers stay shared). Decoding builds only the types named in the tables
below, and ``check_executable`` validates the VM code (the Python run after
loading is generated from it by ``sym_code``, never read from the file).
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from backends.aligned_memory import aligned_empty

from ..interpreter.values import ShapeTuple
from . import instructions as I
from .sym_code import check_message, render_expr

_RECORDS = {cls.__name__: cls for cls in vars(I).values()
            if isinstance(cls, type) and dataclasses.is_dataclass(cls) and cls is not I.Instr}
_ARRAY_KINDS = "biufc"      # bool, ints, floats, complex: never object or structured dtypes


def _node_classes() -> dict:
    from tensorir import buffer, expr, function, stmt
    from tensorir.node import Node
    return {f"{module.__name__.rsplit('.', 1)[1]}.{name}": cls
            for module in (expr, stmt, buffer, function) for name, cls in vars(module).items()
            if isinstance(cls, type) and issubclass(cls, Node) and cls.__module__ == module.__name__}


def _slots(cls) -> list[str]:
    names = dict.fromkeys(s for k in reversed(cls.__mro__) for s in getattr(k, "__slots__", ()))
    names.pop("span", None)    # source positions are not saved
    return list(names)


def _array_dtype(text) -> np.dtype:
    try:
        dtype = np.dtype(text) if isinstance(text, str) else None
    except TypeError:
        dtype = None
    if dtype is None or dtype.kind not in _ARRAY_KINDS or dtype.fields is not None or dtype.subdtype:
        raise ValueError(f"unsupported array dtype {text!r}")
    return dtype


class Encoder:
    def __init__(self):
        self.chunks: list[bytes] = []
        self.size = 0
        self.nodes: list = []
        self._node_index: dict[int, int] = {}
        self._classes = None

    def payload(self, data: bytes) -> dict:
        offset = self.size
        self.chunks.append(data)
        self.size += len(data)
        return {"offset": offset, "size": len(data)}

    def array(self, array: np.ndarray) -> dict:
        dtype = _array_dtype(array.dtype.str) if array.dtype.kind in _ARRAY_KINDS else None
        if dtype is None:
            raise ValueError(f"cannot save an array of dtype {array.dtype} (numeric dtypes only)")
        data = np.ascontiguousarray(array).tobytes()
        return {"dtype": dtype.str, "shape": list(array.shape), **self.payload(data)}

    def value(self, v):
        kind = type(v)
        if v is None or kind in (bool, int, str):
            return v
        if kind is float:
            return v if math.isfinite(v) else {"float": repr(v)}
        if kind is list:
            return [self.value(x) for x in v]
        if kind is tuple:
            return {"tuple": [self.value(x) for x in v]}
        if kind is ShapeTuple:
            return {"shape": [int(x) for x in v]}
        if kind is dict:
            return {"dict": [[self.value(k), self.value(x)] for k, x in v.items()]}
        if isinstance(v, np.ndarray) and kind is np.ndarray:
            return {"array": self.array(v)}
        if isinstance(v, np.generic):
            return {"scalar": self.array(np.asarray(v))}
        if kind.__name__ in _RECORDS and _RECORDS[kind.__name__] is kind:
            return {"record": [kind.__name__, {f.name: self.value(getattr(v, f.name))
                                               for f in dataclasses.fields(v)}]}
        from tensorir.node import Node
        if isinstance(v, Node):
            return {"node": self.node(v)}
        from ..op.layout_transform import IndexMap
        if kind is IndexMap:   # R.layout_transform's map, when the op runs by its reference
            return {"index_map": [[self.value(p) for p in v.params],
                                  [self.value(r) for r in v.results], v.index_dtype]}
        from tensorir.script.literals import TargetAttr
        if kind is TargetAttr:   # a prim_func's "target" attribute (T.target(...)), a label
            spec = dict(v.spec) if isinstance(v.spec, tuple) else v.spec
            return {"target_attr": self.value(spec)}
        raise ValueError(f"cannot save a value of type {kind.__name__} in an executable")

    def node(self, node) -> int:
        index = self._node_index.get(id(node))
        if index is not None:
            return index
        if self._classes is None:
            self._classes = {cls: name for name, cls in _node_classes().items()}
        name = self._classes.get(type(node))
        if name is None or getattr(node, "__dict__", None):
            raise ValueError(f"cannot save IR node {type(node).__name__} in an executable")
        fields = {slot: self.value(getattr(node, slot)) for slot in _slots(type(node)) if hasattr(node, slot)}
        self.nodes.append([name, fields])
        index = self._node_index[id(node)] = len(self.nodes) - 1
        return index


class Decoder:
    def __init__(self, payload: memoryview):
        self.payload = payload
        self.nodes: list = []

    def bytes_at(self, entry) -> bytes:
        offset, size = entry.get("offset"), entry.get("size")
        if type(offset) is not int or type(size) is not int or offset < 0 or size < 0 \
                or offset + size > len(self.payload):
            raise ValueError(f"payload range {offset!r}+{size!r} outside the payload")
        return bytes(self.payload[offset:offset + size])

    def array(self, entry) -> np.ndarray:
        if not isinstance(entry, dict) or not isinstance(entry.get("shape"), list) or \
                not all(type(d) is int and d >= 0 for d in entry["shape"]):
            raise ValueError(f"malformed array entry {entry!r:.80}")
        dtype, shape = _array_dtype(entry.get("dtype")), tuple(entry["shape"])
        data = self.bytes_at(entry)
        if len(data) != dtype.itemsize * math.prod(shape):
            raise ValueError(f"array of shape {shape} and dtype {dtype} with {len(data)} bytes")
        out = aligned_empty(shape, dtype)     # constants feed kernels as loaded weights do
        out[...] = np.frombuffer(data, dtype).reshape(shape)
        return out

    def value(self, v):
        if v is None or type(v) in (bool, int, float, str):
            return v
        if type(v) is list:
            return [self.value(x) for x in v]
        if type(v) is not dict or len(v) != 1:
            raise ValueError(f"malformed value {v!r:.80}")
        (tag, body), = v.items()
        if tag == "tuple" and type(body) is list:
            return tuple(self.value(x) for x in body)
        if tag == "dict" and type(body) is list and all(type(p) is list and len(p) == 2 for p in body):
            return {self.value(k): self.value(x) for k, x in body}
        if tag == "shape" and type(body) is list and all(type(d) is int for d in body):
            return ShapeTuple(body)
        if tag == "float" and body in ("inf", "-inf", "nan"):
            return float(body)
        if tag == "array":
            return self.array(body)
        if tag == "scalar":
            array = self.array(body)
            if array.ndim != 0:
                raise ValueError("a scalar entry holds an array")
            return array[()]
        if tag == "record" and type(body) is list and len(body) == 2 and type(body[1]) is dict:
            return self.record(*body)
        if tag == "node" and type(body) is int and 0 <= body < len(self.nodes):
            return self.nodes[body]
        if tag == "target_attr":
            from tensorir.script.literals import TargetAttr
            spec = self.value(body)
            if not isinstance(spec, (str, dict)):
                raise ValueError(f"malformed value {v!r:.80}")
            return TargetAttr(spec)
        if tag == "index_map" and type(body) is list and len(body) == 3 and \
                type(body[0]) is list and type(body[1]) is list and body[2] in ("int32", "int64"):
            return self._index_map(*body)
        raise ValueError(f"malformed value {v!r:.80}")

    def _index_map(self, params, results, index_dtype):
        from tensorir import expr as E

        from ..op.layout_transform import IndexMap
        params = [self.value(p) for p in params]
        results = [self.value(r) for r in results]
        if not all(isinstance(p, E.Var) for p in params) or \
                not all(isinstance(r, E.PrimExpr) for r in results):
            raise ValueError("malformed index map")
        return IndexMap(params, results, index_dtype)

    def record(self, name, fields: dict):
        cls = _RECORDS.get(name) if isinstance(name, str) else None
        if cls is None:
            raise ValueError(f"unknown record {name!r:.40}")
        expected = {f.name for f in dataclasses.fields(cls)}
        if set(fields) != expected:
            raise ValueError(f"record {name} has fields {sorted(fields)}, expected {sorted(expected)}")
        return cls(**{key: self.value(x) for key, x in fields.items()})

    def node_table(self, records) -> None:
        if type(records) is not list:
            raise ValueError("the node table is not a list")
        classes = _node_classes() if records else {}
        for record in records:
            if type(record) is not list or len(record) != 2 or type(record[1]) is not dict:
                raise ValueError(f"malformed IR node {record!r:.80}")
            cls = classes.get(record[0]) if isinstance(record[0], str) else None
            if cls is None:
                raise ValueError(f"unknown IR node class {record[0]!r:.40}")
            allowed = set(_slots(cls))
            if not set(record[1]) <= allowed:
                raise ValueError(f"IR node {record[0]} has unknown fields {sorted(set(record[1]) - allowed)}")
            node = object.__new__(cls)
            for slot, value in record[1].items():
                object.__setattr__(node, slot, self.value(value))   # children precede their parents
            self.nodes.append(node)


# ---------------------------------------------------------------- validation
_REG_FIELDS = ("dst", "src", "reg", "cond", "storage")
_REG_TUPLES = ("buffers", "args", "inputs", "outputs", "fields_")


def _int(value, what: str, limit: int | None = None, low: int = 0) -> int:
    if type(value) is not int or value < low or (limit is not None and value >= limit):
        bound = f" below {limit}" if limit is not None else ""
        raise ValueError(f"{what} must be an int from {low}{bound}, got {value!r:.40}")
    return value


def check_function(func, kernels) -> None:
    """Raise ValueError unless ``func`` is well-formed VM code (generating all of its Python)."""
    if not isinstance(func, I.VMFunction) or not isinstance(func.name, str):
        raise ValueError("a function entry is not a VM function")
    where = f"function {func.name!r:.60}"
    regs = _int(func.num_regs, f"{where}: the register count")
    slots = _int(func.table_size, f"{where}: the symbol table size")
    if not isinstance(func.code, list) or not isinstance(func.constants, dict):
        raise ValueError(f"{where}: malformed code or constants")
    for reg in func.constants:
        _int(reg, f"{where}: a constant's register", regs)
    for pc, ins in enumerate(func.code):
        at = f"{where}, instruction {pc}"
        if not isinstance(ins, I.Instr):
            raise ValueError(f"{at}: not an instruction")
        for name in _REG_FIELDS:
            value = getattr(ins, name, None)
            if value is not None:
                _int(value, f"{at}: {name}", regs)
        for name in _REG_TUPLES:
            for value in getattr(ins, name, ()) or ():
                _int(value, f"{at}: {name}", regs)
        for name in ("size_code", "shape_code", "offset_code", "code"):
            if hasattr(ins, name):
                render_expr(getattr(ins, name))
        if isinstance(ins, (I.AllocTensor, I.AllocStorage)):   # what an allocation error names
            if not isinstance(getattr(ins, "shape_text", ""), str):
                raise ValueError(f"{at}: a shape text must be a string")
            for entry in getattr(ins, "symbols", ()):
                if not (isinstance(entry, tuple) and len(entry) == 3 and isinstance(entry[0], str)
                        and isinstance(entry[2], str)):
                    raise ValueError(f"{at}: malformed allocation symbol {entry!r:.60}")
                _int(entry[1], f"{at}: an allocation symbol's slot", slots)
        if isinstance(ins, I.MakeShape):
            render_expr(("tuple", *ins.values_code))
        if isinstance(ins, (I.If, I.Goto)):
            _int(ins.else_pc if isinstance(ins, I.If) else ins.target, f"{at}: jump", len(func.code) + 1)
        if isinstance(ins, I.MatchValues):
            ins.source   # noqa: B018 - generating the check validates it
            for message in ins.messages:
                check_message(message)
            for dtype in ins.dtypes:
                _array_dtype(dtype)
            for slot, _ in ins.derived:
                _int(slot, f"{at}: a derived slot", slots)
        if isinstance(ins, I.CallKernel):
            if ins.kernel not in kernels:
                raise ValueError(f"{at}: unknown kernel {ins.kernel!r:.60}")
            if ins.sym_base != -1:   # the kernel reads sym_count slots from sym_base on
                _int(ins.sym_base, f"{at}: sym_base", slots)
                _int(ins.sym_count, f"{at}: sym_count", slots - ins.sym_base + 1)
            for slot in ins.scalar_slots:
                _int(slot, f"{at}: a scalar slot", slots)
            if not isinstance(ins.variants, tuple):
                raise ValueError(f"{at}: malformed kernel variants")
            for entry in ins.variants:
                if not (isinstance(entry, tuple) and len(entry) == 2 and entry[1] in kernels):
                    raise ValueError(f"{at}: malformed or unknown kernel variant {entry!r:.60}")
                render_expr(entry[0])
            site = ins.call_site
            if site is not None and not isinstance(site, I.CallSite):
                raise ValueError(f"{at}: the call site is not a CallSite record")
            if site is not None:
                for reg, ndim, dtype, _ in site.structure:
                    _int(reg, f"{at}: a call-site register", regs)
                    _int(ndim, f"{at}: a call-site rank")
                    if dtype is not None:
                        _array_dtype(dtype)
                for reg, _, slot in site.reads:
                    _int(reg, f"{at}: a call-site register", regs)
                    _int(slot, f"{at}: a call-site slot", slots)
                for slot, tree in site.assign:
                    _int(slot, f"{at}: a call-site slot", slots)
                    render_expr(tree)
                for actual, expected, _ in site.checks:
                    render_expr(actual)
                    render_expr(expected)
