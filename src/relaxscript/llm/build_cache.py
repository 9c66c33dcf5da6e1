"""Built engines, cached: a model's compiled executable under a key of everything that decides it.

A warm ``Engine.from_gguf`` spent most of its time re-running the export and
the pass pipeline of a model it had built before (SmolLM2, kernels already
cached: export 0.9 s, pipeline 5.5 s, build 1.0 s of 10 s at load 4); with
the executable cached it loads a 3.5 MB file instead. The key hashes:

- the compiler itself: the bytes of every Python source file of the
  packages that build (``relaxscript``, ``tensorir``, ``backends``), so an
  edited pass never serves a stale build;
- the machine: the target's ``machine_identity`` (for C: compiler, flags,
  the CPU features ``-march=native`` selects, the CPU's cache sizes);
- the model: its hyperparameters, every tensor's name, type and shape, the
  weights' computed formats and the build options;
- every ``RELAXSCRIPT_*`` / ``OMP_*`` / ``OPENBLAS_*`` environment setting
  (some switch passes off), except where the cache lives.

Entries live in the target's private folder (``built_cache_folder``: for C, the
library cache's own directory):
``engine-<key>.rsx`` (an executable, verified by its own content hash on
load) and ``engine-<key>.json`` (the key again, the parameter order, the
executable's sha256 and a sha256 of those three, so a record renamed onto
another key, an executable swapped under it or an edited record is ignored;
the names must also be the executable's own parameters). Both are written
atomically and read only as regular files. Any entry that does not verify is
rebuilt, never used.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import pathlib
import tempfile
import warnings

from tensorir.regular_files import read_regular_file

_PACKAGES = ("relaxscript", "tensorir", "backends")
_RECORD_LIMIT = 1 << 20   # bytes read of a record (a model has a few hundred parameters)


@functools.lru_cache(maxsize=None)
def compiler_fingerprint() -> str:
    """sha256 over the relative path and bytes of every ``.py`` file of the building packages."""
    import backends
    import relaxscript
    import tensorir
    digest = hashlib.sha256()
    for package in (relaxscript, tensorir, backends):
        root = pathlib.Path(package.__file__).parent
        for path in sorted(root.rglob("*.py")):
            digest.update(f"{package.__name__}/{path.relative_to(root).as_posix()}\0".encode())
            digest.update(path.read_bytes())
            digest.update(b"\0")
    return digest.hexdigest()


def machine_identity(target: str = "c") -> str:
    """What decides the target's native code besides the IR (``TargetBackend.machine_identity``)."""
    from backends.target import get_backend
    return get_backend(target).machine_identity()


def keeps_builds(target: str) -> bool:
    """Whether builds for ``target`` are kept (a native target with a private cache folder)."""
    from backends.target import get_backend
    return get_backend(target).built_cache_folder() is not None


def _settings() -> dict:
    return {name: value for name, value in os.environ.items()
            if name.startswith(("RELAXSCRIPT_", "OMP_", "OPENBLAS_")) and name != "RELAXSCRIPT_CACHE_DIR"}


def build_key(model: dict, target: str = "c") -> str:
    """The cache key of a build for ``target`` described by ``model`` (plain data; values reprs when
    not JSON)."""
    material = {"compiler": compiler_fingerprint(), "machine": machine_identity(target), "settings": _settings(),
                "target": str(target), "model": model}
    return hashlib.sha256(json.dumps(material, sort_keys=True, default=repr).encode()).hexdigest()


def _paths(key: str, target: str = "c") -> tuple[pathlib.Path, pathlib.Path]:
    from backends.target import get_backend
    directory = get_backend(target).built_cache_folder()
    return directory / f"engine-{key}.rsx", directory / f"engine-{key}.json"


def _read_regular(path, limit: int = -1) -> bytes | None:
    """The bytes of ``path`` if it is a regular file, else None: a FIFO under an entry's name
    blocked the load for ever, ``/dev/zero`` was read until memory ran out."""
    try:
        return read_regular_file(path, limit)
    except OSError:   # absent, unreadable, not a regular file
        return None


def _record_digest(key: str, names, executable_sha256) -> str:
    """What a record's ``record_sha256`` holds: a damaged record (two parameter names swapped: the
    engine computed with each other's weights) no longer matches it."""
    return hashlib.sha256(json.dumps([key, names, executable_sha256]).encode()).hexdigest()


def _names_match(executable, names: list) -> bool:
    """Whether ``names`` are the last parameters of every function of ``executable`` (as the export
    names them)."""
    from ..nn.export import identifier
    expected = tuple(identifier(name) for name in names)
    functions = executable.functions.values()
    return bool(functions) and all(len(f.params) >= len(expected) + 2
                                   and tuple(f.params[len(f.params) - len(expected):]) == expected
                                   for f in functions)


def load(key: str, target: str = "c"):
    """``(executable, param_names)`` stored under ``key``, or None (absent, damaged, or built for
    another CPU: the caller builds again)."""
    from ..vm.executable import Executable
    from ..vm.file_format import ExecutableFormatError
    executable_path, record_path = _paths(key, target)
    text = _read_regular(record_path, _RECORD_LIMIT)
    data = _read_regular(executable_path) if text is not None else None
    if data is None:
        return None
    try:
        record = json.loads(text)
    except (ValueError, RecursionError):   # not JSON; nested past the parser's depth
        return None
    if type(record) is not dict or record.get("key") != key:
        return None
    names, digest = record.get("param_names"), record.get("sha256")
    if (digest != hashlib.sha256(data).hexdigest() or type(names) is not list
            or not all(isinstance(name, str) for name in names)
            or record.get("record_sha256") != _record_digest(key, names, digest)):
        return None
    try:   # a file replaced since the check above is another build under this key (atomic writes)
        executable = Executable.load(executable_path)
    except (ExecutableFormatError, OSError):
        return None
    return (executable, names) if _names_match(executable, names) else None


def store(key: str, executable, param_names, target: str = "c") -> None:
    """Write ``executable`` and its parameter order under ``key`` (atomically; the executable first,
    so a record never names an executable that is not there yet). A cache that cannot be written
    (a full disk) costs the next load its speed, not this one its engine: a warning, no error."""
    try:
        _write_entry(_paths(key, target), key, executable, param_names)
    except OSError as err:
        warnings.warn(f"relaxscript: the built engine was not cached ({err})", RuntimeWarning, stacklevel=3)


def _write_entry(paths, key: str, executable, param_names) -> None:
    executable_path, record_path = paths
    executable.save(executable_path)
    digest = hashlib.sha256(executable_path.read_bytes()).hexdigest()
    record = {"key": key, "param_names": list(param_names), "sha256": digest,
              "record_sha256": _record_digest(key, list(param_names), digest)}
    fd, tmp = tempfile.mkstemp(dir=record_path.parent, prefix=".engine-")
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(record, handle)
        os.replace(tmp, record_path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
