"""The README's first program runs as written: a decorated free function prints
itself (``Function.script()``) and runs in the interpreter (``rx.interpret(main, None, x)``)."""
import pathlib
import re

import pytest
import runpy

import numpy as np

import relaxscript as rx
from tests.targets import COMPILED_TARGETS

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"

SOURCE = '''
@R.function
def flat(x: R.Tensor(("n", 4), "float32")) -> R.Tensor(("n * 4",), "float32"):
    R.func_attr({"global_symbol": "flat"})
    n = T.int64()
    lv0 = R.reshape(x, R.shape([n * 4]))
    return lv0
'''


def test_readme_first_program_runs(tmp_path, capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    program = tmp_path / "readme_program.py"  # decorators read their source from a file
    program.write_text(next(b for b in blocks if "rx.interpret(" in b))
    runpy.run_path(str(program), run_name="readme_program")
    out = capsys.readouterr().out
    assert 'lv0: R.Tensor((n * 4,), dtype="float32") = R.reshape(x, R.shape([n * 4]))' in out
    assert out.rstrip().endswith("]")  # then the interpreter's result array


def test_function_script_round_trips_and_uses_its_global_symbol():
    func = rx.from_source(SOURCE)
    text = func.script()
    assert "def flat(" in text
    rx.assert_structural_equal(rx.from_source(text), func)
    assert "def other(" in func.script("other")


def test_interpret_a_bare_function_with_none_as_the_name():
    func = rx.from_source(SOURCE)
    x = np.arange(8, dtype="float32").reshape(2, 4)
    np.testing.assert_array_equal(rx.interpret(func, None, x), x.reshape(-1))
    np.testing.assert_array_equal(rx.interpret(func, x), x.reshape(-1))


@pytest.mark.parametrize("target", COMPILED_TARGETS)
def test_build_a_bare_function_and_save_load_it(tmp_path, target):
    func = rx.from_source(SOURCE)
    exe = rx.build(func, target=target)
    x = np.arange(12, dtype="float32").reshape(3, 4)
    np.testing.assert_array_equal(rx.VirtualMachine(exe)["flat"](x), x.reshape(-1))
    path = tmp_path / "flat.rsx"
    exe.save(str(path))
    loaded = rx.VirtualMachine(rx.Executable.load(str(path)))
    np.testing.assert_array_equal(loaded["flat"](x[:1]), x[:1].reshape(-1))
