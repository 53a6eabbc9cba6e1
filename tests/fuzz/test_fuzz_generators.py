"""The fuzzer's own parts: the flag walker covers every flag of every subcommand from the parser itself, a draw is
the same for the same seed, an id rebuilds its case, and the oracle rejects what it must (a traceback, a second
line, exit 1, a half-written file, a refused run's --out)."""

import argparse
import pathlib

import pytest

from fuzz_cases import draw
from fuzz_flags import BASES, subcommands
from fuzz_oracle import Outcome, check_outcome
from fuzz_universe import find_case, universe


def test_every_subcommand_has_a_base_and_every_flag_a_case():
    """A new subcommand fails here until BASES has a line for it; a new flag gets its cases without one."""
    from bert_keras_cli.main import build_parser
    commands = subcommands(build_parser())
    assert set(commands) == set(BASES), set(commands) ^ set(BASES)
    ids = {c.id for c in universe("flags")}
    for command, parser in commands.items():
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction) or (command, action.dest) == ("demo", "sentences"):
                continue                   # any sentences start the demo (minutes): none of its cases is drawn
            name = (action.option_strings[-1] if action.option_strings else action.dest).lstrip("-").lower()
            prefix = f"{command.replace(' ', '-')}-{name.replace('_', '-')}-"
            assert any(i.startswith(prefix) for i in ids), f"no case for {command} {name}"


def test_a_draw_is_the_seeds_and_an_id_rebuilds_its_case(tmp_path):
    cases = universe("data")
    first, again, other = draw(cases, 40, 7), draw(cases, 40, 7), draw(cases, 40, 8)
    assert [c.id for c in first] == [c.id for c in again] != [c.id for c in other]
    case = next(c for c in cases if c.id == "finetune-sst-2-train-truncated-1")
    rebuilt = find_case(case.id)
    contents = []
    for c, folder in ((case, tmp_path / "a"), (rebuilt, tmp_path / "b")):
        folder.mkdir()
        c.prepare(folder, {"sst2.tsv": pathlib.Path(__file__).with_name("fuzz_inputs.py")})
        contents.append((folder / "F").read_bytes())
    assert rebuilt.argv == case.argv and contents[0] == contents[1]
    assert len(contents[0]) < pathlib.Path(__file__).with_name("fuzz_inputs.py").stat().st_size


def _outcome(tmp_path, code, err, out="", leave=None):
    case_dir = tmp_path / "case"
    (tmp_path / "system_tmp").mkdir(parents=True)
    case_dir.mkdir()
    existed = set(case_dir.rglob("*"))
    if leave:
        (case_dir / leave).write_text("x")
    return Outcome(["finetune"], code, out, err, case_dir, existed)


@pytest.mark.parametrize("code, err, leave", [
    (1, "bert-keras finetune: error: a problem\n", None),
    (2, "bert-keras finetune: error: a problem\nand a second line\n", None),
    (2, "Traceback (most recent call last):\nValueError: x\n", None),
    (0, "Traceback (most recent call last):\nValueError: x\n", None),
    (0, "", ".out.partial-abc123"),
    (2, "bert-keras finetune: error: a problem\n", "out"),
], ids=["exit-1", "two-lines", "traceback", "traceback-exit-0", "half-written", "refused-with-out"])
def test_the_oracle_rejects(tmp_path, code, err, leave):
    with pytest.raises(AssertionError):
        check_outcome(_outcome(tmp_path, code, err, leave=leave))


def test_the_oracle_accepts_one_line_and_tensorflow_log_lines(tmp_path):
    err = ("2026-12-07 23:00:00.000000: I tensorflow/core/x.cc:1] oneDNN custom operations are on\n"
           "bert-keras finetune: error: --batch-size 0: must be a positive integer\n")
    check_outcome(_outcome(tmp_path / "refused", 2, err))
    check_outcome(_outcome(tmp_path / "accepted", 0, "", out="wrote it\n", leave="out"))


def test_the_good_inputs_are_good():
    """The files the mutations start from hold no contradiction of their own (every SQuAD answer_start points at
    its text, every GLUE row has the header's columns)."""
    import json

    from fuzz_inputs import DATA
    squad = json.loads(DATA["squad.json"])
    for paragraph in squad["data"][0]["paragraphs"]:
        for qa in paragraph["qas"]:
            for answer in qa["answers"]:
                start = answer["answer_start"]
                assert paragraph["context"][start:start + len(answer["text"])] == answer["text"], qa["id"]
    for name in ("sst2.tsv", "mrpc.tsv", "stsb.tsv"):
        rows = [line.split("\t") for line in DATA[name].splitlines()]
        assert len({len(r) for r in rows}) == 1, name
