"""Saved executables: a versioned plain-data format, verified before anything is loaded."""
import copy
import hashlib
import json
import os
import pickle
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import relaxscript as rx
from relaxscript.vm import Executable
from relaxscript.vm import file_format
from relaxscript.vm.file_format import ExecutableFormatError
from tests.blocking import without_blocking
from tests.relaxscript import vm_modules as M

CONSTANTS = M.HEADER + '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 3), "float32")):
        with R.dataflow():
            y = R.add(x, R.const([1.0, 2.0, 3.5], "float32"))
            z = R.multiply(y, R.const(0.5, "float32"))
            R.output(z)
        return (z, R.shape([7, 2]), R.prim_value(3), R.str("tag"))
'''


class _CreatesMarker:
    """Unpickling this creates a file: the test's stand-in for arbitrary code."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A small saved C executable (built once) and its bytes."""
    path = tmp_path_factory.mktemp("exe") / "subgraph.rsx"
    rx.build(M.parse(M.SUBGRAPH), target="c").save(path)
    return path, path.read_bytes()


def _run_subgraph(exe):
    x = np.random.default_rng(0).standard_normal((5, 4)).astype("float32")
    return rx.VirtualMachine(exe)["main"](x), rx.interpret(M.parse(M.SUBGRAPH), "main", x)


def _rewrite(path: Path, edit) -> None:
    """Apply ``edit`` to the manifest and write a well-formed file (valid hash) back."""
    manifest, payload = file_format.read_container(path)
    edit(manifest)
    file_format.write_container(path, manifest, bytes(payload))


def _first(manifest, op_name: str) -> list:
    """The field dict of the first instruction named ``op_name`` in the first function."""
    code = manifest["functions"][0]["record"][1]["code"]
    return next(ins["record"][1] for ins in code if ins["record"][0] == op_name)


def test_a_pickle_payload_is_never_unpickled(tmp_path):
    marker = tmp_path / "unpickled"
    path = tmp_path / "crafted.rsx"
    path.write_bytes(pickle.dumps({"format": "relaxscript-vm-1", "functions": _CreatesMarker(marker)}))
    with pytest.raises(ExecutableFormatError, match="not a relaxscript executable.*pickle") as info:
        Executable.load(path)
    assert not marker.exists()
    assert info.value.path == str(path) and isinstance(info.value, ValueError)


def test_save_and_load_keeps_code_constants_and_results(tmp_path):
    mod = M.parse(CONSTANTS)
    for target in ("c", "interp"):
        exe = rx.build(mod, target=target)
        exe.save(tmp_path / f"{target}.rsx")
        loaded = Executable.load(tmp_path / f"{target}.rsx")
        assert loaded.as_text() == exe.as_text()
        for name, func in exe.functions.items():
            consts = loaded.functions[name].constants
            assert consts.keys() == func.constants.keys()
            for reg, value in func.constants.items():
                assert type(consts[reg]) is type(value)
                np.testing.assert_array_equal(np.asarray(consts[reg], dtype=object),
                                              np.asarray(value, dtype=object))
        x = np.arange(6, dtype="float32").reshape(2, 3)
        got, want = rx.VirtualMachine(loaded)["main"](x), rx.interpret(mod, "main", x)
        np.testing.assert_allclose(got[0], want[0])
        assert got[1:] == want[1:] == ((7, 2), 3, "tag")


def test_the_file_is_a_header_a_json_manifest_and_a_hash(saved):
    path, data = saved
    magic, version, manifest_size, payload_size = struct.unpack_from("<8sIQQ", data)
    assert magic == file_format.MAGIC and version == file_format.FORMAT_VERSION
    assert len(data) == 28 + manifest_size + payload_size + 32
    assert hashlib.sha256(data[:-32]).digest() == data[-32:]
    manifest = json.loads(data[28:28 + manifest_size])
    assert manifest["target"] == "c" and "path" not in manifest["library"]
    assert "def _match" not in data[28:28 + manifest_size].decode()   # no generated source stored


def test_truncations_at_many_lengths_are_a_clear_error(saved, tmp_path):
    path, data = saved
    # every length within the header and the hash, and lengths spread over the rest
    sizes = sorted(set(range(40)) | set(range(40, len(data), max(1, len(data) // 200))) |
                   set(range(len(data) - 40, len(data))))
    cut = tmp_path / "cut.rsx"
    for size in sizes:
        cut.write_bytes(data[:size])
        with pytest.raises(ExecutableFormatError, match="truncated|not a relaxscript executable") as info:
            Executable.load(cut)
        assert str(cut) in str(info.value), size
    assert len(sizes) > 250


def test_every_bit_flip_is_a_clear_error(saved, tmp_path):
    path, data = saved
    # every byte of the header, then bytes spread over manifest, payload and hash
    offsets = sorted(set(range(28)) | set(range(28, len(data), max(1, len(data) // 300))) |
                     set(range(len(data) - 32, len(data))))
    flipped = tmp_path / "flipped.rsx"
    for i, offset in enumerate(offsets):
        damaged = bytearray(data)
        damaged[offset] ^= 1 << (i % 8)
        flipped.write_bytes(bytes(damaged))
        with pytest.raises(ExecutableFormatError) as info:
            Executable.load(flipped)
        assert str(flipped) in str(info.value), offset
    assert len(offsets) > 300


def test_a_foreign_format_version_is_named(saved, tmp_path):
    path, data = saved
    newer = bytearray(data[:-32])
    struct.pack_into("<I", newer, 8, 7)
    other = tmp_path / "newer.rsx"
    other.write_bytes(bytes(newer) + hashlib.sha256(newer).digest())
    with pytest.raises(ExecutableFormatError, match="format version 7, this relaxscript reads version 4"):
        Executable.load(other)


def test_trailing_data_is_a_clear_error(saved, tmp_path):
    path, data = saved
    longer = tmp_path / "longer.rsx"
    longer.write_bytes(data + b"\0")
    with pytest.raises(ExecutableFormatError, match="trailing data"):
        Executable.load(longer)


@pytest.mark.parametrize("edit, reason", [
    # an operator outside the generator's tables: code cannot be smuggled into a check
    (lambda m: _first(m, "AllocStorage").update(size_code={"tuple": ["__import__", "os"]}),
     "unknown operator '__import__'"),
    (lambda m: _first(m, "MatchValues")["checks"].insert(0, {"tuple": ["exec", "print(1)"]}),
     "unknown check 'exec'"),
    (lambda m: _first(m, "MatchValues")["messages"].insert(0, "{actual.__class__.__init__.__globals__}"),
     "field 'actual.__class__"),
    (lambda m: _first(m, "CallKernel").update(sym_base=10 ** 6), "sym_base must be an int"),
    (lambda m: _first(m, "CallKernel").update(kernel="nowhere"), "unknown kernel 'nowhere'"),
    # kernel variants: a condition is checked like any symbol code, a variant must be a built kernel
    (lambda m: _first(m, "CallKernel").update(
        variants={"tuple": [{"tuple": [{"tuple": ["bool", True]}, "nowhere"]}]}), "unknown kernel variant"),
    (lambda m: _first(m, "CallKernel").update(variants={"tuple": [{"tuple": [
        {"tuple": ["__import__", "os"]}, _first(m, "CallKernel")["kernel"]]}]}), "unknown operator '__import__'"),
    (lambda m: m["library"]["symbols"].update(exp="system"), "malformed library entry"),
    (lambda m: m["library"].update(isa="avx2"), "malformed library entry"),
    (lambda m: m["library"].update(isa=["avx2; rm -rf"]), "malformed library entry"),
    (lambda m: m["functions"][0]["record"].__setitem__(0, "Popen"), "unknown record 'Popen'"),
    (lambda m: m["library"].update(size=m["library"]["size"] - 1), "do not match their recorded sha256"),
    (lambda m: m.update(target="tpu"), "unknown target"),
    # found by test_manifest_mutations_load_or_fail_clearly: an AttributeError leaked from load
    (lambda m: _first(m, "CallKernel").update(call_site="x"), "the call site is not a CallSite record"),
    (lambda m: _first(m, "CallKernel").update(call_site=3), "the call site is not a CallSite record"),
])
def test_a_well_hashed_but_malformed_manifest_is_rejected(saved, tmp_path, edit, reason):
    path, data = saved
    crafted = tmp_path / "crafted.rsx"
    crafted.write_bytes(data)
    _rewrite(crafted, edit)
    with pytest.raises(ExecutableFormatError, match="malformed manifest: .*" + reason.replace("(", r"\(")):
        Executable.load(crafted)


def test_kernels_built_for_an_instruction_set_this_cpu_lacks_are_refused_by_name(saved, tmp_path):
    # a library compiled with -march=native on an AVX-512 machine, loaded on an AVX2-only one,
    # would stop the process with an illegal instruction at its first call
    path, data = saved
    manifest, _ = file_format.read_container(path)
    assert "avx2" in manifest["library"]["isa"] or "sse2" in manifest["library"]["isa"]
    moved = tmp_path / "other_cpu.rsx"
    moved.write_bytes(data)
    _rewrite(moved, lambda m: m["library"]["isa"].append("avx1024x"))
    with pytest.raises(ExecutableFormatError, match="compiled for a CPU with avx1024x, which this CPU lacks"):
        Executable.load(moved)
    unrecorded = tmp_path / "unrecorded.rsx"   # written before the set was recorded: loads
    unrecorded.write_bytes(data)
    _rewrite(unrecorded, lambda m: m["library"].pop("isa"))
    got, want = _run_subgraph(Executable.load(unrecorded))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_object_arrays_are_neither_saved_nor_loaded(tmp_path):
    exe = rx.build(M.parse(CONSTANTS), target="c")
    exe.functions["main"].constants[0] = np.array([object()])
    with pytest.raises(ValueError, match="cannot save an array of dtype object"):
        exe.save(tmp_path / "objects.rsx")
    good = tmp_path / "good.rsx"
    rx.build(M.parse(CONSTANTS), target="c").save(good)

    def to_object(manifest):
        text = json.dumps(manifest).replace('"dtype": "<f4"', '"dtype": "|O"', 1)
        manifest.clear()
        manifest.update(json.loads(text))
    _rewrite(good, to_object)
    with pytest.raises(ExecutableFormatError, match="unsupported array dtype '\\|O'"):
        Executable.load(good)


def test_the_library_is_loaded_from_the_file_not_from_a_damaged_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RELAXSCRIPT_CACHE_DIR", str(tmp_path))
    exe = rx.build(M.parse(M.SUBGRAPH), target="c")   # compiled into this empty cache, not loaded yet
    exe.save(tmp_path / "subgraph.rsx")
    built = Path(exe.c_library.path)
    assert built.exists()
    built.write_bytes(b"\x7fELF garbage".ljust(built.stat().st_size, b"\0"))   # same path, same size
    got, want = _run_subgraph(Executable.load(tmp_path / "subgraph.rsx"))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert hashlib.sha256(built.read_bytes()).digest() == hashlib.sha256(exe.c_library.library).digest()


def test_saving_replaces_the_file_atomically(tmp_path):
    path = tmp_path / "model.rsx"
    path.write_bytes(b"old contents")
    exe = rx.build(M.parse(M.SUBGRAPH), target="c")
    exe.save(path)
    assert Executable.load(path).function_names() == exe.function_names()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.rsx"]   # no temporary left


def _paths(node, prefix=()):
    """Every place in a manifest, as the keys and indices that reach it."""
    yield prefix
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, child in items:
        yield from _paths(child, prefix + (key,))


_ODD_VALUES = [None, True, False, 0, -1, 1, 2 ** 63, -2 ** 63 - 1, 10 ** 30, 1.5, "", "x", "main", "float64",
               [], {}, [0], {"a": 1}, {"tuple": []}, {"node": 0}, {"record": ["CallSite", {}]}]


@pytest.mark.fuzz
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_manifest_mutations_load_or_fail_clearly(saved, tmp_path, data):
    """A well-hashed manifest with one or two values replaced (a crafted file: the hash does not
    stop it) loads or raises ExecutableFormatError, never an internal error."""
    path, raw = saved
    crafted = tmp_path / "mutated.rsx"
    crafted.write_bytes(raw)
    manifest, payload = file_format.read_container(crafted)
    for _ in range(data.draw(st.integers(1, 2))):
        where = data.draw(st.sampled_from(list(_paths(manifest))[1:]))
        parent = manifest
        for key in where[:-1]:
            parent = parent[key]
        old = parent[where[-1]]
        choices = list(_ODD_VALUES)
        if type(old) is int:
            choices += [old + 1, old - 1, -old, old * 1000]
        parent[where[-1]] = copy.deepcopy(data.draw(st.sampled_from(choices)))   # never edit _ODD_VALUES
    file_format.write_container(crafted, manifest, bytes(payload))
    try:
        Executable.load(crafted)
    except ExecutableFormatError as err:
        assert str(crafted) in str(err)


def test_a_device_is_refused_before_reading(tmp_path):
    # /dev/zero was read until memory ran out
    with pytest.raises(ExecutableFormatError, match="not a regular file"):
        Executable.load("/dev/zero")
    fifo = tmp_path / "pipe.rsx"
    os.mkfifo(fifo)
    with pytest.raises(ExecutableFormatError, match="pipe.rsx: not a regular file"):
        without_blocking(fifo, lambda: Executable.load(fifo))   # opening it waited for a writer
