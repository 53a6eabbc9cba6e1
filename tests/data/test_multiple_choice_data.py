"""Multiple-choice readers: SWAG csv layouts and OpenBookQA / ARC / CommonsenseQA jsonl."""

import collections
import json

import pytest

from bert_keras.data import ChoiceExample, DataFormatError, read_choice_jsonl, read_swag

REGULAR = (",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label\n"
           '0,vid,18313,Students lower their eyes nervously. She,Students lower their eyes nervously.,She,gold,'
           '"pats her shoulder, then saunters toward someone.",turns with two students.,walks slowly towards someone.,'
           "wheels around as her dog thunders out.,2")  # no final newline, like the shared copy
FULL = ("video-id,fold-ind,startphrase,gold-ending,distractor-0,distractor-1,distractor-2,distractor-3,gold-source,"
        "gold-type,distractor-0-type,distractor-1-type,distractor-2-type,distractor-3-type,sent1,sent2\n"
        "vid,7,S1 He,gold end.,d0.,,d2.,d3.,gold0-orig,pos,unl,n/a,unl,unl,S1,He\n")


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_swag_regular_inline(tmp_path):
    path = _write(tmp_path, "val.csv", REGULAR)
    (example,) = read_swag(path)
    assert example == ChoiceExample("18313", "Students lower their eyes nervously.", [
        "She pats her shoulder, then saunters toward someone.", "She turns with two students.",
        "She walks slowly towards someone.", "She wheels around as her dog thunders out."], 2)
    (example,) = read_swag(path, pair="startphrase")
    assert example.context == "Students lower their eyes nervously. She"
    assert example.endings[2] == "walks slowly towards someone."
    test = _write(tmp_path, "test.csv", REGULAR.replace(",label\n", "\n").rsplit(",", 1)[0])
    assert read_swag(test)[0].label is None


def test_swag_full_inline(tmp_path):
    path = _write(tmp_path, "val_full.csv", FULL)
    (example,) = read_swag(path)  # empty distractor-1 is skipped, so distractor-3 fills in
    assert example == ChoiceExample("7", "S1", ["He gold end.", "He d0.", "He d2.", "He d3."], 0)
    shuffled = read_swag(path, shuffle_seed=3)[0]
    assert shuffled.endings[shuffled.label] == "He gold end." and sorted(shuffled.endings) == sorted(example.endings)
    assert read_swag(path, shuffle_seed=3) == read_swag(path, shuffle_seed=3)


def test_swag_malformed(tmp_path):
    with pytest.raises(DataFormatError, match=r"bad\.csv, line 2: expected 12 columns, found 3"):
        read_swag(_write(tmp_path, "bad.csv", REGULAR.split("\n")[0] + "\n1,2,3\n"))
    with pytest.raises(DataFormatError, match=r"line 2: label '7' is not 0-3"):
        read_swag(_write(tmp_path, "bad_label.csv", REGULAR[:-1] + "7"))
    with pytest.raises(DataFormatError, match=r"line 1: SWAG header lacks columns"):
        read_swag(_write(tmp_path, "bad_header.csv", "a,b\n1,2\n"))
    with pytest.raises(DataFormatError, match=r"line 2: only 2 non-empty distractors"):
        read_swag(_write(tmp_path, "few.csv", FULL.replace("d3.", "")))


def test_swag_real(shared_data):
    regular = read_swag(shared_data / "swag" / "val.csv")
    assert len(regular) == 91
    assert collections.Counter(e.label for e in regular) == {0: 20, 1: 19, 2: 30, 3: 22}
    assert regular[0].context == "Students lower their eyes nervously."
    assert regular[0].endings[regular[0].label] == "She walks slowly towards someone."
    full = read_swag(shared_data / "swag" / "swag_sample_val.csv")
    assert len(full) == 20
    assert full[-1].endings[0].endswith("Then, the camel stops and the woman gets down from the camel.")
    for reg, ful in zip(regular, full):  # the regular rows' choices are exactly gold + the first 3 distractors
        assert reg.id == ful.id and reg.context == ful.context
        assert reg.endings[reg.label] == ful.endings[0]
        assert sorted(reg.endings) == sorted(ful.endings)
    test = read_swag(shared_data / "swag" / "swag_sample_test.csv")
    assert len(test) == 40 and all(e.label is None and len(e.endings) == 4 for e in test)


