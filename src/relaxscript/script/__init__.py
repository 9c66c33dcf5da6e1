"""Script form of the graph level: the ``R`` namespace, parser and printer."""
from .namespace import R
from .parser import from_source, function, ir_module
from .printer import format_expr, format_struct_info, print_function, print_module

__all__ = ["R", "ir_module", "function", "from_source", "print_module", "print_function",
           "format_struct_info", "format_expr"]
