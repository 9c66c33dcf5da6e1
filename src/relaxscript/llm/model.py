"""The Llama-family architectures (``frontend.gguf.ARCHITECTURES``: llama, qwen2) written with
``relaxscript.nn``, with a KV cache.

One module holds ``prefill(tokens[n], pos, caches)`` and ``decode(token[1], pos,
caches)``; both return the logits of the last token and append the new keys
and values to the caches (per layer a ``(kv_heads, head_dim, capacity)`` key
tensor and a ``(kv_heads, capacity, head_dim)`` value tensor, see kv_cache.py)
at positions ``pos[0] = t ..``. The cache length is the
symbolic ``t`` bounded by the capacity. Names follow Hugging Face's Llama
(``layers.3.self_attn.q_proj.weight``); ``gguf_name`` maps them to llama.cpp's.

Rotary embedding rotates adjacent pairs ``(2i, 2i+1)`` of each head, the row
order llama.cpp stores Llama in (``relaxscript.frontend.gguf.LlamaConfig``);
an architecture whose files rotate the halves of a head (qwen2, ``rope_style
== "halves"``) is read through ``with_pair_rows``, which reorders its Q/K rows
(and biases) once at load, so one graph and one cache kernel serve both. The
tables ``rope.cos``/``rope.sin`` (capacity, head_dim / 2) are parameters
filled by ``rope_tables`` so that every path uses the same float64-rounded values.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from .. import nn
from .. import op as R
from ..op._convert import constant
from ..struct_info import TensorStructInfo
from . import kv_cache

NEG_LARGE = -1e30   # masked scores: exp(-1e30 - max) is exactly 0


def rope_tables(capacity: int, head_dim: int, theta: float) -> tuple[np.ndarray, np.ndarray]:
    inv_freq = theta ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    angles = np.outer(np.arange(capacity, dtype=np.float64), inv_freq)
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


class Rotary(nn.Module):
    def __init__(self, capacity: int, head_dim: int):
        super().__init__()
        self.head_dim = head_dim
        self.cos = nn.Parameter((capacity, head_dim // 2))
        self.sin = nn.Parameter((capacity, head_dim // 2))

    def tables(self, t, n):
        """The rows ``t .. t+n-1`` of the tables. The match_cast is the run-time check that
        ``t + n`` is within the capacity (a slice would silently clamp): after it, the cache
        views of ``t + n`` positions need no check of their own."""
        half = self.head_dim // 2
        sinfo = TensorStructInfo((n, half), "float32")
        return tuple(nn.builder().match_cast(R.strided_slice(table, [0], [t], [t + n]), sinfo, name)
                     for table, name in ((self.cos, "cos"), (self.sin, "sin")))

    def forward(self, x, cos, sin, n, heads: int):
        """x (n, heads, head_dim) rotated pairwise by the position's angles."""
        half = self.head_dim // 2
        pairs = R.reshape(x, (n, heads, half, 2))
        even = R.strided_slice(pairs, [3], [0], [1])
        odd = R.strided_slice(pairs, [3], [1], [2])
        c = R.reshape(cos, (n, 1, half, 1))
        s = R.reshape(sin, (n, 1, half, 1))
        out_even = R.subtract(R.multiply(even, c), R.multiply(odd, s))
        out_odd = R.add(R.multiply(even, s), R.multiply(odd, c))
        return R.reshape(R.concat((out_even, out_odd), axis=3), (n, heads, self.head_dim))


def _same_format(formats) -> bool:
    names = {None if f is None else f.format.name for f in formats}
    return len(names) == 1


