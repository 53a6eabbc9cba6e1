"""CoNLL-2003 reader."""

import collections

import pytest

from bert_keras.data import CONLL2003_LABELS, DataFormatError, iob1_to_iob2, read_conll2003

INLINE = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER
"""


def test_inline(tmp_path):
    path = tmp_path / "x.txt"
    path.write_text(INLINE)
    sentences = read_conll2003(path)
    assert [s.tokens for s in sentences] == [("EU", "rejects", "German", "call"), ("Peter", "Blackburn")]
    assert sentences[0].tags == ("B-ORG", "O", "B-MISC", "O")
    assert sentences[0].pos_tags[0] == "NNP" and sentences[1].chunk_tags == ("B-NP", "I-NP")
    assert CONLL2003_LABELS[0] == "O" and len(CONLL2003_LABELS) == 9


def test_malformed(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("EU NNP B-NP B-ORG\nrejects VBZ B-VP\n")
    with pytest.raises(DataFormatError, match=r"bad\.txt, line 2: expected 4 fields"):
        read_conll2003(path)
    path.write_text("EU NNP B-NP B-XYZ\n")
    with pytest.raises(DataFormatError, match=r"line 1: unknown NER tag 'B-XYZ'"):
        read_conll2003(path)
    assert read_conll2003(path, labels=None)[0].tags == ("B-XYZ",)


def test_iob1_to_iob2():
    assert iob1_to_iob2(["I-PER", "I-PER", "B-PER", "O", "I-LOC", "I-ORG"]) == \
        ["B-PER", "I-PER", "B-PER", "O", "B-LOC", "B-ORG"]


@pytest.mark.parametrize("split,sentences,tokens,entities", [
    ("train", 14041, 203621, {"LOC": 7140, "MISC": 3438, "ORG": 6321, "PER": 6600}),
    ("valid", 3250, 51362, {"LOC": 1837, "MISC": 922, "ORG": 1341, "PER": 1842}),
])
def test_real(shared_data, split, sentences, tokens, entities):
    path = shared_data / "conll2003" / f"{split}.txt"
    data = read_conll2003(path)
    assert len(data) == sentences
    assert sum(len(s.tokens) for s in data) == tokens
    assert dict(collections.Counter(t[2:] for s in data for t in s.tags if t.startswith("B-"))) == entities
    assert path.read_text().count("-DOCSTART-") == {"train": 946, "valid": 216}[split]
    assert all(iob1_to_iob2(list(s.tags)) == list(s.tags) for s in data)  # already IOB2
