"""Nothing in ``relaxscript`` imports a specific target's folder: targets are reached only through
``backends.target.get_backend``."""
import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
TARGET_PACKAGES = ("backends.c", "backends.opencl", "backends.cuda", "backends.interp", "backends.gpu")


def imported_modules(source: str, package: str) -> list[tuple[int, str]]:
    """(line, module) of every import in ``source``, relative imports resolved against ``package``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            found += [(node.lineno, base)] + [(node.lineno, f"{base}.{a.name}") for a in node.names]
    return found


def target_imports(source: str, package: str) -> list[str]:
    """One entry per import statement that reaches a target folder."""
    hits = {}
    for line, module in imported_modules(source, package):
        if any(module == p or module.startswith(p + ".") for p in TARGET_PACKAGES):
            hits.setdefault(line, f"{line}: {module}")
    return list(hits.values())


def test_relaxscript_imports_no_target_folder():
    bad = []
    for path in sorted((SRC / "relaxscript").rglob("*.py")):
        package = ".".join(path.relative_to(SRC).parent.parts)
        bad += [f"{path.relative_to(SRC)}:{hit}" for hit in target_imports(path.read_text(), package)]
    assert bad == []


def test_the_scan_sees_absolute_relative_and_lazy_target_imports():
    source = ("from backends.c.runtime import CKernelModule\nimport backends.opencl.target\n"
              "def f():\n    from backends import cuda\n")
    assert target_imports(source, "relaxscript.vm") == ["1: backends.c.runtime", "2: backends.opencl.target",
                                                         "4: backends.cuda"]
    assert target_imports("from ..c import runtime\n", "backends.opencl") == ["1: backends.c"]
    assert target_imports("from backends.target import get_backend\n", "relaxscript.vm") == []
