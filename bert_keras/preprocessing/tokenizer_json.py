"""Hugging Face's tokenizer.json for BERT WordPiece: read its vocabulary and casing, and write one.

A folder that transformers 5 saves (`save_pretrained`) holds `tokenizer.json` and no `vocab.txt`. The file is
the `tokenizers` library's serialised pipeline; for BERT it is:
  normalizer      BertNormalizer {clean_text, handle_chinese_chars, strip_accents, lowercase}
  pre_tokenizer   BertPreTokenizer
  model           WordPiece {vocab: {token: id}, unk_token "[UNK]", continuing_subword_prefix "##",
                  max_input_chars_per_word 100}
  post_processor  TemplateProcessing "[CLS] $A [SEP]" / "[CLS] $A [SEP] $B:1 [SEP]:1"
  decoder         WordPiece "##"
BertPreprocessor reproduces exactly this pipeline with one switch, `lower_case` (lower-case AND strip accents,
google-research's do_lower_case), so a file whose `lowercase` and `strip_accents` disagree, or that is not a
BERT WordPiece tokenizer at all (BPE, Unigram), is refused rather than read into different ids.
Nothing here imports `tokenizers` or `transformers`: the file is plain JSON, read and written with `json`.
"""

from __future__ import annotations

import json
import os

from bert_keras.preprocessing.vocab import SPECIAL_TOKENS, load_vocab, vocab_is_cased

_PREFIX = "##"
_UNK = "[UNK]"
_MAX_INPUT_CHARS_PER_WORD = 100      # what BertPreprocessor's WordpieceTokenizer does (and HF's default)


def read_tokenizer_json(path: str) -> tuple[list[str], bool]:
    """The vocabulary (in id order) and casing of a BERT WordPiece `tokenizer.json`.

    Args:
        path: str. A `tokenizer.json` file (as `tokenizers` and transformers' `save_pretrained` write it).

    Returns:
        (tokens, lower_case): list of str, the WordPiece vocabulary with token i at index i; bool, True when
        the normalizer lower-cases and strips accents (an uncased model), False when it does neither.

    Raises:
        FileNotFoundError: `path` does not exist.
        ValueError: the file is not JSON, its model is not WordPiece (BPE, Unigram, ...), its ids have gaps,
            its prefix is not "##" or its unknown token not "[UNK]", its normalizer is not BERT's, or it
            lower-cases without stripping accents (or the reverse), which BertPreprocessor cannot reproduce.

    Example:
        >>> from bert_keras.preprocessing.tokenizer_json import read_tokenizer_json
        >>> folder = bert_keras.loading.bundled_minilm_folder()
        >>> tokens, lower_case = read_tokenizer_json(os.path.join(folder, "tokenizer.json"))
        >>> len(tokens), tokens[101], lower_case
        (30522, '[CLS]', True)
    """
    if not os.path.exists(path):
        raise FileNotFoundError(f"tokenizer file {path} not found (a Hugging Face tokenizer.json)")
    try:
        with open(path, encoding="utf-8") as f:
            spec = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path} is not a JSON tokenizer file: {e}") from None
    if not isinstance(spec, dict) or not isinstance(spec.get("model"), dict):
        raise ValueError(f"{path} has no tokenizer model: not a Hugging Face tokenizer.json")
    model = spec["model"]
    kind = model.get("type") or ("WordPiece" if "continuing_subword_prefix" in model and "merges" not in model
                                 else None)
    if kind != "WordPiece":
        raise ValueError(f"{path} is a {kind or 'unknown'} tokenizer: only BERT WordPiece tokenizers are supported")
    if model.get("continuing_subword_prefix", _PREFIX) != _PREFIX:
        raise ValueError(f"{path}: WordPiece continuing_subword_prefix is {model['continuing_subword_prefix']!r}; "
                         f"BERT's (and BertPreprocessor's) is {_PREFIX!r}")
    if model.get("unk_token", _UNK) != _UNK:
        raise ValueError(f"{path}: the unknown token is {model['unk_token']!r}; BERT's (and BertPreprocessor's) "
                         f"is {_UNK!r}")
    limit = model.get("max_input_chars_per_word", _MAX_INPUT_CHARS_PER_WORD)
    if limit != _MAX_INPUT_CHARS_PER_WORD:
        raise ValueError(f"{path}: max_input_chars_per_word is {limit}; BertPreprocessor makes words of more than "
                         f"{_MAX_INPUT_CHARS_PER_WORD} characters [UNK], so long words would get other ids")
    tokens = _tokens_in_id_order(model.get("vocab"), path)
    _check_added_tokens(spec.get("added_tokens") or [], tokens, path)
    _check_pre_tokenizer(spec.get("pre_tokenizer"), path)
    return tokens, _casing(spec.get("normalizer"), path)


