"""Structured fuzzing of GGUF files: every header, metadata and tensor-table field set to extreme values.

``gguf_fields`` walks the ``gguf`` package's files on its own and lists each
integer field (counts, string lengths, value/element types, array lengths,
ranks, dimensions, type ids, offsets, metadata values); the reader, the
Llama config, dequantization, conversion and the tokenizer must give a valid
model or a ``GGUFFormatError``/``UnsupportedModelError`` naming the file, in
bounded time. (Random byte flips and truncations: ``test_gguf_reader.py``.)
"""
import math
import struct
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relaxscript.frontend.gguf import GGUFFormatError, UnsupportedModelError, llama_config, read_gguf
from relaxscript.llm.model import with_pair_rows
from relaxscript.quantization.gguf_convert import convert_weight

from tests.blocking import without_blocking

from .gguf_fields import gguf_fields, interesting_values
from .gguf_files import write_random_llama_gguf

pytest.importorskip("tokenizers", reason="the fuzz tests also build the tokenizer (extra 'llm')")
from relaxscript.llm.tokenizer import Tokenizer  # noqa: E402


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fields")
    plain = write_random_llama_gguf(folder / "q.gguf", layers=1, hidden=32, heads=2, kv_heads=1, ffn=32, vocab=64,
                                    qtypes=("Q4_1", "Q8_0"))
    k_quants = write_random_llama_gguf(
        folder / "k.gguf", layers=1, hidden=256, heads=2, kv_heads=1, ffn=256, vocab=64, qtypes=("Q4_K", "Q6_K"),
        tensor_qtypes={"blk.0.ffn_down.weight": "Q5_K", "blk.0.attn_v.weight": "Q3_K", "blk.0.attn_k.weight": "Q2_K",
                       "blk.0.attn_q.weight": "BF16", "blk.0.ffn_up.weight": "Q5_0", "blk.0.ffn_gate.weight": "Q5_1"})
    # qwen2: biases, its own metadata keys and pre-tokenizer, Q/K rows reordered at load
    qwen2 = write_random_llama_gguf(folder / "qwen2.gguf", architecture="qwen2", layers=1, hidden=32, heads=2,
                                    kv_heads=1, ffn=32, vocab=64, qtypes=("Q8_0", "Q4_1"))
    return [open(plain, "rb").read(), open(k_quants, "rb").read(), open(qwen2, "rb").read()]


def _loads_or_fails_clearly(path, seconds=20.0):
    start = time.process_time()
    try:
        gguf_file = read_gguf(path)
        with_pair_rows(gguf_file, llama_config(gguf_file))
        for tensor in gguf_file.tensors.values():
            tensor.dequantize()
            if len(tensor.shape) == 2:
                convert_weight(tensor.qtype, tensor.raw, tensor.shape, "float16")
        Tokenizer.from_gguf(gguf_file)
    except (GGUFFormatError, UnsupportedModelError) as err:
        assert str(path) in str(err)
    assert time.process_time() - start < seconds


def test_field_walker_sees_the_tables(files):
    roles = {role for _, _, role in gguf_fields(files[1])}
    assert {"tensor count", "metadata count", "key length", "value type", "metadata array length",
            "rank", "dimension", "tensor type", "tensor offset"} <= roles


def test_all_ones_in_every_field(files, tmp_path):
    """Each field at its type's maximum (a huge count, length, dimension, offset or value)."""
    for index, data in enumerate(files):
        for offset, fmt, _ in gguf_fields(data):
            corrupt = bytearray(data)
            struct.pack_into(fmt, corrupt, offset, (1 << 8 * struct.calcsize(fmt)) - 1)
            path = tmp_path / f"ones{index}.gguf"
            path.write_bytes(bytes(corrupt))
            _loads_or_fails_clearly(path, seconds=10.0)


def test_huge_block_count_is_refused_at_once(files, tmp_path):
    # it listed the expected tensor names of every layer first: 2**28 layers took gigabytes
    data = bytearray(files[0])
    at = data.index(b"llama.block_count") + len(b"llama.block_count") + 4
    for count in (2 ** 28, 2 ** 32 - 1, 2):
        struct.pack_into("<I", data, at, count)
        (tmp_path / "layers.gguf").write_bytes(bytes(data))
        start = time.process_time()
        with pytest.raises(GGUFFormatError, match=f"block_count {count} needs {count * 9} layer tensors"):
            llama_config(read_gguf(tmp_path / "layers.gguf"))
        assert time.process_time() - start < 2


@pytest.mark.parametrize("key,value,problem", [
    ("llama.rope.freq_base", math.nan, "rope_theta must be a positive finite number"),
    ("llama.rope.freq_base", -1.0, "rope_theta must be a positive finite number"),
    ("llama.rope.freq_base", math.inf, "rope_theta must be a positive finite number"),
    ("llama.attention.layer_norm_rms_epsilon", math.nan, "rms_norm_eps must be a finite number >= 0"),
    ("llama.attention.layer_norm_rms_epsilon", -1e-5, "rms_norm_eps must be a finite number >= 0")])
def test_nan_or_negative_hyperparameters_are_refused(files, tmp_path, key, value, problem):
    # they loaded, and every logit was nan
    data = bytearray(files[0])
    struct.pack_into("<f", data, data.index(key.encode()) + len(key) + 4, value)
    (tmp_path / "hyper.gguf").write_bytes(bytes(data))
    with pytest.raises(GGUFFormatError, match=problem):
        llama_config(read_gguf(tmp_path / "hyper.gguf"))


@pytest.mark.fuzz
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fields_set_to_extreme_values(files, tmp_path, data):
    base = files[data.draw(st.integers(0, len(files) - 1))]
    fields = gguf_fields(base)
    corrupt = bytearray(base)
    for _ in range(data.draw(st.integers(1, 3))):
        offset, fmt, _ = data.draw(st.sampled_from(fields))
        old = struct.unpack_from(fmt, base, offset)[0]
        struct.pack_into(fmt, corrupt, offset, data.draw(st.sampled_from(interesting_values(fmt, old))))
    path = tmp_path / "field.gguf"
    path.write_bytes(bytes(corrupt))
    _loads_or_fails_clearly(path)


def test_a_device_or_pipe_is_refused_before_reading(tmp_path):
    # /dev/zero was read until memory ran out
    import os
    with pytest.raises(GGUFFormatError, match="/dev/zero: not a regular file"):
        read_gguf("/dev/zero")
    fifo = tmp_path / "pipe.gguf"
    os.mkfifo(fifo)
    # with no writer, opening it for reading blocked for ever
    with pytest.raises(GGUFFormatError, match="pipe.gguf: not a regular file"):
        without_blocking(fifo, lambda: read_gguf(fifo))
    fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)   # and with one
    try:
        with pytest.raises(GGUFFormatError, match="pipe.gguf: not a regular file"):
            read_gguf(fifo)
    finally:
        os.close(fd)
