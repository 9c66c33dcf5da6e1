"""Script form of the loop level: the ``T`` namespace, parser and printer."""
from .diagnostics import SourceInfo, make_parse_error
from .namespace import T
from .parser import from_source, parse_prim_expr, parse_prim_func_def, prim_func
from .printer import format_expr, format_node, print_prim_func

__all__ = ["T", "prim_func", "from_source", "parse_prim_func_def", "parse_prim_expr", "SourceInfo",
           "make_parse_error", "print_prim_func", "format_expr", "format_node"]
