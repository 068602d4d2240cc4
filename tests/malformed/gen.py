#!/usr/bin/env python3
"""Writes the malformed-file corpus of tests/malformed/ (run by malformed.sh).

    python3 tests/malformed/gen.py [OUTDIR]     (default: this directory)

Deterministic: no randomness, no clock, no dependence on the build. Two
small valid checkpoints are written from scratch (the safetensors layout and
the checkpoint conventions of src/model/ckpt.c: F32 tensors in model order, the
config JSON and an FNV-1a checksum of the tensor data in __metadata__), a
valid batch file and a valid text; every other file is one of them broken
in one way. expected.tsv (written by hand, not by this script) says which
reader each file goes to and what it must answer; malformed.sh checks that
every file it lists exists and that this script reproduces them byte for
byte.
"""
import json
import os
import struct
import sys

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))

C, T = 4, 4  # width and block size of both base models


def f32(values):
    return b"".join(struct.pack("<f", v) for v in values)


def i32(values):
    return b"".join(struct.pack("<i", v) for v in values)


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def model_tensors(V, O):
    """The tensors of a 1-layer, 1-head, FFN-less softmax model, in the
    model's (checkpoint) order, with deterministic small values."""
    shapes = [
        ("tok_emb", [V, C]),
        ("pos_emb", [T, C]),
        ("blocks.0.ln1.weight", [C]),
        ("blocks.0.ln1.bias", [C]),
        ("blocks.0.attn.qkv.weight", [3 * C, C]),
        ("blocks.0.attn.qkv.bias", [3 * C]),
        ("blocks.0.attn.proj.weight", [C, C]),
        ("blocks.0.attn.proj.bias", [C]),
        ("ln_f.weight", [C]),
        ("ln_f.bias", [C]),
        ("head.weight", [O, C]),
        ("head.bias", [O]),
    ]
    out, k = [], 0
    for name, shape in shapes:
        n = numel(shape)
        if name.endswith("ln1.weight") or name == "ln_f.weight":
            vals = [1.0] * n
        else:
            vals = [((k + i) * 37 % 101 - 50) / 1000.0 for i in range(n)]
        k += n
        out.append([name, "F32", shape, f32(vals)])
    return out


def config(task, vocab=None):
    c = {"task": task, "attn": "softmax", "engine": "fast", "n_layer": 1, "n_head": 1,
         "n_embd": C, "block_size": T}
    if task == "brackets":
        c.update(vocab_size=2, out_size=T, ffn=False, kinds=1, n_heldout=8,
                 data_seed="1234")
    else:
        c.update(vocab_size=len(vocab), out_size=len(vocab), ffn=False, kinds=1,
                 n_heldout=2000, data_seed="1234", vocab=vocab)
    return c


def header(tensors, meta):
    """The header object: __metadata__ first, then the tensors with their
    data laid end to end."""
    h, off = {}, 0
    if meta is not None:
        h["__metadata__"] = meta
    for name, dtype, shape, data in tensors:
        h[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(data)]}
        off += len(data)
    return h


def pack(hdr_text, data, hlen=None):
    """8-byte little-endian header length, the header padded with spaces to
    a multiple of 8 (as the library writes it), the data."""
    raw = hdr_text.encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw) if hlen is None else hlen) + raw + data


def dumps(obj):
    return json.dumps(obj, separators=(",", ":"))


def checkpoint(tensors, cfg, extra_meta=None, checksum=True):
    data = b"".join(t[3] for t in tensors)
    meta = {"config": dumps(cfg), "step": "1", "train": "{}"}
    if extra_meta:
        meta.update(extra_meta)
    if checksum:
        meta["checksum"] = "fnv1a64:%016x" % fnv1a64(data)
    return header(tensors, meta), data


files = {}


def put(name, content):
    assert name not in files, name
    files[name] = content if isinstance(content, bytes) else content.encode()


