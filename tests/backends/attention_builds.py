"""One compiled attention module per (source, compiler flags, vector width), for the generated
attention kernel's tests (column form, decode form)."""
from __future__ import annotations

import relaxscript as rx
from backends.c.quantized_gemv import detect_features

_BUILT: dict = {}


def attention_main(source: str, flags: tuple = (), lanes: int | None = None):
    """The compiled ``main`` of ``source`` (a module holding one fused attention), built once per
    (source, flags, lanes): ``flags`` added to the C compiler's, ``lanes`` the vector width the
    kernel is generated for (narrower than the machine's: an AVX2 or SSE kernel on this CPU)."""
    if (source, flags, lanes) not in _BUILT:
        from backends.c import codegen, compiler
        saved = compiler.DEFAULT_FLAGS, codegen.detect_features
        try:
            compiler.DEFAULT_FLAGS = compiler.DEFAULT_FLAGS + flags
            if lanes is not None:
                features = detect_features()

                class Narrow:
                    def __getattr__(self, name):
                        return lanes if name == "lanes" else getattr(features, name)
                codegen.detect_features = lambda *a, **k: Narrow()
            exe = rx.build(rx.from_source(source), target="c")
        finally:
            compiler.DEFAULT_FLAGS, codegen.detect_features = saved
        assert "/* fused attention" in exe.c_library.source
        _BUILT[source, flags, lanes] = rx.VirtualMachine(exe)["main"]
    return _BUILT[source, flags, lanes]
