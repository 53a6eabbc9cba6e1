"""Bad fine-tuning data and flags through `bert_keras_cli.main.main(argv)` in this process (issue 55), in the style
of test_bad_input.py: exit status 2, one stderr line naming the problem and the fix, no traceback, no --out left.
Every case is refused before a model loads, so they run in the unit tier.

- data that contradicts itself: SQuAD answers that are not at their answer_start (skipped and counted, as
  google-research run_squad does; refused when none is left);
- files without examples: a header-only TSV, a CoNLL file of -DOCSTART- only, a SQuAD file with an empty data
  list, as --eval (once "no evaluation set", exit 0) and as --train (once "lower --batch-size");
- sequence lengths under what the task's input needs;
- a fill-mask text that is not UTF-8;
- an argparse error in a subcommand's arguments names the subcommand, for every subcommand."""

import argparse
import json
import os

import pytest

from bert_keras_cli import flag_types
from bert_keras_cli.main import build_parser, parse_command_line
from test_bad_input import assert_one_error_line, run_main

TINY = ["--model", "bert_tiny", "--quiet", "--epochs", "1"]


@pytest.fixture(scope="module")
def files(tmp_path_factory, shared_data):
    """{name: path} of the inputs, written once."""
    root = tmp_path_factory.mktemp("bad_data")
    squad = json.loads((shared_data / "squad" / "train-split-v1.1.json").read_text(encoding="utf-8"))
    paragraphs = squad["data"][0]["paragraphs"][:1]                    # Super_Bowl_50's first paragraph: 30
    some_bad = json.loads(json.dumps(paragraphs))
    for qa in some_bad[0]["qas"][::3]:                                 # 10 of them past the context
        qa["answers"][0]["answer_start"] = 1_000_000
    all_bad = json.loads(json.dumps(paragraphs))
    for qa in all_bad[0]["qas"]:
        qa["answers"][0]["answer_start"] += 1_000_000
    contents = {
        "train.tsv": "sentence\tlabel\ngreat film\t1\nbad film\t0\nnice\t1\nawful\t0\n",
        "header_only.tsv": "sentence\tlabel\n",
        "docstart_only.txt": "-DOCSTART- -X- -X- O\n\n-DOCSTART- -X- -X- O\n\n",
        "train.txt": "John NNP B-NP B-PER\nlives VBZ B-VP O\nhere RB B-ADVP O\n\n",
        "empty_data.json": json.dumps({"version": "1.1", "data": []}),
        "squad.json": json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": paragraphs}]}),
        "some_bad.json": json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": some_bad}]}),
        "all_bad.json": json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": all_bad}]}),
    }
    found = {"root": root, "context_chars": len(paragraphs[0]["context"])}
    for name, text in contents.items():
        (root / name).write_text(text, encoding="utf-8")
        found[name] = str(root / name)
    return found


def refused(argv, capsys, tmp_path, names):
    """Runs `argv` (with --out tmp_path/out for finetune) and checks the one error line holds `names` and that
    no --out is left; returns (stdout, the error line)."""
    out = tmp_path / "out"
    argv = [*argv, "--out", str(out)] if argv[0] == "finetune" else argv
    code, stdout, stderr = run_main(argv, capsys)
    assert_one_error_line(code, stdout, stderr, names, argv)
    assert not out.exists(), os.listdir(out)
    return stdout, stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("task,train,evaluate,layout", [
    ("sst-2", "train.tsv", "header_only.tsv", "a header line and no rows"),
    ("conll2003", "train.txt", "docstart_only.txt", "no sentences, only -DOCSTART- and blank lines"),
    ("squad", "squad.json", "empty_data.json", "no questions in its data list"),
])
def test_an_evaluation_file_without_examples_is_refused(files, minilm_vocab, capsys, tmp_path, task, train, evaluate,
                                                        layout):
    refused(["finetune", "--task", task, *TINY, "--vocab", minilm_vocab, "--train", files[train], "--eval",
             files[evaluate]], capsys, tmp_path, [f"{files[evaluate]}: holds no examples ({layout})"])


@pytest.mark.parametrize("task,train", [("sst-2", "header_only.tsv"), ("conll2003", "docstart_only.txt"),
                                        ("squad", "empty_data.json")])
def test_a_training_file_without_examples_says_so(files, minilm_vocab, capsys, tmp_path, task, train):
    _, line = refused(["finetune", "--task", task, *TINY, "--vocab", minilm_vocab, "--train", files[train]], capsys,
                      tmp_path, [f"{files[train]}: holds no examples", "name a file that holds at least one"])
    assert "batch-size" not in line


def test_squad_answers_not_at_their_offset_are_skipped_and_counted(files, minilm_vocab, capsys, tmp_path):
    """10 of 30 answers past the context: skipped, said on one line, and the run goes on with the other 20 (here
    to the next check: 20 questions are fewer than one batch of 32)."""
    stdout, _ = refused(["finetune", "--task", "squad", *TINY, "--vocab", minilm_vocab, "--train",
                         files["some_bad.json"]], capsys, tmp_path,
                        ["20 training examples is fewer than one batch of 32"])
    assert [line for line in stdout.splitlines() if "skipped" in line] == [
        f"skipped 10 of 30 training questions in {files['some_bad.json']}: the text at their answer_start is not "
        "their answer (google-research run_squad's check; the first, id 56be4db0acb8001400a502ec: 'Denver "
        f"Broncos' at answer_start 1,000,000 of a {files['context_chars']:,}-character context)"]


