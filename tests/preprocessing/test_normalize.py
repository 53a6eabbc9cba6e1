import unicodedata

from bert_keras.preprocessing.normalize import PUNCTUATION_AFTER_ACCENT_STRIPPING


def _is_punctuation(ch):      # google-research tokenization.py's _is_punctuation
    cp = ord(ch)
    return 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126 or \
        unicodedata.category(ch).startswith("P")


def test_the_characters_that_become_punctuation_after_accent_stripping_are_exactly_those_listed():
    derived = set()
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        ch = chr(cp)
        stripped = "".join(c for c in unicodedata.normalize("NFD", ch) if unicodedata.category(c) != "Mn")
        if stripped != ch and not _is_punctuation(ch) and any(_is_punctuation(c) for c in stripped):
            derived.add(cp)
    listed = {int(x, 16) for x in PUNCTUATION_AFTER_ACCENT_STRIPPING.replace("\\x{", " ").replace("}", "").split()}
    assert derived == listed