class Attention(nn.Module):
    """``merge_qkv``: when q, k and v have one weight format, one ``qkv_proj`` Linear holds the
    three weights stacked along the output axis (rows q, then k, then v; exact for block
    formats, whose blocks run along the input axis): one GEMV reads ``x`` once instead of
    three launches, and the new keys and values are read in place from its output."""

    def __init__(self, cfg, formats, merge_qkv: bool = True):
        super().__init__()
        h, d = cfg.hidden_size, cfg.head_dim
        self.heads, self.kv_heads, self.head_dim = cfg.num_heads, cfg.num_kv_heads, d
        kinds = [formats(p) for p in ("q_proj", "k_proj", "v_proj")]
        self.merged = merge_qkv and _same_format(kinds)
        bias = getattr(cfg, "qkv_bias", False)   # qwen2: q/k/v add a bias (merged: the three stacked)
        if self.merged:
            self.qkv_proj = nn.Linear(h, (cfg.num_heads + 2 * cfg.num_kv_heads) * d, bias=bias,
                                      weight_format=kinds[0])
        else:
            self.q_proj = nn.Linear(h, cfg.num_heads * d, bias=bias, weight_format=kinds[0])
            self.k_proj = nn.Linear(h, cfg.num_kv_heads * d, bias=bias, weight_format=kinds[1])
            self.v_proj = nn.Linear(h, cfg.num_kv_heads * d, bias=bias, weight_format=kinds[2])
        self.o_proj = nn.Linear(cfg.num_heads * d, h, weight_format=formats("o_proj"))

    def forward(self, x, rotary, cos, sin, cache_k, cache_v, t, n, scales=None):
        heads, kv, d = self.heads, self.kv_heads, self.head_dim
        group = heads // kv
        if self.merged:
            qkv = self.qkv_proj(x)
            q = R.strided_slice(qkv, [1], [0], [heads * d])
            keys, key_offset, values, value_offset = qkv, heads * d, qkv, (heads + kv) * d
        else:
            q = self.q_proj(x)
            keys, key_offset, values, value_offset = self.k_proj(x), 0, self.v_proj(x), 0
        q = rotary(R.reshape(q, (n, heads, d)), cos, sin, n, heads)
        # one kernel rotates the new keys and writes keys and values into the caches (in place)
        cache_k, cache_v, *scales = kv_cache.append_rotated(cache_k, cache_v, keys, key_offset, values,
                                                            value_offset, cos, sin, t, scales)
        total = t + n
        keys = nn.emit(kv_cache.key_view(cache_k, total), "keys")          # (kv, d, total)
        values = nn.emit(kv_cache.value_view(cache_v, total), "values")    # (kv, total, d)
        # the views' extent, min(t + n, capacity), equals t + n (checked by the rotary tables'
        # match_cast); written as the views give it, the shapes below are provably equal,
        # which lets FuseAttention read the caches in place
        total = keys.struct_info.shape[2]
        if scales:   # q8: codes times their rows' scales (FuseAttention reads both in place)
            keys = kv_cache.dequantized(keys, nn.emit(kv_cache.key_scale_view(scales[0], total), "key_scales"))
            values = kv_cache.dequantized(values, nn.emit(kv_cache.value_scale_view(scales[1], total),
                                                          "value_scales"))
        else:
            # a float16 cache is widened for the products (FuseAttention reads it in place as float16)
            keys, values = kv_cache.widened(keys), kv_cache.widened(values)
        # query head h uses kv head h // group: group the queries of one kv head as rows
        qg = R.reshape(R.permute_dims(R.reshape(q, (n, kv, group, d)), [1, 2, 0, 3]), (kv, group * n, d))
        scores = R.multiply(R.matmul(qg, keys), constant(np.float32(1.0 / np.sqrt(d))))
        scores = R.reshape(scores, (kv, group, n, total))
        query_pos = R.reshape(R.arange(t, t + n, dtype="int64"), (n, 1))
        key_pos = R.arange(0, total, dtype="int64")
        scores = R.where(R.less_equal(key_pos, query_pos), scores, constant(np.float32(NEG_LARGE)))
        probs = R.reshape(R.nn.softmax(scores, axis=-1), (kv, group * n, total))
        out = R.reshape(R.matmul(probs, values), (kv, group, n, d))
        out = R.reshape(R.permute_dims(out, [2, 0, 1, 3]), (n, heads * d))
        return self.o_proj(out), cache_k, cache_v