def test_squad_with_no_answer_at_its_offset_is_refused(files, minilm_vocab, capsys, tmp_path):
    refused(["finetune", "--task", "squad", *TINY, "--vocab", minilm_vocab, "--train", files["all_bad.json"]],
            capsys, tmp_path, [f"{files['all_bad.json']}: none of its 30 answers is at its answer_start",
                               "answer_start must be the character offset"])


@pytest.mark.parametrize("task,flags,names", [
    ("mrpc", ["--max-seq-length", "4"], ["--max-seq-length 4 leaves no room for mrpc's input", "at least 5"]),
    ("sst-2", ["--max-seq-length", "8", "--seq-length", "2"], ["--seq-length 2 leaves no room", "at least 3"]),
    ("openbookqa", ["--max-seq-length", "4"], ["at least 5"]),
    ("squad", ["--max-seq-length", "67"], ["--max-seq-length 67 leaves no room for squad's input", "at least 68",
                                          "--max-query-length 64", "or lower --max-query-length"]),
    ("squad", ["--max-query-length", "8", "--max-seq-length", "16", "--seq-length", "11"],
     ["--seq-length 11", "at least 12"]),
    ("squad", ["--max-query-length", "400"], ["--max-seq-length 384", "at least 404"]),
    ("sst-2", ["--doc-stride", "16"], ["--doc-stride: not an option of --task sst-2"]),     # was a TypeError
])
def test_lengths_and_options_the_task_cannot_use_are_refused(files, minilm_vocab, capsys, tmp_path, task, flags, names):
    train = {"squad": "squad.json"}.get(task, "train.tsv")
    refused(["finetune", "--task", task, *TINY, "--vocab", minilm_vocab, "--train", files[train], *flags], capsys,
            tmp_path, names)


@pytest.mark.parametrize("task,task_args,shortest", [("sst-2", {}, 3), ("conll2003", {}, 3), ("qnli", {}, 5),
                                                     ("swag", {}, 5), ("squad", {}, 68),
                                                     ("squad_v2", {"max_query_length": 8}, 12)])
def test_the_shortest_length_each_task_takes(task, task_args, shortest):
    from bert_keras.finetune.registry import get_task
    task = get_task(task, **task_args)
    task.check_lengths(shortest, shortest)
    with pytest.raises(ValueError, match=f"give at least {shortest} "):
        task.check_lengths(shortest - 1)


def test_fill_mask_text_that_is_not_utf8(minilm_vocab, capsys, tmp_path):
    raw = "un café [MASK] .".encode("latin-1")
    text = os.fsdecode(raw)                      # what sys.argv holds for these bytes in a UTF-8 locale
    refused(["fill-mask", "--model", "bert_tiny", "--vocab", minilm_vocab, "ok [MASK]", text], capsys, tmp_path,
            [f"text 2 is not UTF-8: byte 0xe9 at byte offset {raw.index(0xe9)}", "give it in UTF-8"])


def subcommands(parser, path=()):
    """(path, parser) of every leaf subcommand, from the parser's own definition."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from subcommands(sub, (*path, name))
            return
    yield path, parser


LEAVES = list(subcommands(build_parser()))


def parse_error(argv, capsys) -> str:
    with pytest.raises(SystemExit) as exit_info:
        parse_command_line(argv)
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and len(err.splitlines()) == 1, err
    return err


def test_pack_0_names_the_subcommand(capsys):
    """The issue's case: pretrain's --pack takes no value, so `0` is an argument pretrain does not know."""
    assert parse_error(["pretrain", "--model", "bert_tiny", "--pack", "0", "--out", "x"], capsys) == (
        "bert-keras pretrain: error: unrecognized arguments: 0 (usage: bert-keras pretrain --help)")


@pytest.mark.parametrize("path,parser", LEAVES, ids=[" ".join(p) for p, _ in LEAVES])
def test_argument_errors_name_the_subcommand(capsys, path, parser):
    """An unknown flag, and each numeric flag given -1 (flag_types refuses it), name `bert-keras <subcommand>`."""
    assert len(LEAVES) >= 17
    prefix = f"bert-keras {' '.join(path)}: error: "
    err = parse_error([*path, "--no-such-flag-55"], capsys)
    assert err.startswith(prefix) and err.endswith(f"(usage: bert-keras {' '.join(path)} --help)"), err
    checked = {flag_types.positive_int, flag_types.non_negative_int, flag_types.positive_float,
               flag_types.non_negative_float, flag_types.fraction}
    for action in parser._actions:
        if action.type in checked and action.option_strings:
            err = parse_error([*path, action.option_strings[0], "-1"], capsys)
            assert err.startswith(prefix) and f"argument {action.option_strings[0]}" in err, err