def test_jsonl_inline(tmp_path):
    lines = [
        {"id": "1", "question": {"stem": "S?", "choices": [{"text": "a", "label": "A"}, {"text": "b", "label": "B"},
                                                           {"text": "c", "label": "C"}, {"text": "d", "label": "D"}]},
         "answerKey": "C"},
        {"id": "2", "question": {"stem": "N?", "choices": [{"text": t, "label": str(i)} for i, t in
                                                           enumerate("wxyz", 1)]}, "answerKey": "2"},
        {"id": "3", "question": {"stem": "T?", "choices": [{"text": t, "label": l} for t, l in zip("pqr", "ABC")]},
         "answerKey": "A"},
        {"id": "4", "question": {"stem": "U?", "choices": [{"text": "a", "label": "A"}]}},
    ]
    path = _write(tmp_path, "x.jsonl", "\n".join(json.dumps(line) for line in lines) + "\n")
    examples = read_choice_jsonl(path)
    assert [(e.id, e.label) for e in examples] == [("1", 2), ("2", 1), ("3", 0), ("4", None)]
    assert examples[0] == ChoiceExample("1", "S?", ["a", "b", "c", "d"], 2)
    assert [e.id for e in read_choice_jsonl(path, num_choices=4)] == ["1", "2"]


def test_jsonl_malformed(tmp_path):
    good = '{"id": "1", "question": {"stem": "S", "choices": [{"text": "a", "label": "A"}]}, "answerKey": "A"}'
    with pytest.raises(DataFormatError, match=r"bad\.jsonl, line 2: invalid JSON"):
        read_choice_jsonl(_write(tmp_path, "bad.jsonl", good + "\n{oops\n"))
    with pytest.raises(DataFormatError, match=r"line 1: answerKey 'B' is not among the choice labels \['A'\]"):
        read_choice_jsonl(_write(tmp_path, "key.jsonl", good.replace('"answerKey": "A"', '"answerKey": "B"')))
    with pytest.raises(DataFormatError, match=r"line 1: missing or malformed field 'stem'"):
        read_choice_jsonl(_write(tmp_path, "stem.jsonl", good.replace('"stem"', '"steam"')))


@pytest.mark.parametrize("path,count,four_choice,labels", [
    ("openbookqa/train.jsonl", 4957, 4957, [1378, 1212, 1146, 1221]),
    ("openbookqa/dev.jsonl", 500, 500, [126, 138, 110, 126]),
    ("arc/ARC-Easy/ARC-Easy-Train.jsonl", 2251, 2241, None),
    ("arc/ARC-Easy/ARC-Easy-Dev.jsonl", 570, 567, None),
    ("arc/ARC-Challenge/ARC-Challenge-Train.jsonl", 1119, 1117, None),
    ("arc/ARC-Challenge/ARC-Challenge-Dev.jsonl", 299, 295, None),
    ("commonsenseqa/train_rand_split.jsonl", 9741, 0, [1909, 1973, 1946, 1985, 1928]),
    ("commonsenseqa/dev_rand_split.jsonl", 1221, 0, [239, 255, 241, 251, 235]),
])
def test_jsonl_real(shared_data, path, count, four_choice, labels):
    examples = read_choice_jsonl(shared_data / path)
    assert len(examples) == count
    four = read_choice_jsonl(shared_data / path, num_choices=4)
    assert len(four) == four_choice and all(len(e.endings) == 4 and 0 <= e.label < 4 for e in four)
    if labels is not None:
        counts = collections.Counter(e.label for e in examples)
        assert [counts[i] for i in range(len(labels))] == labels
    if path == "openbookqa/train.jsonl":
        assert examples[0].id == "7-980" and examples[0].context == "The sun is responsible for" and examples[0].label == 3