class MLP(nn.Module):
    """``merge_gate_up``: when gate and up share a block-quantized format, one ``gate_up_proj``
    Linear holds both weights stacked along the output axis (gate rows, then up rows), and
    ``silu(gate) * up`` reads the two halves of its output: FuseOps puts that product into the
    GEMV's / GEMM's epilogue (a pair epilogue, ``fuse_partition.pair_epilogue_group``), so the
    two projections are one kernel launch reading ``x`` once. Float weights stay apart (their
    products go to the BLAS/GEMM library, which has no pair epilogue)."""

    def __init__(self, cfg, formats, merge_gate_up: bool = True):
        super().__init__()
        h, f = cfg.hidden_size, cfg.intermediate_size
        self.intermediate = f
        kinds = [formats("gate_proj"), formats("up_proj")]
        self.merged = merge_gate_up and kinds[0] is not None and _same_format(kinds)
        if self.merged:
            self.gate_up_proj = nn.Linear(h, 2 * f, weight_format=kinds[0])
        else:
            self.gate_proj = nn.Linear(h, f, weight_format=kinds[0])
            self.up_proj = nn.Linear(h, f, weight_format=kinds[1])
        self.down_proj = nn.Linear(f, h, weight_format=formats("down_proj"))

    def forward(self, x):
        if self.merged:
            f = self.intermediate
            gate_up = self.gate_up_proj(x)
            gate = R.strided_slice(gate_up, [1], [0], [f])
            up = R.strided_slice(gate_up, [1], [f], [2 * f])
        else:
            gate, up = self.gate_proj(x), self.up_proj(x)
        return self.down_proj(R.multiply(nn.silu(gate), up))


class DecoderLayer(nn.Module):
    def __init__(self, cfg, formats, merge_qkv: bool = True, merge_gate_up: bool = True):
        super().__init__()
        self.input_layernorm = nn.RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = Attention(cfg, formats, merge_qkv)
        self.post_attention_layernorm = nn.RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = MLP(cfg, formats, merge_gate_up)

    def forward(self, x, rotary, cos, sin, cache_k, cache_v, t, n, scales=None):
        attn, cache_k, cache_v = self.self_attn(self.input_layernorm(x), rotary, cos, sin,
                                                cache_k, cache_v, t, n, scales)
        h = R.add(x, attn)
        return R.add(h, self.mlp(self.post_attention_layernorm(h))), cache_k, cache_v


# our parameter name (with {i} for the layer) -> llama.cpp's GGUF tensor name
_GGUF_NAMES = {
    "embed_tokens.weight": "token_embd.weight",
    "norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
    "layers.{i}.input_layernorm.weight": "blk.{i}.attn_norm.weight",
    "layers.{i}.self_attn.q_proj.weight": "blk.{i}.attn_q.weight",
    "layers.{i}.self_attn.k_proj.weight": "blk.{i}.attn_k.weight",
    "layers.{i}.self_attn.v_proj.weight": "blk.{i}.attn_v.weight",
    "layers.{i}.self_attn.q_proj.bias": "blk.{i}.attn_q.bias",
    "layers.{i}.self_attn.k_proj.bias": "blk.{i}.attn_k.bias",
    "layers.{i}.self_attn.v_proj.bias": "blk.{i}.attn_v.bias",
    "layers.{i}.self_attn.o_proj.weight": "blk.{i}.attn_output.weight",
    "layers.{i}.post_attention_layernorm.weight": "blk.{i}.ffn_norm.weight",
    "layers.{i}.mlp.gate_proj.weight": "blk.{i}.ffn_gate.weight",
    "layers.{i}.mlp.up_proj.weight": "blk.{i}.ffn_up.weight",
    "layers.{i}.mlp.down_proj.weight": "blk.{i}.ffn_down.weight",
}


# a merged parameter -> the GGUF tensors stacked along the output axis (rows), in order
_MERGED = {"layers.{i}.self_attn.qkv_proj.weight": ("layers.{i}.self_attn.q_proj.weight",
                                                    "layers.{i}.self_attn.k_proj.weight",
                                                    "layers.{i}.self_attn.v_proj.weight"),
           "layers.{i}.self_attn.qkv_proj.bias": ("layers.{i}.self_attn.q_proj.bias",
                                                  "layers.{i}.self_attn.k_proj.bias",
                                                  "layers.{i}.self_attn.v_proj.bias"),
           "layers.{i}.mlp.gate_up_proj.weight": ("layers.{i}.mlp.gate_proj.weight",
                                                  "layers.{i}.mlp.up_proj.weight")}


