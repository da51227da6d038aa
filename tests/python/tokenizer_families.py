# Small tokenizer.json files of each family fp8kit's tokenizer serves, trained here with the
# `tokenizers` package on the corpus of tokenizer_corpus.py: byte-level BPE with the split
# patterns of GPT-2, Llama-3 (ignore_merges), Qwen2 (NFC), Mistral-Nemo and SmolLM (single
# digits), and SentencePiece-style BPE with byte fallback as Llama-2 (Prepend + Replace
# normalizer) and Mistral (Metaspace pre-tokenizer) ship it; and variants of two of them (a prefix
# space, Metaspace without one). Used by test_tokenizer_interop.py and bench/peers/tokenizer_hf.py.
import json

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")
# Mistral-Nemo's (Tekken) pattern: case classes of letters, marks.
NEMO_PATTERN = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
                r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def _byte_level(pre, normalizer, post, specials, vocab_size, ignore_merges=False):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = post
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    return tok, trainer


def _sentencepiece(normalizer, pre, decoder, vocab_size, limit_alphabet):
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre
    tok.decoder = decoder
    bytes_ = [f"<0x{b:02X}>" for b in range(256)]
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<unk>", "<s>", "</s>"] + bytes_,
                                  limit_alphabet=limit_alphabet, show_progress=False)
    return tok, trainer


def _spm_decoder():
    return decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                              decoders.Strip(" ", 1, 0)])


def build(family, training_text, vocab_size=None):
    """The tokenizer.json text of `family` trained on `training_text` (a list of strings)."""
    variants = {"gpt2_prefix_space": ("gpt2", lambda j: j["pre_tokenizer"].update(add_prefix_space=True)),
                "metaspace_never": ("metaspace_split",
                                    lambda j: (j["pre_tokenizer"].update(prepend_scheme="never"),
                                               j["decoder"].update(prepend_scheme="never")))}
    if family in variants:
        # The same trained model with another option of its pipeline.
        base, change = variants[family]
        j = json.loads(build(base, training_text, vocab_size))
        change(j)
        return json.dumps(j)
    if family == "gpt2":
        tok, trainer = _byte_level(pre_tokenizers.ByteLevel(add_prefix_space=False), None,
                                   processors.ByteLevel(trim_offsets=False), ["<|endoftext|>"], 1200)
    elif family == "llama3":
        pre = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(LLAMA3_PATTERN), "isolated"),
                                       pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        post = processors.Sequence([processors.ByteLevel(trim_offsets=False),
                                    processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                                                  special_tokens=[("<|begin_of_text|>", 0)])])
        tok, trainer = _byte_level(pre, None, post, ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>",
                                                     "<|start_header_id|>", "<|end_header_id|>"], 1500,
                                   ignore_merges=True)
    elif family == "qwen2":
        pre = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(QWEN2_PATTERN), "isolated"),
                                       pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        tok, trainer = _byte_level(pre, normalizers.NFC(), processors.ByteLevel(trim_offsets=False),
                                   ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], 1500)
    elif family == "nemo":
        pre = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(NEMO_PATTERN), "isolated"),
                                       pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        post = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
        tok, trainer = _byte_level(pre, None, post, ["<unk>", "<s>", "</s>"], 1500)
    elif family == "smollm":
        pre = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                       pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
        tok, trainer = _byte_level(pre, None, processors.ByteLevel(trim_offsets=False),
                                   ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], 1200)
    elif family == "llama2":
        norm = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
        tok, trainer = _sentencepiece(norm, None, _spm_decoder(), 1200, 150)
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    elif family == "mistral":
        pre = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
        tok, trainer = _sentencepiece(None, pre, _spm_decoder(), 1200, 150)
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    elif family == "metaspace_split":
        pre = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
        tok, trainer = _sentencepiece(None, pre, decoders.Metaspace(replacement="▁", prepend_scheme="always"), 1200, 150)
        tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", special_tokens=[("<s>", 1), ("</s>", 2)])
    else:
        raise ValueError(family)
    if vocab_size is not None:
        trainer.vocab_size = vocab_size
    tok.train_from_iterator(training_text, trainer=trainer)
    j = json.loads(tok.to_str())
    if family in ("llama2", "mistral", "metaspace_split"):
        # The <0xNN> byte tokens are ordinary vocabulary entries in SentencePiece models, not added tokens.
        j["added_tokens"] = [t for t in j["added_tokens"] if not t["content"].startswith("<0x")]
    return _with_extra_added_tokens(family, j)


def _with_extra_added_tokens(family, j):
    """Added tokens with each flag: a non-special token matched after normalization, lstrip and
    rstrip, single_word, one that is also in the vocabulary."""
    tok = Tokenizer.from_str(json.dumps(j))
    from tokenizers import AddedToken
    tok.add_tokens([AddedToken("<tool_call>", special=False, normalized=False),
                    AddedToken("hello world", special=False, normalized=True),
                    AddedToken("[MASK]", special=True, lstrip=True, rstrip=True, normalized=False),
                    AddedToken("word", special=False, single_word=True, normalized=False)])
    if family == "llama2":
        tok.add_special_tokens([AddedToken("<pad>", special=True, normalized=False)])
    return tok.to_str()
