"""The tokenizer built from GGUF metadata, the ChatML template and streaming decoding."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relaxscript.frontend.gguf import GGUFFormatError, UnsupportedModelError, read_gguf
from relaxscript.llm.tokenizer import Tokenizer, default_system_message, render_chatml
from tests.llm.gguf_files import CORPUS, gguf, tiny_bpe

pytest.importorskip("tokenizers", reason="the tokenizer is built with the tokenizers library (extra 'llm')")


@pytest.fixture(scope="module")
def tokenizer(tiny_gguf_q4):
    return Tokenizer.from_gguf(read_gguf(tiny_gguf_q4))


def test_merges_apply(tokenizer):
    tokens, merges = tiny_bpe(96)
    ids = tokenizer.encode("the quick")
    # "the" and " quick" are frequent in the corpus: fewer tokens than characters, each a vocabulary entry
    assert len(ids) < len("the quick")
    assert "".join(tokens[i] for i in ids).replace("\u0120", " ") == "the quick"
    assert tokenizer.encode(" the") == [tokens.index("\u0120the")]


@settings(max_examples=40, deadline=None)
@given(text=st.text(alphabet=sorted(set(CORPUS)), max_size=40))
def test_round_trip(tokenizer, text):
    assert tokenizer.decode(tokenizer.encode(text)) == text


def test_special_tokens_and_bos(tokenizer):
    text = "<|im_start|>user\nhello<|im_end|>\n"
    ids = tokenizer.encode(text)
    assert ids[0] == 1 and 2 in ids
    assert tokenizer.decode(ids) == text
    assert tokenizer.decode(ids, skip_special_tokens=True) == "user\nhello\n"
    assert tokenizer.encode("hi", add_bos=True)[0] == tokenizer.bos_id == 1
    assert tokenizer.eos_id == 2
    with pytest.raises(ValueError, match="token id 500 is outside the vocabulary"):
        tokenizer.decode([3, 500])


def test_chat_template(tokenizer):
    user = [{"role": "user", "content": "what is 42?"}]
    assert tokenizer.apply_chat_template(user) == (
        "<|im_start|>system\nYou are a tiny test model.<|im_end|>\n"
        "<|im_start|>user\nwhat is 42?<|im_end|>\n<|im_start|>assistant\n")
    with_system = [{"role": "system", "content": "be brief"}] + user
    assert tokenizer.apply_chat_template(with_system, add_generation_prompt=False) == (
        "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nwhat is 42?<|im_end|>\n")
    with pytest.raises(ValueError, match="chat message #0 must be a dict"):
        render_chatml([("user", "hi")])


def test_stream_decoder_holds_back_partial_characters(tokenizer):
    ids = tokenizer.encode("hello there, the end")
    stream = tokenizer.stream_decoder()
    assert "".join(stream.feed(i) for i in ids) + stream.flush() == "hello there, the end"


def _write_tokenizer_file(path, **overrides):
    tokens, merges = tiny_bpe(64)
    tokens = overrides.get("tokens", tokens)
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_tokenizer_model(overrides.get("model", "gpt2"))
    writer.add_tokenizer_pre(overrides.get("pre", "smollm"))
    writer.add_token_list(tokens)
    writer.add_token_merges(overrides.get("merges", merges))
    if "template" in overrides:
        writer.add_chat_template(overrides["template"])
    writer.write_header_to_file(); writer.write_kv_data_to_file(); writer.write_tensors_to_file(); writer.close()
    return str(path)


def test_unsupported_tokenizers_are_named(tmp_path):
    with pytest.raises(UnsupportedModelError, match="tokenizer model 'llama' is not supported"):
        Tokenizer.from_gguf(_write_tokenizer_file(tmp_path / "a.gguf", model="llama"))
    with pytest.raises(UnsupportedModelError, match="pre-tokenizer 'qwen2' is not supported"):
        Tokenizer.from_gguf(_write_tokenizer_file(tmp_path / "b.gguf", pre="qwen2"))
    with pytest.raises(GGUFFormatError, match="merge #0 'zz qq' does not join"):
        Tokenizer.from_gguf(_write_tokenizer_file(tmp_path / "c.gguf", merges=["zz qq"]))
    plain = Tokenizer.from_gguf(_write_tokenizer_file(tmp_path / "d.gguf", template="{{ messages }}"))
    with pytest.raises(UnsupportedModelError, match="chat template is not ChatML"):
        plain.apply_chat_template([{"role": "user", "content": "hi"}])


@pytest.mark.slow
def test_real_model_tokenizer(real_model_path):
    tok = Tokenizer.from_gguf(real_model_path)
    assert tok.encode("Hello world! 12345") == [19556, 905, 17, 216, 33, 34, 35, 36, 37]
    for text in ["Hello world!", "héllo wörld 日本語 🙂 ∑", "  two  spaces\n\ttab", "<|im_start|>user\nHi<|im_end|>\n"]:
        assert tok.decode(tok.encode(text)) == text
    assert tok.encode("<|im_start|>user\n")[:1] == [1] and (tok.bos_id, tok.eos_id) == (1, 2)
    prompt = tok.apply_chat_template([{"role": "user", "content": "Hi"}])
    assert prompt.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")


_TEMPLATE_PIECES = ["<|im_start|>system\n", "<|im_start|>system\\n", "<|im_start|>", "system", "<|im_end|>",
                    "\n", "hello", "|", "<", "{{ x }}"]


@settings(max_examples=200, deadline=None)
@given(pieces=st.lists(st.sampled_from(_TEMPLATE_PIECES), max_size=12))
def test_default_system_message_is_the_first_system_block(pieces):
    import re
    text = "".join(pieces)
    found = re.search(r"<\|im_start\|>system(?:\n|\\n)(.*?)<\|im_end\|>", text, re.S)   # the old definition
    assert default_system_message(text) == (found.group(1) if found else None)


def test_a_huge_template_without_an_end_is_linear():
    # the lazy regex rescanned the rest of the template from every start marker: 8000 markers took 7 s
    import time
    start = time.process_time()
    assert default_system_message("<|im_start|>system\n" * 200_000) is None
    assert default_system_message("<|im_start|>system\nx" * 100_000 + "<|im_end|>") == "x" + "<|im_start|>system\nx" * 99_999
    assert time.process_time() - start < 1.0


def test_a_text_listed_twice_keeps_the_files_ids(tmp_path):
    # the backend's vocabulary holds one id per text: the second id of a duplicated text decoded to
    # nothing and the last id was "outside the vocabulary" (the model's logits have one per listed token)
    tokens, _ = tiny_bpe(64)
    duplicated = list(tokens)
    duplicated[10] = tokens[20]
    plain = Tokenizer.from_gguf(_write_tokenizer_file(tmp_path / "a.gguf"))
    dup = Tokenizer.from_gguf(_write_tokenizer_file(tmp_path / "b.gguf", tokens=duplicated))
    assert dup.vocab_size == plain.vocab_size == 64
    assert dup.decode([20, 10, 63]) == plain.decode([20, 20, 63])
    assert dup.encode(plain.decode([20])) == [10]   # the first id of a text encodes it
    with pytest.raises(ValueError, match="token id 64 is outside the vocabulary 0..63"):
        dup.decode([64])


_ODD_TEXTS = ["", " ", "\x00", "Ġ", "<|im_start|>", "a b", "Ġthe", "\n", "ĊĊ", "x" * 300, "é", "\U0001F600"]


@pytest.mark.fuzz
@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_mutated_tokenizer_metadata_builds_or_fails_clearly(tiny_gguf_q4, data):
    """Token texts, merges, token types and special ids replaced: the tokenizer builds and encodes,
    decodes, streams and renders the chat, or raises a format error / ValueError naming the file."""
    import numpy as np
    gguf_file = read_gguf(tiny_gguf_q4)
    md = gguf_file.metadata
    tokens, merges = list(md["tokenizer.ggml.tokens"]), list(md["tokenizer.ggml.merges"])
    types = np.array(md["tokenizer.ggml.token_type"])
    for _ in range(data.draw(st.integers(1, 4))):
        kind = data.draw(st.sampled_from(["token", "merge", "type", "bos", "append"]))
        if kind == "token":
            tokens[data.draw(st.integers(0, len(tokens) - 1))] = data.draw(st.sampled_from(_ODD_TEXTS + tokens))
        elif kind == "merge" and merges:
            merges[data.draw(st.integers(0, len(merges) - 1))] = data.draw(st.sampled_from(_ODD_TEXTS)) + \
                data.draw(st.sampled_from([" ", "", "  "])) + data.draw(st.sampled_from(_ODD_TEXTS + tokens))
        elif kind == "type":
            types[data.draw(st.integers(0, len(types) - 1))] = data.draw(st.sampled_from([0, 1, 2, 3, 4, 5, 6]))
        elif kind == "bos":
            md["tokenizer.ggml.bos_token_id"] = data.draw(st.sampled_from([0, len(tokens) - 1, len(tokens), -1]))
        else:
            tokens.append(data.draw(st.sampled_from(tokens)))
            types = np.append(types, 1).astype(types.dtype)
    md.update({"tokenizer.ggml.tokens": tokens, "tokenizer.ggml.merges": merges, "tokenizer.ggml.token_type": types})
    try:
        tok = Tokenizer.from_gguf(gguf_file)
    except (GGUFFormatError, UnsupportedModelError) as err:
        assert str(tiny_gguf_q4) in str(err)
        return
    assert tok.vocab_size == len(tokens)
    ids = tok.encode("the quick brown fox <|im_start|> 42 " + tokens[-1])
    assert all(0 <= i < len(tokens) for i in ids)
    tok.decode(ids)
    stream = tok.stream_decoder()
    pieces = [stream.feed(i) for i in range(len(tokens))] + [stream.flush()]
    assert "".join(pieces) == tok.decode(list(range(len(tokens))), skip_special_tokens=True)
    tok.apply_chat_template([{"role": "user", "content": "hi"}])
