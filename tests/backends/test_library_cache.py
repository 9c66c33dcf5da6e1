"""The compiled-library cache: private, content-verified, never loads a damaged entry."""
import ctypes
import hashlib
import os
import stat

import pytest

from backends.c import compiler
from backends.c import library_cache
from backends.c.library_cache import CacheDirectoryError
from backends.c.runtime import CLibraryImage
from tests.blocking import without_blocking

SOURCE_A = "int rs_cache_probe(void) { return 11; }\n"
SOURCE_B = "int rs_cache_probe(void) { return 22; }\n"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RELAXSCRIPT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "c"


def _probe(path) -> int:
    return ctypes.CDLL(str(path)).rs_cache_probe()


def test_cache_directory_and_entries_are_private(cache):
    path, compiled = compiler.compile_shared(SOURCE_A)
    assert compiled and path.parent == cache
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700
    entries = list(cache.iterdir())
    assert len(entries) == 2   # the library and the record of its compile key
    assert all(stat.S_IMODE(e.stat().st_mode) == 0o600 for e in entries)
    assert path.name == f"lib-{hashlib.sha256(path.read_bytes()).hexdigest()}.so"


def test_second_compile_is_a_verified_cache_hit(cache):
    first, _ = compiler.compile_shared(SOURCE_A)
    second, compiled = compiler.compile_shared(SOURCE_A)
    assert second == first and not compiled


def test_another_cpu_sharing_the_cache_gets_its_own_library(cache, monkeypatch):
    # the same source and flags on a CPU with other features (-march=native expands differently):
    # a shared home directory must not hand it the first machine's library
    first, _ = compiler.compile_shared(SOURCE_A)
    real = compiler.predefined_macros

    def other_cpu(cc, flags):
        return tuple(line for line in real(cc, flags) if "AVX512" not in line) + ("#define __OTHER_CPU__ 1",)
    monkeypatch.setattr(compiler, "predefined_macros", other_cpu)
    second, compiled = compiler.compile_shared(SOURCE_A)
    assert compiled
    monkeypatch.setattr(compiler, "predefined_macros", real)
    assert compiler.compile_shared(SOURCE_A) == (first, False)


def test_the_instruction_sets_a_library_needs_are_named_as_this_cpu_lists_them(tmp_path):
    needed = compiler.vector_isa()
    assert "sse2" in needed and not any(name.endswith("math") for name in needed)
    assert compiler.missing_isa(needed) == []   # the building machine has all of them
    assert compiler.vector_isa(("-march=x86-64",)) == ["sse", "sse2"]
    assert set(compiler.vector_isa(("-march=x86-64-v3",))) >= {"avx", "avx2", "fma", "f16c", "pni", "sse41"}
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse sse2 pni sse4_1 avx avx2 fma avx512_vnni\n")
    assert compiler.missing_isa(["sse41", "avx2", "avx512vnni", "avx512f"], str(cpuinfo)) == ["avx512f"]
    assert compiler.missing_isa(["avx512f"], str(tmp_path / "absent")) == []


def test_a_corrupted_cached_library_is_recompiled_not_loaded(cache):
    path, _ = compiler.compile_shared(SOURCE_A)
    size = path.stat().st_size
    path.write_bytes(b"\x7fELF" + b"\xff" * (size - 4))   # same name, same size
    again, compiled = compiler.compile_shared(SOURCE_A)
    assert compiled and again == path
    assert _probe(again) == 11


def test_a_substituted_library_under_the_same_name_is_not_used(cache):
    path_a, _ = compiler.compile_shared(SOURCE_A)
    path_b, _ = compiler.compile_shared(SOURCE_B)
    path_a.write_bytes(path_b.read_bytes())   # a different valid library planted under A's name
    again, compiled = compiler.compile_shared(SOURCE_A)
    assert compiled and _probe(again) == 11


