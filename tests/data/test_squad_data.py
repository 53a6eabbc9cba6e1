"""SQuAD JSON reader."""

import json

import pytest

from bert_keras.data import DataFormatError, answer_offset_mismatches, hold_out_articles, load_squad_json, read_squad

TINY = {"version": "v2.0", "data": [
    {"title": "A", "paragraphs": [{"context": "Denver Broncos won Super Bowl 50.", "qas": [
        {"id": "q1", "question": "Who won?", "answers": [{"text": "Denver Broncos", "answer_start": 0},
                                                         {"text": "Broncos", "answer_start": 7}]},
        {"id": "q2", "question": "Where?", "answers": [], "is_impossible": True,
         "plausible_answers": [{"text": "Denver", "answer_start": 0}]},
        {"id": "q3", "question": "Which?", "answers": [{"text": "Super Bowl", "answer_start": 3}]},  # wrong offset
    ]}]},
    {"title": "B", "paragraphs": [{"context": "x y", "qas": [
        {"id": "q4", "question": "?", "answers": [{"text": "y", "answer_start": 2}]}]}]},
]}


def _write(tmp_path, obj, name="squad.json"):
    path = tmp_path / name
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj), encoding="utf-8")
    return path


def test_inline(tmp_path):
    examples = read_squad(_write(tmp_path, TINY))
    assert [e.qid for e in examples] == ["q1", "q2", "q3", "q4"]
    assert examples[0].answers == [("Denver Broncos", 0), ("Broncos", 7)]
    assert examples[1].is_impossible and examples[1].answers == []
    assert examples[0].title == "A" and not examples[0].is_impossible
    assert answer_offset_mismatches(examples) == [("q3", "Super Bowl", 3)]


def test_hold_out_articles():
    kept, held = hold_out_articles(TINY, 1)
    assert [a["title"] for a in kept["data"]] == ["A"] and [a["title"] for a in held["data"]] == ["B"]
    assert kept["version"] == held["version"] == "v2.0"
    kept, held = hold_out_articles(TINY, ["A"])
    assert [a["title"] for a in held["data"]] == ["A"]
    with pytest.raises(ValueError, match="unknown article titles"):
        hold_out_articles(TINY, ["Z"])


def test_malformed(tmp_path):
    with pytest.raises(DataFormatError, match=r"bad\.json, line 2: invalid JSON"):
        read_squad(_write(tmp_path, '{"data": [\n  oops]}', "bad.json"))
    broken = json.loads(json.dumps(TINY))
    del broken["data"][1]["paragraphs"][0]["qas"][0]["question"]
    with pytest.raises(DataFormatError, match=r"squad\.json: data\[1\]\.paragraphs\[0\]\.qas\[0\]: malformed"):
        read_squad(_write(tmp_path, broken))
    with pytest.raises(DataFormatError, match="not a SQuAD file"):
        read_squad(_write(tmp_path, [1, 2], "list.json"))


def test_real_v11_split(shared_data):
    path = shared_data / "squad" / "train-split-v1.1.json"
    dataset = load_squad_json(path)
    examples = read_squad(path)
    assert len(dataset["data"]) == 24 and len(examples) == 5696
    assert dataset["data"][0]["title"] == "Super_Bowl_50" and dataset["data"][-1]["title"] == "Victoria_and_Albert_Museum"
    assert not any(e.is_impossible for e in examples)
    assert sum(len(e.answers) for e in examples) > len(examples)  # several references per question
    # Every answer_start of this split points at its text (the official dev file is clean).
    assert answer_offset_mismatches(examples) == []
    kept, held = hold_out_articles(dataset, 4)
    assert len(kept["data"]) == 20 and len(held["data"]) == 4
