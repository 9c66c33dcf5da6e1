"""The GGUF reader: agreement with the gguf package, Llama hyperparameters, clear errors on bad files."""
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relaxscript.frontend.gguf import (GGUFFormatError, UnsupportedModelError, dequantize, llama_config,
                                       read_gguf)
from relaxscript.llm.tokenizer import Tokenizer
from tests.llm.gguf_files import gguf, write_random_llama_gguf

pytest.importorskip("tokenizers", reason="the fuzz test also builds the tokenizer (extra 'llm')")


def test_tensors_match_the_gguf_package(tiny_gguf_q4):
    ours = read_gguf(tiny_gguf_q4)
    theirs = gguf.GGUFReader(tiny_gguf_q4)
    assert [t.name for t in theirs.tensors] == list(ours.tensors)
    for t in theirs.tensors:
        mine = ours.tensor(t.name)
        assert mine.qtype == t.tensor_type.name
        assert mine.shape == tuple(int(d) for d in reversed(t.shape))
        expected = gguf.quants.dequantize(t.data, t.tensor_type).reshape(mine.shape)
        np.testing.assert_array_equal(mine.dequantize(), expected)
    assert ours.tensor("blk.0.attn_q.weight").qtype == "Q4_1"
    assert ours.tensor("token_embd.weight").qtype == "Q8_0"
    assert ours.tensor("blk.0.attn_q.weight").raw.shape == (64, 2 * 20)   # rows of two Q4_1 blocks


@pytest.mark.parametrize("qtype", ["Q4_0", "Q4_1", "Q8_0", "F16"])
def test_dequantize_agrees_with_gguf_package_on_random_blocks(qtype):
    rng = np.random.default_rng(3)
    values = (rng.standard_normal((5, 96)) * 3).astype(np.float32)
    kind = getattr(gguf.GGMLQuantizationType, qtype)
    packed = gguf.quants.quantize(values, kind)
    expected = gguf.quants.dequantize(packed, kind)
    np.testing.assert_array_equal(dequantize(packed.view(np.uint8), qtype, (5, 96)), expected)
    # and the quantization error is what the format allows (not a garbled layout)
    assert np.abs(expected - values).max() < {"Q4_0": 1.5, "Q4_1": 1.0, "Q8_0": 0.1, "F16": 0.01}[qtype]


def test_llama_config(tiny_gguf_q4, tmp_path):
    config = llama_config(read_gguf(tiny_gguf_q4))
    assert (config.num_layers, config.hidden_size, config.num_heads, config.num_kv_heads, config.head_dim,
            config.intermediate_size, config.vocab_size) == (2, 64, 4, 2, 16, 128, 96)
    assert config.tie_word_embeddings and (config.bos_id, config.eos_id) == (1, 2)
    assert config.rope_theta == 10000.0 and config.context_length == 256
    untied = write_random_llama_gguf(tmp_path / "untied.gguf", qtypes="F32", tie_embeddings=False, layers=1)
    assert not llama_config(read_gguf(untied)).tie_word_embeddings


def test_unsupported_architecture_is_named(tmp_path):
    path = write_random_llama_gguf(tmp_path / "gpt.gguf", architecture="falcon", qtypes="F32", layers=1)
    with pytest.raises(UnsupportedModelError, match="architecture 'falcon' is not supported"):
        llama_config(read_gguf(path))


def test_unsupported_tensor_type_is_named(tmp_path):
    # Q8_K is an activation type: neither our decoders nor gguf's dequantize it
    path = tmp_path / "q8k.gguf"
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_tensor("blk.0.ffn_up.weight", np.zeros((2, 292), np.uint8), raw_dtype=gguf.GGMLQuantizationType.Q8_K)
    writer.write_header_to_file(); writer.write_kv_data_to_file(); writer.write_tensors_to_file(); writer.close()
    with pytest.raises(UnsupportedModelError, match="'blk.0.ffn_up.weight' has type Q8_K"):
        read_gguf(path)


def test_q5_0_tensors_read(tmp_path):
    path = tmp_path / "q5.gguf"
    writer = gguf.GGUFWriter(path, "llama")
    values = np.random.default_rng(0).standard_normal((2, 64)).astype(np.float32)
    packed = gguf.quants.quantize(values, gguf.GGMLQuantizationType.Q5_0)
    writer.add_tensor("blk.0.ffn_up.weight", packed, raw_dtype=gguf.GGMLQuantizationType.Q5_0)
    writer.write_header_to_file(); writer.write_kv_data_to_file(); writer.write_tensors_to_file(); writer.close()
    tensor = read_gguf(path).tensor("blk.0.ffn_up.weight")
    assert (tensor.qtype, tensor.shape) == ("Q5_0", (2, 64))
    np.testing.assert_array_equal(tensor.dequantize(),
                                  gguf.quants.dequantize(packed, gguf.GGMLQuantizationType.Q5_0))