def gguf_sources(param_name: str) -> tuple[str, ...]:
    """The GGUF tensors parameter ``param_name`` is made of: one, or the rows of several stacked
    (a merged projection)."""
    parts = param_name.split(".")
    if parts[0] == "layers" and len(parts) > 2:
        key = ".".join(["layers", "{i}"] + parts[2:])
        for merged, members in _MERGED.items():
            if key == merged or (key.startswith(merged + ".") and key[len(merged):] in (".data", ".scale", ".min")):
                suffix = key[len(merged):]
                return tuple(gguf_name(m.format(i=parts[1]) + suffix) for m in members)
    return (gguf_name(param_name),)


def gguf_tensor(gguf, param_name: str):
    """The GGUF tensor of parameter ``param_name``; a merged one is its sources' rows stacked
    (the block bytes of each row are copied as they are, so any row-blocked type stays exact)."""
    names = gguf_sources(param_name)
    tensors = [gguf.tensor(name) for name in names]
    if len(tensors) == 1:
        return tensors[0]
    first = tensors[0]
    for other in tensors[1:]:
        if other.qtype != first.qtype or other.shape[1:] != first.shape[1:]:
            raise ValueError(f"{param_name}: cannot stack {other.name} ({other.qtype}, {other.shape}) "
                             f"under {first.name} ({first.qtype}, {first.shape})")
    raw = np.concatenate([t.raw for t in tensors], axis=0)
    shape = (sum(t.shape[0] for t in tensors),) + tuple(first.shape[1:])
    return dataclasses.replace(first, name="+".join(names), shape=shape, raw=raw)


_ROTATED = ("attn_q", "attn_k")   # the projections whose rows rotary embedding pairs up


def _reorder_rows(tensor, order: np.ndarray):
    """``tensor`` with its rows (a 1-D tensor: its values) in ``order``."""
    if len(tensor.shape) == 2:   # each row is whole blocks of its type: exact for every type
        raw = tensor.raw[order]
    elif tensor.block_size == 1:   # F32 / F16 / BF16 values: their bytes move as they are
        raw = tensor.raw.reshape(tensor.shape[0], -1)[order].reshape(-1)
    else:   # a block-quantized 1-D tensor (no converter writes one): its float32 values
        values = tensor.dequantize()[order]
        return dataclasses.replace(tensor, qtype="F32", raw=np.ascontiguousarray(values).view(np.uint8))
    return dataclasses.replace(tensor, raw=np.ascontiguousarray(raw))


def with_pair_rows(gguf, config):
    """``gguf`` as this model reads it: unchanged when ``config.rope_style`` is "pairs"; for
    "halves" (qwen2) a file object whose q/k weights and biases have each head's rows
    reordered by ``frontend.gguf.pair_rows``, so rotating adjacent pairs computes what the
    file's half rotation does (the rows are moved, never rounded: quantized blocks stay the
    file's bytes). The other tensors are shared, not copied."""
    from ..frontend.gguf import GGUFFile, pair_rows
    if config.rope_style == "pairs":
        return gguf
    tensors = dict(gguf.tensors)
    for layer in range(config.num_layers):
        for part in _ROTATED:
            for kind in ("weight", "bias"):
                name = f"blk.{layer}.{part}.{kind}"
                if name in tensors:
                    order = pair_rows(tensors[name].shape[0], config.head_dim)
                    tensors[name] = _reorder_rows(tensors[name], order)
    return GGUFFile(gguf.path, gguf.version, gguf.metadata, tensors)


def gguf_name(param_name: str) -> str:
    """The GGUF tensor holding parameter ``param_name`` (a quantized weight's ``.data`` /
    ``.scale`` / ``.min`` all come from that tensor)."""
    parts = param_name.split(".")
    key, layer = param_name, None
    if parts[0] == "layers":
        layer = parts[1]
        key = ".".join(["layers", "{i}"] + parts[2:])
    for suffix in (".data", ".scale", ".min"):
        base = key[:-len(suffix)]
        if key.endswith(suffix) and base in _GGUF_NAMES:
            key = base
    if key not in _GGUF_NAMES:
        raise KeyError(f"parameter {param_name!r} has no GGUF tensor")
    name = _GGUF_NAMES[key]
    return name.format(i=layer) if layer is not None else name


