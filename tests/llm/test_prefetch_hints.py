"""The joined runs' prefetch hints (``backends/c/kernel_runs.prefetch_hints``) on the LLM engine: before
each kernel call the runner prefetches the first lines of the next call's weights. Prefetches change no
result: the logits of an engine with hints are bit-identical to one without and to the VM that runs
every call as its own step."""
import numpy as np
import pytest

import relaxscript as rx
from backends.c import kernel_runs
from relaxscript.llm.engine import Engine


def _twin(engine: Engine, hint_bytes: int | None, **vm) -> Engine:
    """An engine over the same executable and weights whose frames link with ``hint_bytes``."""
    twin = Engine(engine.config, engine.exported, engine.executable,
                  dict(zip(engine.exported.param_names, engine._weights)), capacity=engine.max_context,
                  activations=engine.activations, kv_cache_dtype=engine.kv_cache, scales=engine.scales)
    if vm:
        twin._vm = rx.VirtualMachine(engine.executable, **vm)
        fixed = dict(enumerate(twin._caches + twin._weights, start=2))
        twin._prefill_step, twin._decode_step = twin._vm.bind("prefill", fixed), twin._vm.bind("decode", fixed)
    twin._hint_bytes = hint_bytes
    return twin


def _linked_hints(engine: Engine) -> list:
    return [step.kept[2] for frame in engine._decode_step.pool for step in frame.steps if hasattr(step, "kept")]


@pytest.fixture(scope="module")
def engine(tiny_gguf_q4):
    return Engine.from_gguf(tiny_gguf_q4, target="c", weights="q4", max_context=48, warm_up=False)


@pytest.mark.parametrize("prompt", ([1, 2, 3], list(range(3, 40, 3))))
def test_hinted_runs_give_bit_identical_logits(engine, prompt, monkeypatch):
    monkeypatch.setattr(kernel_runs, "HINT_MIN_BYTES", 0)    # the tiny model's weights are all hinted
    engines = [_twin(engine, 0), _twin(engine, 2048), _twin(engine, 1 << 20),
               _twin(engine, None, kernel_runs=False)]
    outputs = []
    for twin in engines:
        module = twin._vm.kernels
        module.prefetch_hint_bytes = twin._hint_bytes   # read when the frames link (their first call)
        try:
            twin.reset()
            logits = [np.array(twin.prefill(prompt))] + [np.array(twin.decode(t)) for t in (4, 8, 15)]
        finally:
            module.prefetch_hint_bytes = None
        outputs.append(logits)
    for logits in outputs[1:]:
        for a, b in zip(outputs[0], logits):
            np.testing.assert_array_equal(a, b)
    assert _linked_hints(engines[0]) and all(h is None for h in _linked_hints(engines[0]))
    assert any(h is not None for h in _linked_hints(engines[1]))
    assert not _linked_hints(engines[3])              # one step per call: no runs, no hints


def test_hint_bytes_setting(monkeypatch):
    monkeypatch.delenv("RELAXSCRIPT_RUN_PREFETCH", raising=False)
    assert kernel_runs.hint_bytes_setting() == kernel_runs.HINT_BYTES
    monkeypatch.setenv("RELAXSCRIPT_RUN_PREFETCH", "0")
    assert kernel_runs.hint_bytes_setting() == 0
    monkeypatch.setenv("RELAXSCRIPT_RUN_PREFETCH", "4096")
    assert kernel_runs.hint_bytes_setting() == 4096
