"""The virtual machine: ``build`` (pipeline + shape lowering + codegen),
``Executable`` (save/load), ``VirtualMachine`` (runtime) and instruments."""
from .build import build, get_pipeline
from .executable import Executable
from .instructions import VMBuildError
from .runtime import VirtualMachine

__all__ = ["build", "get_pipeline", "Executable", "VirtualMachine", "VMBuildError"]
