"""Library registry: the names that ``R.call_dps_library("name", ...)`` refers to.

Each entry has an optional NumPy implementation (used by the reference
interpreter and the "interp" target) and per-target implementations whose
meaning belongs to that target's code generator (e.g. a C symbol name).

NumPy calling conventions:

- returning form (``dps=False``, the default): ``impl(*inputs)`` returns the
  output array, or a tuple of arrays for several outputs;
- destination-passing form (``dps=True``): ``impl(*inputs, *outputs)`` writes
  into the preallocated output arrays and returns nothing.

An entry may also carry a ``NativeCall``: a C function the VM of a C build
calls directly, with prebuilt argument arrays and no Python in between (as it
calls generated kernels); without one, or when it is unavailable at run time,
the VM calls the NumPy implementation.

``LibraryEntry.run_dps(inputs, outputs)`` calls either form as DPS, so
callers need not care which one an entry uses. Every ``numpy.<ufunc>`` name
(``numpy.exp``, ``numpy.add``, ``numpy.matmul``, ...) resolves automatically
to that NumPy ufunc in returning form.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from tensorir.errors import ShapeMismatchError

_NUMPY_PREFIX = "numpy."


class UnknownLibraryError(ValueError):
    """A library name that is neither registered nor a ``numpy.<ufunc>``."""


@dataclass(frozen=True)
class NativeCall:
    """``int fn(void* const* operands, const int64_t* params)``, called by the VM in DPS form.

    ``address()`` gives the function's address, or None when it is unavailable (then the VM calls
    the NumPy implementation). ``params(*shapes)`` takes the operands' shapes (inputs, then
    outputs), raises ``ShapeMismatchError`` when they do not fit and returns the integer params.
    ``dtype`` is every operand's dtype; operands are C-contiguous. A non-zero return is an error.
    """
    address: Callable[[], int | None]
    params: Callable[..., tuple]
    dtype: str


@dataclass
class LibraryEntry:
    name: str
    numpy_impl: Callable | None = None
    dps: bool = False
    target_impls: dict = field(default_factory=dict)
    native: NativeCall | None = None

    def impl_for(self, target: str):
        """The implementation registered for ``target`` (its codegen defines the form)."""
        if target not in self.target_impls:
            raise UnknownLibraryError(
                f"library {self.name!r} has no implementation for target {target!r}; "
                f"it has {sorted(self.target_impls) or 'none'}"
                + (" and a NumPy implementation" if self.numpy_impl else ""))
        return self.target_impls[target]

    def run_dps(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray],
                where: str = "a call") -> None:
        """Run the NumPy implementation writing into ``outputs`` (whatever its form); the
        inputs are handed read-only (``read_only``)."""
        if self.numpy_impl is None:
            raise UnknownLibraryError(
                f"library {self.name!r} has no NumPy implementation "
                f"(targets: {sorted(self.target_impls) or 'none'})")
        inputs = [read_only(x) for x in inputs]
        if self.dps:
            guarded_call(self.name, where, self.numpy_impl, (*inputs, *outputs))
            return
        result = guarded_call(self.name, where, self.numpy_impl, inputs)
        results = tuple(result) if isinstance(result, (tuple, list)) else (result,)
        if len(results) != len(outputs):
            raise ShapeMismatchError(
                f"library {self.name!r} returned {len(results)} value(s) "
                f"but the call declares {len(outputs)} output(s)")
        for index, (value, out) in enumerate(zip(results, outputs)):
            value = np.asarray(value)
            if value.shape != out.shape:
                raise ShapeMismatchError(
                    f"library {self.name!r}, output {index}: expected shape {out.shape}, "
                    f"got {value.shape}")
            if not np.can_cast(value.dtype, out.dtype, casting="same_kind"):
                raise ShapeMismatchError(
                    f"library {self.name!r}, output {index}: expected dtype {out.dtype}, "
                    f"got {value.dtype}")
            np.copyto(out, value, casting="same_kind")

    def __call__(self, *args):
        """Call the NumPy implementation with the arguments as given (returning form)."""
        if self.numpy_impl is None:
            raise UnknownLibraryError(f"library {self.name!r} has no NumPy implementation")
        if self.dps:   # it would be handed the inputs as if they were all its operands
            raise UnknownLibraryError(f"library {self.name!r} is registered in destination-passing "
                                      "form; call it with R.call_dps_packed / R.call_dps_library")
        return self.numpy_impl(*args)


class PackedArgumentWriteError(ValueError):
    """A registered Python function wrote into an argument it was given to read."""


def read_only(value):
    """``value`` with every NumPy array in it (tuples and lists included) as a read-only view:
    what a registered Python function is given to read. A pure call (``R.call_pure_packed``,
    the inputs of ``R.call_dps_packed`` / ``R.call_dps_library``) must not write its inputs,
    and an argument's storage differs between levels (a NumPy view of a parameter in the
    reference, a kernel's fresh buffer in a build, a host copy on OpenCL), so a write would be
    seen by other values on each level. A view costs no copy."""
    if isinstance(value, np.ndarray):
        if not value.flags.writeable:
            return value
        view = value.view()
        view.flags.writeable = False
        return view
    if type(value) in (tuple, list):
        return type(value)(read_only(v) for v in value)
    return value


def guarded_call(name: str, where: str, fn: Callable, args):
    """``fn(*args)``, NumPy's error for a write into a read-only argument (see ``read_only``)
    turned into ``PackedArgumentWriteError`` naming ``where`` (the calling function) and
    the registered function ``name``."""
    try:
        return fn(*args)
    except ValueError as err:
        # NumPy's words for a write into a read-only array (an assignment, a ufunc's out=)
        if type(err) is not ValueError or not str(err).endswith(("destination is read-only",
                                                                  "array is read-only")):
            raise
        raise PackedArgumentWriteError(
            f"{where}: registered function {name!r} wrote into an argument it was given as an "
            f"input ({err}); inputs are read-only: return a new array, write the outputs of "
            "R.call_dps_packed (register_func(..., dps=True)), or R.call_packed into an "
            "R.builtin.alloc_tensor") from err


_REGISTRY: dict[str, LibraryEntry] = {}


def register_library(name: str, numpy_impl: Callable | None = None, *, dps: bool = False,
                     native: NativeCall | None = None, **target_impls):
    """Register (or extend) the library ``name``.

    Registering a name again merges: a backend may add its target
    implementation to an entry that already has a NumPy one. Conflicting
    definitions (another NumPy impl, another ``dps`` form, another impl for
    the same target, another native call) raise ``ValueError``. Called with
    only a name (and ``dps``), it returns a decorator for the NumPy
    implementation. ``native`` needs a DPS NumPy implementation (the VM's
    fallback).
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"library name must be a non-empty string, got {name!r}")
    if native is not None and not (dps and numpy_impl is not None):
        raise ValueError(f"library {name!r}: a native call needs a NumPy implementation in DPS form")
    if numpy_impl is None and not target_impls:
        def decorator(fn: Callable) -> Callable:
            register_library(name, fn, dps=dps)
            return fn
        return decorator
    entry = _REGISTRY.get(name)
    if entry is None:
        entry = _REGISTRY[name] = LibraryEntry(name, numpy_impl, dps, dict(target_impls), native)
        return entry
    if native is not None:
        if entry.native is not None and entry.native is not native:
            raise ValueError(f"library {name!r} already has a native call")
        entry.native = native
    if numpy_impl is not None:
        if entry.numpy_impl is not None and entry.numpy_impl is not numpy_impl:
            raise ValueError(f"library {name!r} already has a NumPy implementation")
        if entry.numpy_impl is not None and entry.dps != dps:
            raise ValueError(f"library {name!r} is registered with dps={entry.dps}")
        entry.numpy_impl, entry.dps = numpy_impl, dps
    for target, impl in target_impls.items():
        if target in entry.target_impls and entry.target_impls[target] is not impl:
            raise ValueError(f"library {name!r} already has an implementation for target {target!r}")
        entry.target_impls[target] = impl
    return entry


