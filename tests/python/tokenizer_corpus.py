# The strings fp8kit's tokenizer is compared on, and the text the test tokenizers are trained on.
# CORPUS covers ASCII prose, accented Latin, Greek, Cyrillic, CJK, Arabic, Devanagari, emoji (with
# ZWJ sequences and skin tones), code, whitespace runs (spaces, tabs, \r\n, many newlines, Unicode
# spaces), long digit runs, contractions in every case (and the Unicode case folds of 's' and 'k'),
# combining marks, NFC/NFD pairs and the added tokens of tokenizer_families.py.
import builtins
import random
import collections
import json
import os
import re
import string
import textwrap

CORPUS = [
    "Hello world",
    "Hello, world! How are you today?",
    " leading space",
    "  two leading spaces and trailing  ",
    "The quick brown fox jumps over the lazy dog.",
    "I'm sure they'll say we've done it, isn't it? She's here, he'd go, I'LL GO, YOU'RE, WE'VE, I'M, HE'D.",
    "don't DON'T Don'T",
    "Caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00fcber \u00e5ngstr\u00f6m \u00e7a ni\u00f1o \u0153uvre",
    "Cafe\u0301 (e + combining acute) versus Caf\u00e9",
    "\u1e9b\u0323 \u2126 \u212b \uff21\uff22\uff23 \ufb01 \u2460",
    "\u039a\u03b1\u03bb\u03b7\u03bc\u03ad\u03c1\u03b1 \u03ba\u03cc\u03c3\u03bc\u03b5 \u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440!",
    "\u4f60\u597d\uff0c\u4e16\u754c\uff01\u4eca\u5929\u5929\u6c14\u5f88\u597d\u3002",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3067\u3059\u3002\u30ab\u30bf\u30ab\u30ca\u3068\u3072\u3089\u304c\u306a",
    "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8\uc785\ub2c8\ub2e4",
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
    "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e",
    "Emoji: \U0001f600\U0001f680\U0001f44d\U0001f3fd \U0001f468\u200d\U0001f469\u200d\U0001f467 \u2764\ufe0f \U0001f1fa\U0001f1f8",
    "def f(x):\n    return x ** 2  # square\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i] * b[i];\n}\n",
    "if x != y && z >= 3 || !flag { println!(\"{:?}\", v); }",
    "<html><body class=\"main\">&nbsp;&amp;</body></html>",
    "tabs\tand\t\ttabs\t\t\t",
    "windows\r\nline\r\nendings\r\n\r\n",
    "many\n\n\n\n\n\nnewlines\n\n",
    "spaces          in          the          middle",
    "          ",
    "\n",
    " ",
    "\t",
    "\u00a0non-breaking\u2003em space\u3000ideographic\u2009thin\u180emongolian vowel separator",
    "1234567890 12 123 1234 12345 3.14159 -42 1e10 0x1F 1,000,000",
    "9876543210987654321098765432109876543210",
    "\u0661\u0662\u0663 \u0967\u0968\u0969 \u2162 \u00bd \u00b2",
    "'s 'S '\u017f 'K '\u212a 'T 'll 'LL 'Ll",
    "a\u0301\u0302\u0303 z\u0351\u0352",
    "Replacement \ufffd char and zero\u200bwidth and bidi \u202eabc\u202c",
    "<|endoftext|>",
    "Text before<|endoftext|>text after",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>",
    "<s>[INST] Hello [/INST] Hi</s>",
    "<s> spaced </s> <unk>",
    "A <tool_call>{\"name\": \"f\"}</tool_call> B",
    "say hello world twice: hello world!",
    "masked   [MASK]   word and a[MASK]b",
    "word words sword word. (word) wordy",
    "the same word repeated repeated repeated repeated repeated repeated",
    "MiXeD CaSe WoRdS AND UPPERCASE and lowercase",
    "email@example.com https://example.org/path?q=1&r=2#frag",
    "\u00bfQu\u00e9? \u00a1S\u00ed! \u00ab guillemets \u00bb \u201cquotes\u201d \u2018single\u2019 \u2014 dash \u2026",
    "\x00 nul and \x01 control \x7f del",
    "",
]


# Pieces that random_texts() strings together: each kind of character the split patterns treat
# differently, Unicode spaces and line breaks, contractions with Unicode case folds, and the
# added tokens and vocabulary markers of every family.
PIECES = (list("abcxyzABCXYZ0123456789 '\"!?.,;:-_()[]{}<>|/\\@#$%^&*+=~`")
          + [" ", "  ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2009", "\u180e", "\u200b", "\u2028",
             "\x0b", "\x0c", "\x85"]
          + list("\u00e9\u00e8\u00f1\u00fc\u00df\u00f8\u00e5\u00e7\u00c9\u00d1") + ["e\u0301", "\u0301", "\u0308"]
          + list("\u4e2d\u6587\u65e5\u672c\u8a9e\ud55c\uad6d\uc5b4\u3072\u3089\u30ab\u30bf")
          + ["\U0001f600", "\U0001f44d\U0001f3fd", "\u200d", "\ufe0f", "\U0001f1fa\U0001f1f8"]
          + list("\u0660\u0661\u096a\u096b\u2162\u00bd\u00b2")
          + ["'s", "'S", "'ll", "'LL", "'\u017f", "'\u212a", "'re", "'ve", "'d", "'m", "'t"]
          + ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<s>", "</s>", "<unk>", "[MASK]", "word", "hello world",
             "<tool_call>", "<|begin_of_text|>", "<|eot_id|>", "\u2581", "\u0120", "<0x41>"])


def random_texts(count=300, seed=1234):
    """Strings of 0-40 random PIECES (a fixed seed: the same strings every run)."""
    rng = random.Random(seed)
    return ["".join(rng.choice(PIECES) for _ in range(rng.randint(0, 40))) for _ in range(count)]


def long_runs():
    """Long runs of one kind of character: the split patterns' backtracking (\\s+(?!\\S)) and
    BPE over long words."""
    return [" " * 20000 + "x", "a" + "\r\n" * 5000 + " b" + "\t " * 3000 + "z", "7" * 10000, "!?" * 5000,
            "ab" * 5000, "\u4e00" * 5000, "\U0001f600" * 2000, "\n" * 10000]


def training_text():
    """Deterministic training lines: the corpus, stdlib docstrings and character runs."""
    lines = list(CORPUS) * 3
    for module in (builtins, collections, json, os, re, string, textwrap):
        for name in sorted(dir(module)):
            doc = getattr(getattr(module, name), "__doc__", None)
            if isinstance(doc, str):
                lines.extend(doc.splitlines())
    lines.append(string.printable)
    lines.append("".join(chr(c) for c in range(0x4E00, 0x4E00 + 300)))
    return lines


def joined_corpus():
    """All strings in one text, one per line, the way a document reaches eval."""
    return "\n".join(CORPUS)
