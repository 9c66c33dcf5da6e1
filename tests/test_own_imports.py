"""The project's own modules are imported plainly: a broken import fails, never falls back or skips."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OWN_PACKAGES = ("tensorir", "relaxscript", "backends", "tests")
IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError", "AttributeError"}


def _imports_own_module(node: ast.AST) -> bool:
    for inner in ast.walk(node):
        if isinstance(inner, ast.ImportFrom):
            if inner.level > 0 or (inner.module or "").split(".")[0] in OWN_PACKAGES:
                return True
        elif isinstance(inner, ast.Import):
            if any(alias.name.split(".")[0] in OWN_PACKAGES for alias in inner.names):
                return True
    return False


def _caught_names(handler: ast.ExceptHandler) -> set[str]:
    if handler.type is None:
        return {"BaseException"}
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return {t.id for t in types if isinstance(t, ast.Name)}


def _fallbacks(source: str) -> list[int]:
    """Lines of ``try: <import of our own module> except ImportError/Exception`` handlers."""
    found = []
    if "try:" not in source:   # most files: no need to parse
        return found
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Try) or not any(_imports_own_module(s) for s in node.body):
            continue
        for handler in node.handlers:
            if _caught_names(handler) & (IMPORT_ERRORS | {"Exception", "BaseException"}):
                found.append(handler.lineno)
    return found


def _own_importorskips(source: str) -> list[int]:
    found = []
    if "importorskip" not in source:
        return found
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "importorskip" and node.args
                and isinstance(node.args[0], ast.Constant)
                and str(node.args[0].value).split(".")[0] in OWN_PACKAGES):
            found.append(node.lineno)
    return found


def _sites(folder: str, *scanners) -> list[str]:
    return [f"{path.relative_to(ROOT)}:{line}" for path in sorted((ROOT / folder).rglob("*.py"))
            for scan in scanners for line in scan(path.read_text())]


def test_source_has_no_import_fallbacks_for_its_own_modules():
    assert _sites("src", _fallbacks) == []


def test_tests_do_not_skip_on_the_projects_own_imports():
    assert _sites("tests", _fallbacks, _own_importorskips) == []


def test_the_checks_see_a_fallback():
    """The scanners themselves recognise the patterns they forbid."""
    sample = ("import pytest\n"
              "try:\n    from .printer import fmt\nexcept ImportError:\n    fmt = repr\n"
              "interp = pytest.importorskip('tensorir.interpreter')\n"
              "try:\n    import scipy_openblas32\nexcept ImportError:\n    pass\n")
    assert _fallbacks(sample) == [4]
    assert _own_importorskips(sample) == [6]