def test_a_damaged_compile_record_is_recompiled(cache):
    compiler.compile_shared(SOURCE_A)
    (record,) = cache.glob("key-*.lib")
    record.write_text("not a digest")
    _, compiled = compiler.compile_shared(SOURCE_A)
    assert compiled


@pytest.mark.parametrize("entry", ["key-*.lib", "lib-*.so"])
def test_a_fifo_in_place_of_an_entry_is_rebuilt(cache, entry):
    # reading it waited for a writer for ever (and /dev/zero was read until memory ran out)
    compiler.compile_shared(SOURCE_A)
    (path,) = cache.glob(entry)
    path.unlink()
    os.mkfifo(path)
    again, compiled = without_blocking(path, lambda: compiler.compile_shared(SOURCE_A))
    assert compiled and _probe(again) == 11 and stat.S_ISREG(os.stat(path).st_mode)


def test_an_image_loads_its_own_bytes_even_when_the_cache_file_differs(cache):
    path_a, _ = compiler.compile_shared(SOURCE_A)
    path_b, _ = compiler.compile_shared(SOURCE_B)
    image = CLibraryImage("", path_a.read_bytes(), {}, path=str(path_b))   # a stale or wrong path
    path_a.write_bytes(path_b.read_bytes())
    assert image.load().rs_cache_probe() == 11
    assert path_a.read_bytes() == image.library   # the entry was rewritten from the bytes


def test_a_cache_directory_others_can_write_is_refused(cache):
    cache.mkdir(parents=True)
    os.chmod(cache, 0o777)
    with pytest.raises(CacheDirectoryError, match="can be written by other users") as info:
        compiler.compile_shared(SOURCE_A)
    assert isinstance(info.value, OSError) and info.value.path == str(cache)
    assert str(cache) in str(info.value)


def test_a_cache_directory_of_another_user_is_refused(cache, monkeypatch):
    cache.mkdir(parents=True, mode=0o700)
    owner = os.stat(cache).st_uid
    monkeypatch.setattr(library_cache.os, "getuid", lambda: owner + 1)
    with pytest.raises(CacheDirectoryError, match=f"owned by user id {owner}, not by this user"):
        library_cache.cache_dir()


def test_a_readable_own_cache_directory_is_tightened(cache):
    cache.mkdir(parents=True)
    os.chmod(cache, 0o755)
    assert library_cache.cache_dir() == cache
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700


def test_a_cache_path_that_is_a_file_is_a_clear_error(cache):
    cache.parent.mkdir(parents=True)
    cache.write_text("a file where the cache directory should be")
    with pytest.raises(CacheDirectoryError, match="cannot be created|is not a directory"):
        library_cache.cache_dir()


def test_swapped_compile_records_do_not_map_a_source_to_another_library(cache):
    # the records held the digest alone: a record copied onto another key's name (two cache
    # entries swapped, a restored backup) made source A load B's library, whose kernels
    # take other arguments
    path_a, _ = compiler.compile_shared(SOURCE_A)
    records_before = set(cache.glob("key-*.lib"))
    compiler.compile_shared(SOURCE_B)
    (record_b,) = set(cache.glob("key-*.lib")) - records_before
    (record_a,) = records_before
    record_a.write_bytes(record_b.read_bytes())
    again, compiled = compiler.compile_shared(SOURCE_A)
    assert compiled and again == path_a and _probe(again) == 11
    assert record_a.read_bytes() != record_b.read_bytes()


def test_unreadable_cache_entries_are_rebuilt(cache):
    path, _ = compiler.compile_shared(SOURCE_A)
    (record,) = cache.glob("key-*.lib")
    record.unlink()
    record.mkdir()   # a directory where the record should be
    path.unlink()
    path.mkdir()     # and where the library should be
    with pytest.raises(OSError):   # cannot replace a directory by a file: an OSError naming it, no crash
        compiler.compile_shared(SOURCE_A)
    record.rmdir()
    path.rmdir()
    again, compiled = compiler.compile_shared(SOURCE_A)
    assert compiled and _probe(again) == 11