class LlamaForCausalLM(nn.Module):
    """A Llama-family model with a KV cache of ``capacity`` positions (its Q/K rows in pair order:
    read a "halves" file through ``with_pair_rows``; ``cfg.qkv_bias`` adds the q/k/v biases).

    ``weight_formats`` maps a GGUF tensor name to an ``nn.Quantized`` format
    (or None for a float32 weight); absent names are float32. ``merge_qkv``: one
    ``qkv_proj`` per layer where q, k and v share a format (``gguf_tensor`` stacks them);
    ``merge_gate_up``: one ``gate_up_proj`` where gate and up share a quantized format.
    ``kv_cache_dtype``: "f32", "f16" or "q8" (the cache tensors' dtype, see kv_cache.py; q8
    adds each layer's key and value scales after its keys and values).
    """

    def __init__(self, cfg, capacity: int, weight_formats: dict | None = None, merge_qkv: bool = True,
                 kv_cache_dtype: str = "f32", merge_gate_up: bool = True):
        super().__init__()
        weight_formats = weight_formats or {}
        self.cfg, self.capacity = cfg, capacity
        self.cache_dtype = kv_cache.cache_dtype(kv_cache_dtype, "LlamaForCausalLM: kv_cache_dtype")
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size,
                                         weight_format=weight_formats.get("token_embd.weight"))
        self.rope = Rotary(capacity, cfg.head_dim)
        layers = []
        for i in range(cfg.num_layers):
            def formats(proj, i=i):
                key = next(k for k in _GGUF_NAMES if k.endswith(f".{proj}.weight"))
                return weight_formats.get(_GGUF_NAMES[key].format(i=i))
            layers.append(DecoderLayer(cfg, formats, merge_qkv, merge_gate_up))
        self.layers = nn.ModuleList(layers)
        self.norm = nn.RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        if cfg.tie_word_embeddings:
            self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size,
                                     weight_format=weight_formats.get("token_embd.weight"))
            self.lm_head.weight = self.embed_tokens.weight    # one tensor, listed once
        else:
            self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size,
                                     weight_format=weight_formats.get("output.weight"))

    def cache_spec(self) -> dict:
        dims = (self.capacity, self.cfg.num_kv_heads, self.cfg.head_dim)
        names = ("cache_k", "cache_v", "cache_ks", "cache_vs")   # q8: the keys' and values' scales too
        spec = {}
        for i in range(self.cfg.num_layers):
            for name, (shape, dtype) in zip(names, kv_cache.cache_shapes(*dims, self.cache_dtype)):
                spec[f"{name}_{i}"] = nn.Tensor(shape, dtype)
        return spec

    def export_spec(self) -> nn.ExportSpec:
        caches = self.cache_spec()
        pos = nn.Shape(["t"])
        return nn.ExportSpec(
            methods={"prefill": {"tokens": nn.Tensor(("n",), "int64"), "pos": pos, **caches},
                     "decode": {"token": nn.Tensor((1,), "int64"), "pos": pos, **caches}},
            dims={"n": self.capacity, "t": self.capacity}, lower={"n": 1})

    def prefill(self, tokens, pos, *caches):
        (n,) = tokens.struct_info.shape
        (t,) = pos.struct_info.values
        return self._forward(tokens, t, n, caches)

    def decode(self, token, pos, *caches):
        (t,) = pos.struct_info.values
        return self._forward(token, t, 1, caches)

    def _forward(self, tokens, t, n, caches):
        h = self.embed_tokens(tokens)
        cos, sin = self.rope.tables(t, n)
        per = kv_cache.caches_per_layer(self.cache_dtype)
        for i, layer in enumerate(self.layers):
            mine = caches[per * i: per * (i + 1)]
            h, _, _ = layer(h, self.rope, cos, sin, mine[0], mine[1], t, n, tuple(mine[2:]) or None)
            h = nn.emit(h, f"h{i}")
        # one row: with n >= 1 (the spec's lower bound) the slice deduces to (1, hidden), so the LM
        # head runs the generated one-token GEMV
        last = nn.emit(R.strided_slice(h, [0], [n - 1], [n]), "last")
        logits = self.lm_head(self.norm(last))
        return R.reshape(logits, (self.cfg.vocab_size,))