def write_tokenizer_json(vocab, lower_case: bool | None, path: str) -> str:
    """Writes a BERT WordPiece `tokenizer.json` that tokenizes as BertPreprocessor does (atomically).

    The file is what transformers' `BertTokenizer(vocab, do_lower_case=...)` saves: `tokenizers.Tokenizer
    .from_file` and transformers' `AutoTokenizer` / `BertTokenizerFast` load it and give BertPreprocessor's ids.

    Args:
        vocab: str or list of str. A `vocab.txt` path, or the tokens in id order.
        lower_case: bool or None. Lower-case and strip accents (uncased); None reads it from the vocabulary.
        path: str. The file to write (usually `<folder>/tokenizer.json`).

    Returns:
        str: `path`.

    Example:
        >>> from bert_keras.preprocessing.tokenizer_json import read_tokenizer_json, write_tokenizer_json
        >>> path = write_tokenizer_json(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello"], True,
        ...                             "tok/tokenizer.json")
        >>> read_tokenizer_json(path)
        (['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', 'hello'], True)
    """
    from bert_keras.atomic import atomic_file
    tokens = load_vocab(vocab)
    if lower_case is None:
        lower_case = not vocab_is_cased(tokens)
    lower_case = bool(lower_case)
    ids = {token: i for i, token in enumerate(tokens)}

    def special(token):
        return {"SpecialToken": {"id": token, "type_id": 0}}

    spec = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": ids[t], "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for t in sorted(SPECIAL_TOKENS, key=ids.get)],
        "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                       "strip_accents": None, "lowercase": lower_case},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [special("[CLS]"), {"Sequence": {"id": "A", "type_id": 0}}, special("[SEP]")],
            "pair": [special("[CLS]"), {"Sequence": {"id": "A", "type_id": 0}}, special("[SEP]"),
                     {"Sequence": {"id": "B", "type_id": 1}}, {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
            "special_tokens": {t: {"id": t, "ids": [ids[t]], "tokens": [t]} for t in ("[CLS]", "[SEP]")},
        },
        "decoder": {"type": "WordPiece", "prefix": _PREFIX, "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": _UNK, "continuing_subword_prefix": _PREFIX,
                  "max_input_chars_per_word": _MAX_INPUT_CHARS_PER_WORD, "vocab": ids},
    }
    with atomic_file(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        json.dump(spec, f, ensure_ascii=False, indent=2)
        f.write("\n")
    return path


def write_tokenizer_config(lower_case: bool, path: str, model_max_length: int = 512) -> str:
    """Writes the `tokenizer_config.json` transformers saves beside a BERT `tokenizer.json` (atomically).

    transformers' `AutoTokenizer` reads the tokenizer class, the special tokens and `model_max_length` from it
    (without it, `model_max_length` is unbounded and pipelines do not truncate).

    Args:
        lower_case: bool. The casing (do_lower_case), as in the tokenizer.json beside it.
        path: str. The file to write (usually `<folder>/tokenizer_config.json`).
        model_max_length: int. The longest input, in tokens (the model's max_position_embeddings).

    Returns:
        str: `path`.

    Example:
        >>> import json
        >>> from bert_keras.preprocessing.tokenizer_json import write_tokenizer_config
        >>> path = write_tokenizer_config(True, "tok/tokenizer_config.json")
        >>> json.load(open(path))["tokenizer_class"]
        'BertTokenizer'
    """
    from bert_keras.atomic import atomic_file
    config = {"tokenizer_class": "BertTokenizer", "do_lower_case": bool(lower_case), "strip_accents": None,
              "tokenize_chinese_chars": True, "unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
              "cls_token": "[CLS]", "mask_token": "[MASK]", "model_max_length": int(model_max_length)}
    with atomic_file(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    return path


def _tokens_in_id_order(vocab, path: str) -> list[str]:
    """{token: id} (or [[token, score]] ...) -> tokens, checking the ids are exactly 0..n-1."""
    if not isinstance(vocab, dict) or not vocab:
        raise ValueError(f"{path}: the WordPiece model has no vocabulary ({{token: id}})")
    tokens = [None] * len(vocab)
    for token, i in vocab.items():
        if not isinstance(i, int) or not 0 <= i < len(tokens) or tokens[i] is not None:
            raise ValueError(f"{path}: the WordPiece ids are not 0..{len(tokens) - 1} without gaps or repeats "
                             f"({token!r} has id {i!r})")
        tokens[i] = token
    return tokens


def _check_added_tokens(added: list, tokens: list[str], path: str) -> None:
    """Tokens added on top of the WordPiece vocabulary (ids past it) would be split off by HF, not by us."""
    outside = [a.get("content") for a in added
               if not (isinstance(a.get("id"), int) and a["id"] < len(tokens) and tokens[a["id"]] == a.get("content"))]
    if outside:
        raise ValueError(f"{path} adds tokens outside its WordPiece vocabulary ({outside[:5]}): BertPreprocessor "
                         "tokenizes with the WordPiece vocabulary only; put them in the vocabulary instead")


def _check_pre_tokenizer(pre, path: str) -> None:
    """BERT's split (whitespace, then punctuation): BertPreTokenizer, possibly alone in a Sequence."""
    while isinstance(pre, dict) and pre.get("type") == "Sequence" and len(pre.get("pretokenizers") or []) == 1:
        pre = pre["pretokenizers"][0]
    kind = pre.get("type") if isinstance(pre, dict) else pre
    if kind != "BertPreTokenizer":
        raise ValueError(f"{path}: the pre-tokenizer is {kind or 'missing'}, not BertPreTokenizer: only BERT "
                         "WordPiece tokenizers are supported")


def _casing(normalizer, path: str) -> bool:
    """lower_case from a BertNormalizer (strip_accents null follows lowercase, as in HF), possibly inside a
    Sequence with Lowercase / NFD + StripAccents steps; refuses what BertPreprocessor cannot reproduce."""
    steps = normalizer.get("normalizers", []) if isinstance(normalizer, dict) and \
        normalizer.get("type") == "Sequence" else [normalizer]
    kinds = [s.get("type") if isinstance(s, dict) else None for s in steps]
    if kinds.count("BertNormalizer") != 1 or set(kinds) - {"BertNormalizer", "Lowercase", "NFD", "StripAccents"}:
        raise ValueError(f"{path}: the normalizer is {kinds if len(kinds) > 1 else kinds[0] or 'missing'}, not "
                         "BertNormalizer: only BERT WordPiece tokenizers are supported")
    bert = steps[kinds.index("BertNormalizer")]
    if not bert.get("clean_text", True) or not bert.get("handle_chinese_chars", True):
        raise ValueError(f"{path}: BertNormalizer with clean_text or handle_chinese_chars off; BertPreprocessor "
                         "always cleans text and splits Chinese characters, so ids would differ")
    lowercase = bool(bert.get("lowercase", True)) or "Lowercase" in kinds
    strip = bert.get("strip_accents")
    strip = bool(bert.get("lowercase", True)) if strip is None else bool(strip)
    if "StripAccents" in kinds:
        if "NFD" not in kinds[:kinds.index("StripAccents")] and not strip:
            raise ValueError(f"{path}: StripAccents without NFD before it: BertPreprocessor cannot reproduce it")
        strip = True
    elif "NFD" in kinds and not strip:
        raise ValueError(f"{path}: NFD without stripping accents: BertPreprocessor cannot reproduce it")
    if lowercase != strip:
        done, undone = ("lower-cases", "strip accents") if lowercase else ("strips accents", "lower-case")
        raise ValueError(f"{path}: the normalizer {done} but does not {undone}; BertPreprocessor's lower_case does "
                         "both or neither (google-research's do_lower_case), so ids would differ. Re-save the "
                         "tokenizer with strip_accents equal to lowercase (or null)")
    return lowercase
