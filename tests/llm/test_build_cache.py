"""The engine build cache: a warm load reuses the executable, and only a verified entry of the same key."""
import json

import numpy as np
import pytest

from relaxscript.llm import build_cache
from relaxscript.llm.engine import Engine
from tests.blocking import without_blocking

PROMPT = [5, 9, 2, 17, 3]


@pytest.fixture
def entries(tmp_path, monkeypatch):
    """Engine entries in a folder of this test's own (kernels stay in the shared library cache)."""
    monkeypatch.setattr(build_cache, "_paths", lambda key, target: (tmp_path / f"engine-{key}.rsx",
                                                                     tmp_path / f"engine-{key}.json"))
    return tmp_path


def _build(path, **options):
    options = {"max_context": 24, **options}
    return Engine.from_gguf(path, target="c", weights="q4", warm_up=False, **options)


def _logits(engine):
    engine.reset()
    first = engine.prefill(PROMPT)
    return np.concatenate([first, engine.decode(7)])


def _single(entries, suffix):
    found = sorted(entries.glob("engine-*" + suffix))
    assert len(found) == 1
    return found[0]


def test_a_second_load_reuses_the_built_executable_and_computes_the_same(entries, tiny_gguf_q4):
    built = _build(tiny_gguf_q4)
    assert built._exported is not None   # built here: the export and the pipeline ran
    loaded = _build(tiny_gguf_q4)
    assert loaded._exported is None      # from the cache: neither ran
    np.testing.assert_array_equal(_logits(loaded), _logits(built))
    # what the export would have said is still there, rebuilt when asked for
    assert loaded.exported.param_names == built.exported.param_names
    assert set(loaded.activation_memory()) == {"prefill", "decode"}


def test_other_options_other_sources_and_other_machines_are_other_entries(entries, tiny_gguf_q4, monkeypatch):
    _build(tiny_gguf_q4)
    assert _build(tiny_gguf_q4, max_context=32)._exported is not None
    assert _build(tiny_gguf_q4, kv_cache="f32")._exported is not None
    monkeypatch.setenv("RELAXSCRIPT_MERGE_GATE_UP", "0")   # a setting that changes the build
    assert _build(tiny_gguf_q4)._exported is not None
    monkeypatch.delenv("RELAXSCRIPT_MERGE_GATE_UP")
    monkeypatch.setattr(build_cache, "compiler_fingerprint", lambda: "an edited pass")
    assert _build(tiny_gguf_q4)._exported is not None
    monkeypatch.setattr(build_cache, "machine_identity", lambda target: "a CPU without AVX-512")
    assert _build(tiny_gguf_q4)._exported is not None
    assert len(list(entries.glob("engine-*.rsx"))) == 6


def test_the_compiler_fingerprint_covers_every_source_file():
    import relaxscript.llm.build_cache as module
    assert len(module.compiler_fingerprint()) == 64
    assert module.compiler_fingerprint() == module.compiler_fingerprint()


def _swap_same_shaped(names):
    """Two weights of one shape in two layers: the engine took each other's weights (same logits
    shape, other values) when a record held them swapped."""
    i, j = next((i, j) for i in range(len(names)) for j in range(i + 1, len(names))
                if names[i].split(".", 2)[-1] == names[j].split(".", 2)[-1])
    names[i], names[j] = names[j], names[i]


RECORD_EDITS = {"names not strings": lambda r: r.__setitem__("param_names", [1, 2]),
                "record of another key": lambda r: r.__setitem__("key", "0" * 64),
                "swap same-shaped names": lambda r: _swap_same_shaped(r["param_names"]),
                # these were a KeyError / TypeError / IndexError from the engine, not a rebuild
                "rename a name": lambda r: r["param_names"].__setitem__(3, r["param_names"][3] + "x"),
                "drop a name": lambda r: r["param_names"].pop(),
                "duplicate a name": lambda r: r["param_names"].append(r["param_names"][0]),
                "record without its digest": lambda r: r.pop("record_sha256")}


@pytest.mark.parametrize("damage", ["flip executable byte", "truncate executable", "record not json",
                                    "executable swapped", "record nested deeply", "record is a fifo",
                                    "executable is a fifo", "executable is a directory", *RECORD_EDITS])
def test_a_damaged_entry_is_rebuilt_never_used(entries, tiny_gguf_q4, tiny_gguf_f32, damage):
    import os
    reference = _logits(_build(tiny_gguf_q4))
    executable, record = _single(entries, ".rsx"), _single(entries, ".json")
    data = bytearray(executable.read_bytes())
    if damage == "flip executable byte":
        data[len(data) // 2] ^= 0x40
        executable.write_bytes(bytes(data))
    elif damage == "truncate executable":
        executable.write_bytes(bytes(data[:len(data) // 3]))
    elif damage in RECORD_EDITS:
        text = json.loads(record.read_text())
        RECORD_EDITS[damage](text)
        record.write_text(json.dumps(text))
    elif damage == "record not json":
        record.write_bytes(b"\x00garbage")
    elif damage == "record nested deeply":   # was a RecursionError out of json.loads
        record.write_text("[" * 100_000 + "]" * 100_000)
    elif damage.endswith("is a fifo"):      # the load waited for a writer for ever
        path = record if damage.startswith("record") else executable
        path.unlink()
        os.mkfifo(path)
    elif damage == "executable is a directory":
        executable.unlink()
        executable.mkdir()
    elif damage == "executable swapped":   # another model's well-formed executable under this key
        other = Engine.from_gguf(tiny_gguf_f32, target="c", weights="f32", max_context=24, warm_up=False,
                                 cache=False)
        other.executable.save(executable)
    if damage == "executable is a directory":   # the rebuild cannot replace it: a warning
        with pytest.warns(RuntimeWarning, match="not cached"):
            rebuilt = _build(tiny_gguf_q4)
    elif damage.endswith("is a fifo"):
        rebuilt = without_blocking(path, lambda: _build(tiny_gguf_q4), 120)
    else:
        rebuilt = _build(tiny_gguf_q4)
    assert rebuilt._exported is not None
    np.testing.assert_array_equal(_logits(rebuilt), reference)
    if damage != "executable is a directory":
        assert _build(tiny_gguf_q4)._exported is None   # the rebuild rewrote a good entry


def test_cache_false_neither_reads_nor_writes(entries, tiny_gguf_q4):
    assert _build(tiny_gguf_q4, cache=False)._exported is not None
    assert not list(entries.iterdir())


def test_only_targets_with_a_private_folder_keep_builds():
    assert build_cache.keeps_builds("c")
    assert not build_cache.keeps_builds("interp")


def test_a_cache_that_cannot_be_written_still_gives_the_engine(tmp_path, monkeypatch, tiny_gguf_q4):
    full = tmp_path / "full"
    full.write_text("a file where the entries' folder should be")
    monkeypatch.setattr(build_cache, "_paths", lambda key, target: (full / "e.rsx", full / "e.json"))
    with pytest.warns(RuntimeWarning, match="not cached"):
        engine = _build(tiny_gguf_q4)
    assert len(_logits(engine)) > 0