def test_missing_file_and_not_gguf(tmp_path):
    with pytest.raises(GGUFFormatError, match="cannot be read"):
        read_gguf(tmp_path / "absent.gguf")
    (tmp_path / "text.gguf").write_text("hello")
    with pytest.raises(GGUFFormatError, match="text.gguf: not a GGUF file"):
        read_gguf(tmp_path / "text.gguf")


def test_wrong_shape_in_metadata_is_reported(tmp_path):
    path = write_random_llama_gguf(tmp_path / "m.gguf", qtypes="F32", layers=1)
    data = bytearray(open(path, "rb").read())
    key = b"llama.feed_forward_length"
    at = data.index(key) + len(key) + 4          # after the key and its value type
    data[at:at + 4] = struct.pack("<I", 96)
    (tmp_path / "bad.gguf").write_bytes(bytes(data))
    with pytest.raises(GGUFFormatError, match="'blk.0.ffn_gate.weight' has shape"):
        llama_config(read_gguf(tmp_path / "bad.gguf"))


def _small_file(tmp_path_factory) -> bytes:
    folder = tmp_path_factory.mktemp("fuzz")
    return open(write_random_llama_gguf(folder / "f.gguf", layers=1, hidden=32, heads=2, kv_heads=1, ffn=32,
                                        vocab=64, qtypes=("Q4_1", "Q8_0")), "rb").read()


@pytest.fixture(scope="module")
def small_file(tmp_path_factory):
    return _small_file(tmp_path_factory)


def _read_or_format_error(path):
    """Reading must give a valid model or a GGUFFormatError/UnsupportedModelError, nothing else."""
    try:
        gguf_file = read_gguf(path)
        llama_config(gguf_file)
        for tensor in gguf_file.tensors.values():
            tensor.dequantize()
        Tokenizer.from_gguf(gguf_file)
    except (GGUFFormatError, UnsupportedModelError) as err:
        assert str(path) in str(err)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.floats(0, 1, exclude_max=True))
def test_truncated_files_give_format_errors(small_file, tmp_path, cut):
    length = int(cut * len(small_file))
    path = tmp_path / "truncated.gguf"
    path.write_bytes(small_file[:length])
    with pytest.raises(GGUFFormatError, match="truncated.gguf"):
        llama_config(read_gguf(path))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_flipped_bytes_never_crash(small_file, tmp_path, data):
    # the header and tables are where corruption matters; the tensor data is any bytes
    header_end = small_file.index(b"token_embd.weight") + 600
    corrupted = bytearray(small_file)
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, header_end))
        corrupted[at] ^= 1 << data.draw(st.integers(0, 7))
    path = tmp_path / "flipped.gguf"
    path.write_bytes(bytes(corrupted))
    _read_or_format_error(path)


def test_huge_counts_are_refused_before_allocating(small_file, tmp_path):
    data = bytearray(small_file)
    data[8:16] = struct.pack("<Q", 2 ** 62)            # tensor count
    (tmp_path / "huge.gguf").write_bytes(bytes(data))
    with pytest.raises(GGUFFormatError, match="tensor count is 4611686018427387904, more than"):
        read_gguf(tmp_path / "huge.gguf")


def test_deeply_nested_arrays_are_refused(tmp_path):
    key = b"deep"
    body = struct.pack("<Q", len(key)) + key + struct.pack("<I", 9)
    body += (struct.pack("<I", 9) + struct.pack("<Q", 1)) * 50 + struct.pack("<I", 4) + struct.pack("<Q", 0)
    (tmp_path / "deep.gguf").write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + body)
    with pytest.raises(GGUFFormatError, match="nests arrays more than 8 deep"):
        read_gguf(tmp_path / "deep.gguf")


def test_metadata_of_the_wrong_kind_is_reported(tmp_path):
    path = write_random_llama_gguf(tmp_path / "m.gguf", qtypes="F32", layers=1)
    data = bytearray(open(path, "rb").read())
    key = b"llama.block_count"
    at = data.index(key) + len(key)
    data[at:at + 4] = struct.pack("<I", 6)          # uint32 -> float32
    (tmp_path / "kind.gguf").write_bytes(bytes(data))
    with pytest.raises(GGUFFormatError, match="metadata 'llama.block_count' is .*, expected int"):
        llama_config(read_gguf(tmp_path / "kind.gguf"))