# ---------------------------------------------------------------- bases
BR_CFG = config("brackets")
LM_VOCAB = [10, 32, 97, 98, 99]  # "\n abc"
LM_CFG = config("charlm", LM_VOCAB)
base_t = model_tensors(2, T)
base_h, base_d = checkpoint(base_t, BR_CFG)
BASE = pack(dumps(base_h), base_d)
put("ckpt_ok_brackets.safetensors", BASE)
lm_h, lm_d = checkpoint(model_tensors(len(LM_VOCAB), len(LM_VOCAB)), LM_CFG)
put("ckpt_ok_charlm.safetensors", pack(dumps(lm_h), lm_d))

HLEN = struct.unpack("<Q", BASE[:8])[0]
ends = []  # end of each tensor in the data region
for name, dt, shape, data in base_t:
    ends.append((ends[-1] if ends else 0) + len(data))


def variant(mutate_header=None, mutate_data=None, tensors=None, cfg=BR_CFG, **kw):
    ts = [list(t) for t in (tensors or base_t)]
    h, d = checkpoint(ts, cfg, **kw)
    if mutate_header:
        mutate_header(h)
    if mutate_data:
        d = mutate_data(d)
    return pack(dumps(h), d)


# ---------------------------------------- truncation at every boundary
put("ckpt_trunc_empty.safetensors", b"")
put("ckpt_trunc_len4.safetensors", BASE[:4])
put("ckpt_trunc_len8.safetensors", BASE[:8])
put("ckpt_trunc_header_mid.safetensors", BASE[: 8 + HLEN // 2])
put("ckpt_trunc_header_end.safetensors", BASE[: 8 + HLEN])
for k, end in enumerate(ends[:-1]):
    put("ckpt_trunc_tensor%02d.safetensors" % k, BASE[: 8 + HLEN + end])
put("ckpt_trunc_mid_tensor.safetensors", BASE[: 8 + HLEN + ends[4] + 6])
put("ckpt_trunc_last_byte.safetensors", BASE[:-1])
put("ckpt_trailing_bytes.safetensors", BASE + b"\0" * 8)

# ------------------------------------------------------ header length
put("ckpt_hlen_max.safetensors", struct.pack("<Q", 2**64 - 1) + BASE[8:])
put("ckpt_hlen_over_limit.safetensors", struct.pack("<Q", 100000001) + BASE[8:])
put("ckpt_hlen_past_eof.safetensors", struct.pack("<Q", len(BASE)) + BASE[8:])
put("ckpt_hlen_short.safetensors", struct.pack("<Q", HLEN - 16) + BASE[8:])
put("ckpt_hlen_zero.safetensors", struct.pack("<Q", 0) + BASE[8:])

# --------------------------------------------------------------- JSON
put("ckpt_json_garbage.safetensors", pack("this is not json", base_d))
put("ckpt_json_array.safetensors", pack("[1,2,3]", b""))
put("ckpt_json_after_value.safetensors", pack(dumps(base_h) + "x", base_d))
put("ckpt_json_nul.safetensors", pack(dumps(base_h)[:20] + "\0" + dumps(base_h)[21:], base_d))
dup = dumps(base_h)[:-1] + ',"head.bias":' + dumps(base_h["head.bias"]) + "}"
put("ckpt_json_duplicate_name.safetensors", pack(dup, base_d))
put("ckpt_json_two_metadata.safetensors",
    pack('{"__metadata__":{},' + dumps(base_h)[1:], base_d))
put("ckpt_meta_not_object.safetensors",
    variant(lambda h: h.__setitem__("__metadata__", ["config"])))
put("ckpt_meta_number_value.safetensors",
    variant(lambda h: h["__metadata__"].__setitem__("step", 1)))


# Keys a JSON reader may take the first of (cJSON) or the last of (Python),
# a \u0000 escape that cuts a string short, a byte order mark: each read
# two ways, so refused. dumps() cannot repeat a key; the text is edited.
BASE_TEXT = dumps(base_h)
put("ckpt_json_dup_key_entry.safetensors",
    pack(BASE_TEXT.replace('"pos_emb":{"dtype":"F32"', '"pos_emb":{"dtype":"I32","dtype":"F32"'),
         base_d))
put("ckpt_json_dup_key_nested.safetensors",
    pack(BASE_TEXT.replace('"pos_emb":{', '"pos_emb":{"notes":{"a":1,"a":2},'), base_d))
put("ckpt_meta_dup_key.safetensors",
    pack(BASE_TEXT.replace('"step":"1"', '"step":"1","step":"2"'), base_d))
put("ckpt_json_nul_escape_name.safetensors",
    pack(BASE_TEXT.replace('"head.bias":', '"head.bias\\u0000x":'), base_d))
put("ckpt_meta_nul_escape.safetensors",
    pack(BASE_TEXT.replace('"step":"1"', '"step":"1\\u00002"'), base_d))
put("ckpt_json_bom.safetensors", pack("\ufeff" + BASE_TEXT, base_d))


def cfg_text(text):
    return variant(lambda h: h["__metadata__"].__setitem__("config", text))


CFG_TEXT = dumps(BR_CFG)
put("ckpt_cfg_dup_key.safetensors",
    cfg_text(CFG_TEXT.replace('"attn":"softmax"', '"attn":"boltzmann","attn":"softmax"')))
put("ckpt_cfg_dup_key_sampler.safetensors",
    cfg_text(CFG_TEXT[:-1] + ',"sampler":{"kind":"gibbs","kind":"exact"}}'))
put("ckpt_cfg_nul_escape.safetensors",
    cfg_text(CFG_TEXT.replace('"task":"brackets"', '"task":"brackets\\u0000charlm"')))
put("ckpt_cfg_bom.safetensors", cfg_text("\ufeff" + CFG_TEXT))

# ---------------------------------------------------- lying offsets
def set_off(name, off):
    return variant(lambda h: h[name].__setitem__("data_offsets", off))


put("ckpt_off_past_eof.safetensors", set_off("head.bias", [ends[-2], ends[-1] + 4]))
put("ckpt_off_begin_after_end.safetensors", set_off("pos_emb", [ends[1], ends[0]]))
put("ckpt_off_too_few_bytes.safetensors", set_off("pos_emb", [ends[0], ends[0] + 8]))
put("ckpt_off_overlap.safetensors", set_off("pos_emb", [0, ends[1] - ends[0]]))


def shift_after_first(h):
    for t in base_t[1:]:
        o = h[t[0]]["data_offsets"]
        h[t[0]]["data_offsets"] = [o[0] + 4, o[1] + 4]


put("ckpt_off_hole.safetensors", variant(shift_after_first, lambda d: d + b"\0" * 4))
put("ckpt_off_negative.safetensors", set_off("tok_emb", [-4, 28]))
put("ckpt_off_fraction.safetensors", set_off("tok_emb", [0, 31.5]))
put("ckpt_off_huge.safetensors", set_off("head.bias", [2**40, 2**40 + 16]))
put("ckpt_off_2p62.safetensors", set_off("head.bias", [2**62, 2**62 + 16]))
put("ckpt_off_one_entry.safetensors", set_off("tok_emb", [0]))
put("ckpt_off_string.safetensors", set_off("tok_emb", "0-32"))


# ------------------------------------------------------------- dtypes
def set_dtype(name, dt):
    return variant(lambda h: h[name].__setitem__("dtype", dt))


put("ckpt_dtype_i32.safetensors", set_dtype("head.weight", "I32"))
put("ckpt_dtype_f16.safetensors", set_dtype("head.weight", "F16"))
put("ckpt_dtype_bf16.safetensors", set_dtype("tok_emb", "BF16"))
put("ckpt_dtype_f64.safetensors", set_dtype("pos_emb", "F64"))
put("ckpt_dtype_number.safetensors", set_dtype("pos_emb", 0))
put("ckpt_dtype_lowercase.safetensors", set_dtype("pos_emb", "f32"))


# ------------------------------------------------------------- shapes
def set_shape(name, shape):
    return variant(lambda h: h[name].__setitem__("shape", shape))


put("ckpt_shape_oversize.safetensors", set_shape("tok_emb", [10**15, 10**15]))
put("ckpt_shape_2p53.safetensors", set_shape("tok_emb", [2**53, 1]))
put("ckpt_shape_negative.safetensors", set_shape("tok_emb", [-2, -4]))
put("ckpt_shape_nine_dims.safetensors", set_shape("tok_emb", [1] * 9))
put("ckpt_shape_string.safetensors", set_shape("tok_emb", "2x4"))
put("ckpt_shape_vs_offsets.safetensors", set_shape("tok_emb", [2, 5]))
# same byte count as the model's, other shape: the file is consistent, the
# model is not
put("ckpt_shape_transposed.safetensors", set_shape("tok_emb", [4, 2]))
put("ckpt_shape_flat.safetensors", set_shape("blocks.0.attn.qkv.weight", [48]))

# ------------------------------------------- config against the tensors
put("ckpt_cfg_block_size.safetensors",
    variant(cfg=dict(BR_CFG, block_size=5, out_size=5)))
put("ckpt_cfg_width.safetensors", variant(cfg=dict(BR_CFG, n_embd=8)))
put("ckpt_cfg_huge_model.safetensors", variant(cfg=dict(BR_CFG, n_embd=4096, n_layer=8)))
put("ckpt_cfg_bad_attn.safetensors", variant(cfg=dict(BR_CFG, attn="quantum")))
put("ckpt_cfg_missing_ffn.safetensors",
    variant(cfg={k: v for k, v in BR_CFG.items() if k != "ffn"}))
put("ckpt_cfg_heads.safetensors", variant(cfg=dict(BR_CFG, n_head=3)))
put("ckpt_cfg_T_limit.safetensors",
    variant(cfg=dict(BR_CFG, attn="boltzmann", block_size=30, out_size=30)))
# a model whose held-out set is empty: its evaluation would score "0 of 0"
put("ckpt_cfg_heldout_zero.safetensors", variant(cfg=dict(BR_CFG, n_heldout=0)))
put("ckpt_cfg_not_json.safetensors",
    variant(lambda h: h["__metadata__"].__setitem__("config", "{task: brackets")))
put("ckpt_cfg_missing.safetensors",
    variant(lambda h: h["__metadata__"].pop("config")))
put("ckpt_cfg_vocab_byte.safetensors",
    variant(tensors=model_tensors(5, 5), cfg=dict(LM_CFG, vocab=[10, 32, 97, 98, 300])))
put("ckpt_cfg_vocab_repeat.safetensors",
    variant(tensors=model_tensors(5, 5), cfg=dict(LM_CFG, vocab=[10, 32, 97, 97, 99])))
missing = [list(t) for t in base_t if t[0] != "head.bias"]
put("ckpt_tensor_missing.safetensors", variant(tensors=missing))
extra = [list(t) for t in base_t] + [["blocks.0.attn.J", "F32", [1, T, T], f32([0.0] * 16)]]
# the checksum of the model's tensors, so that the extra one is what fails
put("ckpt_tensor_extra.safetensors",
    variant(lambda h: h["__metadata__"].__setitem__("checksum",
                                                    base_h["__metadata__"]["checksum"]),
            tensors=extra))

# ------------------------------------------------- checksum and values
flip = bytearray(base_d)
flip[ends[3] + 2] ^= 0x01  # one bit of blocks.0.attn.qkv.weight
put("ckpt_checksum_data_flipped.safetensors", pack(dumps(base_h), bytes(flip)))
put("ckpt_checksum_wrong.safetensors",
    variant(lambda h: h["__metadata__"].__setitem__("checksum", "fnv1a64:0123456789abcdef")))
put("ckpt_checksum_garbage.safetensors",
    variant(lambda h: h["__metadata__"].__setitem__("checksum", "md5:nothing")))
nan = bytearray(base_d)
nan[ends[9] : ends[9] + 4] = struct.pack("<f", float("nan"))  # head.weight[0]
put("ckpt_value_nan.safetensors", pack(dumps(base_h), bytes(nan)))
inf_t = [list(t) for t in base_t]
inf_t[1][3] = f32([float("inf")] + [0.0] * 15)  # pos_emb[0], checksum matching
put("ckpt_value_inf.safetensors", variant(tensors=inf_t))

# finite weights whose logits are not: ln_f's scale overflows F32, so the
# logits are inf and their softmax NaN (eval fails; sample must too)
big_lnf = [list(t) for t in model_tensors(len(LM_VOCAB), len(LM_VOCAB))]
for t in big_lnf:
    if t[0] == "ln_f.weight":
        t[3] = f32([3e38] * C)
put("ckpt_lm_logits_inf.safetensors", variant(tensors=big_lnf, cfg=LM_CFG))

# --------------------------------------------------------------- batches
BIN_IN = [0, 0, 1, 1, 0, 1, 0, 1]
BIN_TG = [-1, -1, 1, 0, -1, 0, -1, 2]


def batch(inputs=BIN_IN, targets=BIN_TG, shape_in=(2, 4), shape_tg=(2, 4), dt_in="I32",
          enc_in=i32, names=("inputs", "targets")):
    ts = [[names[0], dt_in, list(shape_in), enc_in(inputs)]]
    if names[1]:
        ts.append([names[1], "I32", list(shape_tg), i32(targets)])
    return pack(dumps(header(ts, None)), b"".join(t[3] for t in ts))


put("batch_ok.safetensors", batch())
put("batch_token_high.safetensors", batch(inputs=[0, 5, 1, 1, 0, 1, 0, 1]))
put("batch_token_negative.safetensors", batch(inputs=[0, 0, 1, 1, 0, 1, -1, 1]))
put("batch_token_int_max.safetensors", batch(inputs=[2**31 - 1] + BIN_IN[1:]))
put("batch_target_future.safetensors", batch(targets=[-1, 3, 1, 0, -1, 0, -1, 2]))
put("batch_target_self.safetensors", batch(targets=[-1, -1, 2, 0, -1, 0, -1, 2]))
put("batch_target_negative.safetensors", batch(targets=[-1, -1, 1, 0, -1, 0, -7, 2]))
put("batch_target_huge.safetensors", batch(targets=[-1, -1, 1, 2**31 - 1, -1, 0, -1, 2]))
put("batch_T_too_long.safetensors",
    batch(inputs=[0] * 10, targets=[-1] * 10, shape_in=(2, 5), shape_tg=(2, 5)))
put("batch_T_too_short.safetensors",
    batch(inputs=[0] * 6, targets=[-1] * 6, shape_in=(2, 3), shape_tg=(2, 3)))
put("batch_dtype_f32.safetensors", batch(dt_in="F32", enc_in=lambda v: f32(map(float, v))))
put("batch_shapes_differ.safetensors",
    batch(targets=BIN_TG[:4], shape_tg=(1, 4)))
put("batch_no_targets.safetensors", batch(names=("inputs", None)))
put("batch_1d.safetensors", batch(shape_in=(8,), shape_tg=(8,)))
put("batch_zero_rows.safetensors", batch(inputs=[], targets=[], shape_in=(0, 4), shape_tg=(0, 4)))
put("batch_rows_lie.safetensors", batch(shape_in=(2**31, 4)))
put("batch_truncated.safetensors", files["batch_ok.safetensors"][:-5])
# a target out of range at batch row 1, position 2 (flat row 6): for the
# charlm base too (7 is outside its 5 classes)
put("batch_target_row1_pos2.safetensors", batch(targets=[-1, -1, 1, 0, -1, 0, 7, 2]))
put("batch_targets_all_none.safetensors", batch(targets=[-1] * 8))

# ---------------------------------------- couplings: form and band
def ising_tensors(j_name, j_shape, j_vals):
    """The brackets base as a boltzmann model: its tensors with the layer's
    couplings after attn.proj.bias (the model's order)."""
    ts = [list(t) for t in base_t]
    at = [t[0] for t in ts].index("blocks.0.attn.proj.bias") + 1
    ts.insert(at, [j_name, "F32", j_shape, f32(j_vals)])
    return ts


def ising_cfg(**kw):
    c = dict(BR_CFG, attn="boltzmann")
    c.update(kw)
    return c


J_ABS = [0.0] * (T * T)
J_ABS[0 * T + 1] = 0.25  # J_01: distance 1
put("ckpt_ok_relative.safetensors",
    variant(tensors=ising_tensors("blocks.0.attn.J_rel", [1, 2], [0.5, -0.25]),
            cfg=ising_cfg(couplings="relative", band=2)))
put("ckpt_couplings_rel_over_abs.safetensors",
    variant(tensors=ising_tensors("blocks.0.attn.J", [1, T, T], J_ABS),
            cfg=ising_cfg(couplings="relative", band=2)))
put("ckpt_couplings_abs_over_rel.safetensors",
    variant(tensors=ising_tensors("blocks.0.attn.J_rel", [1, 2], [0.5, -0.25]),
            cfg=ising_cfg(couplings="absolute", band=2)))
J_FAR = list(J_ABS)
J_FAR[0 * T + 3] = 0.5  # J_03: distance 3, beyond a band of 2
put("ckpt_band_nonzero_beyond.safetensors",
    variant(tensors=ising_tensors("blocks.0.attn.J", [1, T, T], J_FAR), cfg=ising_cfg(band=2)))
put("ckpt_band_too_wide.safetensors",
    variant(tensors=ising_tensors("blocks.0.attn.J", [1, T, T], J_ABS), cfg=ising_cfg(band=T)))
put("ckpt_band_softmax.safetensors", variant(cfg=dict(BR_CFG, band=2)))
put("ckpt_couplings_unknown.safetensors",
    variant(tensors=ising_tensors("blocks.0.attn.J", [1, T, T], J_ABS),
            cfg=ising_cfg(couplings="diagonal")))
put("ckpt_relative_shape.safetensors",
    variant(tensors=ising_tensors("blocks.0.attn.J_rel", [1, 3], [0.5, -0.25, 0.1]),
            cfg=ising_cfg(couplings="relative", band=2)))

# ------------------------------------------------------------ text data
GOOD = "abc ab\nca bc\n" * 8  # 104 bytes of the charlm base's vocabulary
put("text_ok.txt", GOOD)
put("text_ok_utf8.txt", "caf\u00e9 na\u00efve \u20ac5 \U0001F600\n" * 6)


def text_with(bad, at=40):
    g = GOOD.encode()
    return g[:at] + bad + g[at:]


put("text_nul.txt", text_with(b"\x00"))
put("text_stray_continuation.txt", text_with(b"\x80"))
put("text_overlong_2.txt", text_with(b"\xc0\xaf"))
put("text_overlong_3.txt", text_with(b"\xe0\x80\xaf"))
put("text_overlong_4.txt", text_with(b"\xf0\x80\x80\xaf"))
put("text_surrogate.txt", text_with(b"\xed\xa0\x80"))
put("text_above_max.txt", text_with(b"\xf4\x90\x80\x80"))
put("text_byte_f8.txt", text_with(b"\xf8\x88\x80\x80\x80"))
put("text_byte_ff.txt", text_with(b"\xff"))
put("text_truncated_mid.txt", text_with(b"\xe2\x82"))
put("text_truncated_eof.txt", GOOD.encode() + b"\xf0\x9f\x98")
put("text_latin1.txt", "na\u00efve caf\u00e9 " .encode("latin-1") * 8)
put("text_utf16.txt", ("hello world\n" * 6).encode("utf-16"))
put("text_empty.txt", b"")
put("text_short.txt", "abc ab\nca bc\nabc ab\n")

os.makedirs(OUT, exist_ok=True)
for name in sorted(files):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(files[name])
print("%d files in %s" % (len(files), OUT))