def unregister_library(name: str) -> None:
    """Remove a registered name (tests use this to clean up)."""
    _REGISTRY.pop(name, None)


def _numpy_ufunc(name: str):
    if not name.startswith(_NUMPY_PREFIX):
        return None
    candidate = getattr(np, name[len(_NUMPY_PREFIX):], None)
    return candidate if isinstance(candidate, np.ufunc) else None


def get_library(name: str) -> LibraryEntry:
    """The entry for ``name``; raises ``UnknownLibraryError`` with close matches."""
    entry = _REGISTRY.get(name)
    if entry is not None:
        return entry
    ufunc = _numpy_ufunc(name)
    if ufunc is not None:
        return LibraryEntry(name, ufunc, dps=False)
    known = list(_REGISTRY) + [_NUMPY_PREFIX + n for n in dir(np) if isinstance(getattr(np, n), np.ufunc)]
    close = difflib.get_close_matches(name, known, n=3)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    raise UnknownLibraryError(
        f"unknown library {name!r}{hint} (registered: {', '.join(sorted(_REGISTRY)) or 'none'}; "
        f"every 'numpy.<ufunc>' name is also available)")


def has_library(name: str) -> bool:
    return name in _REGISTRY or _numpy_ufunc(name) is not None


def list_libraries() -> list[str]:
    """Registered names, sorted (the automatic ``numpy.<ufunc>`` names are not listed)."""
    return sorted(_REGISTRY)


# ------------------------------------------------------------ NumPy implementations that are not ufuncs
@register_library("numpy.softmax")
def _softmax(x):
    """Softmax over the last axis, computed stably in the input's dtype."""
    shifted = x - np.max(x, axis=-1, keepdims=True)
    e = np.exp(shifted)
    return (e / np.sum(e, axis=-1, keepdims=True)).astype(x.dtype, copy=False)


@register_library("numpy.transpose")
def _transpose(x):
    """Reverse all axes (``x.T``)."""
    return np.transpose(x)


@register_library("numpy.sum")
def _sum(x):
    """Sum of all elements as a 0-d array of the input's dtype."""
    return np.asarray(np.sum(x), dtype=x.dtype)
