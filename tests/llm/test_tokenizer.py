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
    with pytest.raises(UnsupportedModelError, match="pre-tokenizer 'llama-bpe' is not supported"):
        Tokenizer.from_gguf(_write_tokenizer_file(tmp_path / "b.gguf", pre="llama-bpe"))
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
                    "\n", "hello", "|", "<", "{{ x }}", "'", '"', "\\'", "{%"]


def _oracle_default_system(text: str):
    """The definition, quadratic and plain: the first system block whose text up to the next
    <|im_end|> stays inside one string literal (no closing quote; no template code when the
    marker is not in a literal)."""
    import re
    for start in re.finditer(r"<\|im_start\|>system(?:\n|\\n)", text):
        end = text.find("<|im_end|>", start.end())
        if end < 0:
            return None
        block, quote = text[start.end():end], text[start.start() - 1:start.start()]
        inside = quote not in block.replace("\\" + quote, "") if quote in ("'", '"') else \
            "{{" not in block and "{%" not in block
        if inside:
            return block
    return None


@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(st.sampled_from(_TEMPLATE_PIECES), max_size=14))
def test_default_system_message_is_the_first_literal_system_block(pieces):
    text = "".join(pieces)
    assert default_system_message(text) == _oracle_default_system(text)
