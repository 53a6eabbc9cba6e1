"""Bad input through the `bert-keras` command (issue 48, item 3): every case ends with exit status 2, one stderr
line that names the problem (argparse's usage errors too: OneLineParser), no traceback, and nothing
written: the files under the test's folder are the same before and after, and a refused run's --out is not there.

Most cases run in this process through `bert_keras_cli.main.main(argv)` (an exception other than SystemExit out
of main is a failure: the command would print a traceback); a few run the installed `bert-keras` console script,
where Python itself prints a traceback if anything escapes."""

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import traceback

import pytest

from bert_keras_cli.main import main
from conftest import shared_data_dir

pytestmark = pytest.mark.integration           # the command, on every kind of bad input

# TensorFlow's and absl's own log lines (C++ logging, "WARNING: All log messages before absl::InitializeLog()"):
# not ours, and being silenced separately (issue 48, item 4); they are set aside before counting the lines.
TF_LOG = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF] |[IWEF]\d{4} |WARNING: All log messages before "
                    r"absl|To enable the following instructions)")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, minilm_dir):
    """The bad (and a few good) inputs, written once: {name: path}."""
    from bert_keras import PRESETS, BertEncoder, save_google_checkpoint
    import keras
    root = tmp_path_factory.mktemp("bad_input")
    d = {"root": root, "vocab": root / "vocab.txt"}
    shutil.copyfile(pathlib.Path(minilm_dir) / "vocab.txt", d["vocab"])
    encoder = BertEncoder(PRESETS["bert_tiny"])
    d["tiny_keras"] = root / "tiny.keras"
    encoder.save(d["tiny_keras"])
    data = d["tiny_keras"].read_bytes()
    d["truncated_keras"] = root / "truncated.keras"
    d["truncated_keras"].write_bytes(data[:len(data) // 3])
    d["other_keras"] = root / "other.keras"
    keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)]).save(d["other_keras"])
    # A google-research checkpoint without its data file (a download stopped after the .index), and one whose data
    # file is cut short.
    for name, cut in (("partial", None), ("cut_data", 0.5)):
        save_google_checkpoint(encoder, str(root / name), vocab_file=str(d["vocab"]))
        [data_file] = (root / name).glob("bert_model.ckpt.data-*")
        if cut is None:
            data_file.unlink()
        else:
            data_file.write_bytes(data_file.read_bytes()[:int(data_file.stat().st_size * cut)])
        d[name] = root / name
    d["hf_truncated"] = root / "hf_truncated"
    d["hf_truncated"].mkdir()
    for f in ("config.json", "vocab.txt"):
        shutil.copyfile(pathlib.Path(minilm_dir) / f, d["hf_truncated"] / f)
    with open(pathlib.Path(minilm_dir) / "model.safetensors", "rb") as f:
        (d["hf_truncated"] / "model.safetensors").write_bytes(f.read(200_000))
    text = {"empty.txt": b"", "a_file": b"not a folder\n",
            "latin1.txt": "un café crème\n\nune autre phrase\n".encode("latin-1"),
            "corpus.txt": b"one sentence here .\nanother one .\n\nsecond document .\nmore text .\n",
            "latin1.tsv": "sentence\tlabel\ngood\t1\ncafé\t1\nbad\t0\n".encode("latin-1"),
            "unknown_columns.tsv": b"text\ttarget\ngood film\t1\nbad film\t0\n",
            "no_header.tsv": b"great film\t1\nbad film\t0\nnice\t1\nawful\t0\n",
            "test_layout.tsv": b"index\tsentence\n0\tgood film\n1\tbad film\n",
            "train.tsv": b"sentence\tlabel\ngreat film\t1\nbad film\t0\nnice\t1\nawful\t0\n",
            "latin1_squad.json": '{"version": "1.1", "data": [{"title": "café"}]}'.encode("latin-1"),
            "latin1_conll.txt": "Café NNP B-NP B-LOC\n".encode("latin-1"),
            "latin1_vocab.txt": "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\ncafé\n".encode("latin-1")}
    for name, content in text.items():
        (root / name).write_bytes(content)
        d[name] = root / name
    # A finished fine-tuning run and a finished pretraining run (what they leave: the result, no resume point, or
    # pretraining's point at its last step).
    d["finished_finetune"] = root / "finished_finetune"
    (d["finished_finetune"] / "logs").mkdir(parents=True)
    for f in ("model.keras", "metrics.json", "logs/stale_event_file"):
        (d["finished_finetune"] / f).write_text("from the previous run")
    d["finished_pretrain"] = root / "finished_pretrain"
    (d["finished_pretrain"] / "checkpoint").mkdir(parents=True)
    (d["finished_pretrain"] / "encoder.keras").write_text("from the previous run")
    (d["finished_pretrain"] / "checkpoint" / "state.json").write_text(json.dumps({"step": 4, "weights": "w.h5"}))
    (d["finished_pretrain"] / "checkpoint" / "w.h5").write_text("weights")
    return d


def files_under(root) -> dict:
    """{relative path: (size, mtime)} of every file under `root`."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in pathlib.Path(root).rglob("*") if p.is_file()}


def run_main(argv, capsys):
    """(exit status, stdout, stderr) of `main(argv)`; anything raised but SystemExit fails the test."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as e:
        code = e.code
    except BaseException:                                                 # noqa: B902 (what a user would see)
        pytest.fail(f"bert-keras {' '.join(map(str, argv))} raised (a traceback):\n{traceback.format_exc()}")
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_one_error_line(code, out, err, names, argv):
    """Exit status 2, no traceback, one error line holding `names`, alone on stderr (argparse's usage errors too)."""
    lines = [line for line in err.splitlines() if line.strip() and not TF_LOG.match(line)]
    shown = f"bert-keras {' '.join(map(str, argv))}: exit {code}\nstderr:\n{err}\nstdout:\n{out}"
    shown = shown.encode("utf-8", "backslashreplace").decode("utf-8")     # an undecodable argv: a report xdist sends
    assert code == 2, shown
    assert "Traceback" not in err and "Traceback" not in out, shown
    assert len(lines) == 1 and re.match(r"bert-keras( [\w-]+)*: error: ", lines[0]), shown
    for name in names:
        assert name in lines[-1], f"{name!r} not in the error line\n{shown}"


# (case id, argv ({name}: an input's path, {out}: the case's output path), words the error line must hold)
TINY = ["--model", "bert_tiny", "--vocab", "{vocab}"]
FINETUNE = ["finetune", "--task", "sst-2", *TINY, "--epochs", "1", "--batch-size", "2", "--max-seq-length", "16",
            "--quiet"]
FT_MODEL = ["finetune", "--task", "sst-2", "--epochs", "1", "--batch-size", "2", "--quiet"]      # + --model
PRETRAIN = ["pretrain", *TINY, "--text", "{corpus.txt}", "--train-steps", "4", "--save-every", "2", "--batch-size",
            "2", "--max-seq-length", "16", "--quiet"]
CASES = [
    # A checkpoint or model file that is incomplete, cut short or not BERT's.
    ("convert a checkpoint without its data file", ["convert", "--checkpoint", "{partial}", "--out", "{out}.keras"],
     ["incomplete", "bert_model.ckpt.data-00000-of-00001", "download or copy"]),
    ("finetune --model a checkpoint without its data file", [*FT_MODEL, "--model", "{partial}", "--train",
                                                             "{train.tsv}", "--out", "{out}"], ["incomplete"]),
    ("zoo get a checkpoint without its data file", ["zoo", "get", "{partial}"], ["incomplete"]),
    ("convert a checkpoint with a data file cut short", ["convert", "--checkpoint", "{cut_data}", "--out",
                                                        "{out}.keras"], ["cannot be read", "cut short"]),
    ("convert a truncated model.safetensors", ["convert", "--checkpoint", "{hf_truncated}", "--out", "{out}.keras"],
     ["model.safetensors cannot be read", "cut short"]),
    ("finetune --model a truncated model.safetensors", [*FT_MODEL, "--model", "{hf_truncated}", "--train",
                                                        "{train.tsv}", "--out", "{out}"], ["model.safetensors"]),
    ("finetune --model a truncated .keras", [*FT_MODEL, "--model", "{truncated_keras}", "--train", "{train.tsv}",
                                             "--out", "{out}"], ["truncated.keras is not a whole .keras file"]),
    ("export a truncated .keras", ["export", "--model", "{truncated_keras}", "--base-path", "{out}", "--name", "m"],
     ["not a whole .keras file"]),
    ("fill-mask --model a truncated .keras", ["fill-mask", "--model", "{truncated_keras}", "a [MASK] b"],
     ["not a whole .keras file"]),
    ("finetune --model a .keras that is not BERT", [*FT_MODEL, "--model", "{other_keras}", "--train",
                                                     "{train.tsv}", "--out", "{out}"],
     ["holds a Sequential, not a BERT encoder"]),
    ("export a .keras that is not a task model", ["export", "--model", "{other_keras}", "--base-path", "{out}",
                                                  "--name", "m"], ["holds a Sequential, not a fine-tuned task model"]),
    # Numbers that must be positive (or in [0, 1]): argparse's types, before anything starts.
    *[(f"finetune {flag} {value}", [*FINETUNE, "--train", "{train.tsv}", "--out", "{out}", flag, value],
       [f"argument {flag}"]) for flag, value in (("--batch-size", "0"), ("--batch-size", "-1"), ("--epochs", "0"),
                                                 ("--learning-rate", "-1e-5"), ("--max-seq-length", "0"),
                                                 ("--warmup-proportion", "2"), ("--seq-length", "0"),
                                                 ("--max-train-examples", "0"), ("--doc-stride", "0"),
                                                 ("--steps-per-execution", "0"), ("--log-every", "0"),
                                                 ("--save-every", "0"), ("--epochs", "nan"), ("--batch-size", "two"))],
    *[(f"pretrain {flag} {value}", [*PRETRAIN, "--out", "{out}", flag, value], [f"argument {flag}"])
      for flag, value in (("--batch-size", "0"), ("--batch-size", "-1"), ("--train-steps", "-4"),
                          ("--save-every", "0"), ("--max-predictions-per-seq", "0"), ("--warmup-steps", "-1"),
                          ("--adam-epsilon", "0"), ("--weight-decay", "-0.1"))],
    *[(f"pretraining-data {flag} {value}", ["pretraining-data", "{corpus.txt}", "--vocab", "{vocab}", "--out",
                                             "{out}", flag, value], [f"argument {flag}"])
      for flag, value in (("--shards", "0"), ("--workers", "0"), ("--dupe-factor", "0"), ("--max-seq-length", "-1"),
                          ("--masked-lm-prob", "1.5"), ("--short-seq-prob", "-0.1"), ("--bucket-mb", "0"))],
    ("vocab --size 0", ["vocab", "{corpus.txt}", "--out", "{out}.txt", "--size", "0"], ["argument --size"]),
    ("features --batch-size 0", ["features", "{corpus.txt}", *TINY, "--out", "{out}.npz", "--batch-size", "0"],
     ["argument --batch-size"]),
    ("fill-mask --top-k 0", ["fill-mask", *TINY, "--top-k", "0", "a [MASK] b"], ["argument --top-k"]),
    ("export --version 0", ["export", "--model", "{tiny_keras}", "--base-path", "{out}", "--name", "m", "--version",
                            "0"], ["argument --version"]),
    ("export-hub --seq-length -8", ["export-hub", *TINY, "--out", "{out}", "--seq-length", "-8"],
     ["argument --seq-length"]),
    # --max-seq-length over the model's positions, refused from its configuration before anything loads (the
    # checkpoint without its data file would fail as soon as its weights were read).
    ("finetune --max-seq-length over a preset's positions", [*FINETUNE, "--train", "{train.tsv}", "--out", "{out}",
                                                             "--max-seq-length", "1024"],
     ["--max-seq-length 1024 is over the 512 positions of bert_tiny", "512 or less"]),
    ("finetune --max-seq-length over a checkpoint's positions, before it loads",
     [*FT_MODEL, "--model", "{partial}", "--train", "{train.tsv}", "--out", "{out}", "--max-seq-length", "513"],
     ["--max-seq-length 513 is over the 512 positions"]),
    ("finetune --max-seq-length over a .keras file's positions", [*FT_MODEL, "--model", "{tiny_keras}", "--train",
                                                                  "{train.tsv}", "--out", "{out}",
                                                                  "--max-seq-length", "600"], ["512 positions"]),
    ("finetune --max-seq-length over a Hugging Face folder's positions, before it loads",
     [*FT_MODEL, "--model", "{hf_truncated}", "--train", "{train.tsv}", "--out", "{out}", "--max-seq-length",
      "1000"], ["512 positions"]),
    ("finetune --seq-length over the positions", [*FINETUNE, "--train", "{train.tsv}", "--out", "{out}",
                                                  "--seq-length", "640"], ["--seq-length 640 is over"]),
    ("finetune --max-seq-length 2", [*FINETUNE, "--train", "{train.tsv}", "--out", "{out}", "--max-seq-length", "2"],
     ["leaves no room"]),
    ("pretrain --max-seq-length over the positions", [*PRETRAIN, "--out", "{out}", "--max-seq-length", "1024"],
     ["--max-seq-length 1024 is over the 512 positions"]),
    ("features --max-seq-length over the positions", ["features", "{corpus.txt}", "--model", "{partial}", "--out",
                                                      "{out}.npz", "--max-seq-length", "600"],
     ["--max-seq-length 600 is over the 512 positions"]),
    ("export-hub --seq-length over the positions", ["export-hub", "--model", "{partial}", "--out", "{out}",
                                                    "--seq-length", "1024"], ["--seq-length 1024 is over"]),
    # One reading rule: UTF-8, the first bad byte named with its file, line and byte offset.
    ("finetune on a Latin-1 TSV", [*FINETUNE, "--train", "{latin1.tsv}", "--out", "{out}"],
     ["latin1.tsv, line 3: not UTF-8: byte 0xe9 at byte offset 25"]),
    ("features on a Latin-1 file", ["features", "{latin1.txt}", *TINY, "--out", "{out}.npz"],
     ["latin1.txt, line 1: not UTF-8: byte 0xe9 at byte offset 6"]),
    ("vocab on a Latin-1 file", ["vocab", "{latin1.txt}", "--out", "{out}.txt"],
     ["latin1.txt, line 1: not UTF-8: byte 0xe9 at byte offset 6"]),
    ("pretraining-data on a Latin-1 file", ["pretraining-data", "{latin1.txt}", "--vocab", "{vocab}", "--out",
                                            "{out}", "--workers", "1", "--quiet"],
     ["latin1.txt, line 1: not UTF-8: byte 0xe9 at byte offset 6"]),
    ("pretrain --text a Latin-1 file", [*PRETRAIN[:6], "{latin1.txt}", *PRETRAIN[7:], "--out", "{out}"],
     ["latin1.txt, line 1: not UTF-8: byte 0xe9 at byte offset 6"]),
    ("pretraining-data --vocab a Latin-1 vocabulary", ["pretraining-data", "{corpus.txt}", "--vocab",
                                                       "{latin1_vocab.txt}", "--out", "{out}", "--quiet"],
     ["latin1_vocab.txt, line 6: not UTF-8"]),
    ("finetune squad on Latin-1 JSON", ["finetune", "--task", "squad", *TINY, "--train", "{latin1_squad.json}",
                                        "--out", "{out}"], ["latin1_squad.json, line 1: not UTF-8"]),
    ("finetune conll2003 on a Latin-1 file", ["finetune", "--task", "conll2003", *TINY, "--train",
                                              "{latin1_conll.txt}", "--out", "{out}"],
     ["latin1_conll.txt, line 1: not UTF-8"]),
    # GLUE TSVs: the header is read; unknown columns and a missing header are named.
    ("finetune on a TSV with unknown columns", [*FINETUNE, "--train", "{unknown_columns.tsv}", "--out", "{out}"],
     ["line 1: not a sst-2 header", "sentence, label", "'text', 'target'"]),
    ("finetune on a TSV without its header", [*FINETUNE, "--train", "{no_header.tsv}", "--out", "{out}"],
     ["line 1: not a sst-2 header", "header line missing"]),
    ("finetune on a test file", [*FINETUNE, "--train", "{test_layout.tsv}", "--out", "{out}"],
     ["test_layout.tsv has no labels"]),
    ("finetune --eval a test file", [*FINETUNE, "--train", "{train.tsv}", "--eval", "{test_layout.tsv}", "--out",
                                     "{out}"], ["test_layout.tsv has no labels"]),
    ("vocab on an empty file", ["vocab", "{empty.txt}", "--out", "{out}.txt"], ["no words in", "empty.txt"]),
    # Where results go.
    ("finetune --out an existing file", [*FINETUNE, "--train", "{train.tsv}", "--out", "{a_file}"],
     ["--out", "a_file is a file"]),
    ("pretrain --out an existing file", [*PRETRAIN, "--out", "{a_file}"], ["a_file is a file"]),
    ("finetune into a finished run", [*FINETUNE, "--train", "{train.tsv}", "--out", "{finished_finetune}"],
     ["holds a finished run", "--overwrite"]),
    ("pretrain into a finished run", [*PRETRAIN, "--out", "{finished_pretrain}"],
     ["holds a finished run", "--overwrite"]),
    ("convert --out a folder", ["convert", "--checkpoint", "{partial}", "--out", "{root}"], ["is a folder"]),
    ("convert --hf-out a file", ["convert", "--checkpoint", "{partial}", "--hf-out", "{a_file}"], ["is a file"]),
    ("export-hub --out a file", ["export-hub", *TINY, "--out", "{a_file}"], ["is a file"]),
    ("export --base-path a file", ["export", "--model", "{tiny_keras}", "--base-path", "{a_file}", "--name", "m"],
     ["is a file"]),
    ("demo --out a file", ["demo", "--out", "{a_file}"], ["is a file"]),
    ("fill-mask --save a folder", ["fill-mask", *TINY, "a [MASK] b", "--save", "{root}"], ["--save", "is a folder"]),
    ("attention --npz a folder", ["attention", *TINY, "a text", "--npz", "{root}"], ["--npz", "is a folder"]),
    ("convert --out without .keras", ["convert", "--checkpoint", "{partial}", "--out", "{out}.h5"],
     ["name a .keras file"]),
    ("serve a Latin-1 batching parameters file", ["serve", "{out}", "--enable_batching",
                                                  "--batching_parameters_file", "{latin1.txt}"],
     ["latin1.txt, line 1: not UTF-8"]),
    ("finetune mrpc on an sst-2 file", ["finetune", "--task", "mrpc", *TINY, "--train", "{train.tsv}", "--out",
                                        "{out}"], ["not a mrpc header", "#1 String, #2 String, Quality"]),
]


def argv_of(case_argv, inputs, out):
    """The arguments with {name} replaced by the input's path ({out}: the case's output path)."""
    values = {**{k: str(v) for k, v in inputs.items()}, "out": str(out)}
    return [re.sub(r"\{([^{}]+)\}", lambda m: values[m.group(1)], a) for a in case_argv]


@pytest.mark.parametrize("argv, names", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_ends_in_one_line_and_writes_nothing(inputs, tmp_path, capsys, monkeypatch, argv, names):
    monkeypatch.setenv("BERT_KERAS_HOME", str(tmp_path / "zoo_cache"))
    out = tmp_path / "out"
    argv = argv_of(argv, inputs, out)
    before = files_under(inputs["root"])
    code, stdout, stderr = run_main(argv, capsys)
    assert_one_error_line(code, stdout, stderr, names, argv)
    assert files_under(inputs["root"]) == before, "the inputs' folder changed"
    assert not [p for p in tmp_path.rglob("*") if p.is_file()], f"left behind: {list(tmp_path.rglob('*'))}"
    assert not any(pathlib.Path(f"{out}{suffix}").exists() for suffix in ("", ".keras", ".txt", ".npz", ".h5"))


@pytest.mark.skipif(shared_data_dir() is None or not (shared_data_dir() / "bert_uncased_L-8_H-512_A-8_partial").is_dir(),
                    reason="../shared/data's partial checkpoint is not on this machine")
@pytest.mark.parametrize("command", ["convert", "finetune", "zoo get"])
def test_the_shared_partial_checkpoint(inputs, tmp_path, capsys, monkeypatch, command):
    """The issue's own case: bert_uncased_L-8_H-512_A-8 with its .index and no data file."""
    monkeypatch.setenv("BERT_KERAS_HOME", str(tmp_path / "zoo_cache"))
    partial = str(shared_data_dir() / "bert_uncased_L-8_H-512_A-8_partial")
    out = tmp_path / "out"
    argv = {"convert": ["convert", "--checkpoint", partial, "--out", f"{out}.keras"],
            "finetune": [*FT_MODEL, "--model", partial, "--train", str(inputs["train.tsv"]), "--out", str(out)],
            "zoo get": ["zoo", "get", partial]}[command]
    code, stdout, stderr = run_main(argv, capsys)
    assert_one_error_line(code, stdout, stderr, ["is incomplete", "bert_model.ckpt.data-00000-of-00001"], argv)
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


def test_overwrite_replaces_a_finished_run(inputs, tmp_path, capsys):
    """--overwrite starts afresh where a finished run was refused: the old run's files are gone, the new run's
    are there."""
    finished = tmp_path / "finished"
    shutil.copytree(inputs["finished_finetune"], finished)
    argv = argv_of([*FINETUNE, "--train", "{train.tsv}", "--out", str(finished), "--overwrite"], inputs, finished)
    code, stdout, stderr = run_main(argv, capsys)
    assert code == 0, stderr
    assert "Traceback" not in stderr
    assert not (finished / "logs" / "stale_event_file").exists()
    assert json.loads((finished / "metrics.json").read_text())["train_examples"] == 4
    assert (finished / "model.keras").stat().st_size > 1_000_000 and not (finished / "backup").exists()


def test_ctrl_c_is_one_line(monkeypatch, capsys):
    import bert_keras_cli.main as cli

    def interrupted(args):
        raise KeyboardInterrupt
    monkeypatch.setattr(cli, "cmd_presets", interrupted)
    code, stdout, stderr = run_main(["presets"], capsys)
    assert code == 130 and stderr.strip() == "bert-keras presets: interrupted"


# The process boundary: what the installed command prints when something escapes is Python's traceback.
CONSOLE_CASES = [
    ("finetune --batch-size 0", [*FINETUNE, "--train", "{train.tsv}", "--out", "{out}", "--batch-size", "0"],
     ["argument --batch-size"]),
    ("convert a checkpoint without its data file", ["convert", "--checkpoint", "{partial}", "--out", "{out}.keras"],
     ["incomplete"]),
    ("finetune --model a .keras that is not BERT", [*FT_MODEL, "--model", "{other_keras}", "--train",
                                                     "{train.tsv}", "--out", "{out}"], ["holds a Sequential"]),
    ("vocab on an empty file", ["vocab", "{empty.txt}", "--out", "{out}.txt"], ["no words in"]),
]


def test_the_console_script_prints_no_traceback(inputs, tmp_path):
    """The `bert-keras` command in its own processes (run side by side), on a few of the cases above."""
    script = pathlib.Path(sys.executable).parent / "bert-keras"
    if not script.exists():
        pytest.skip("the bert-keras console script is not installed in this environment")
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}      # as a user runs it
    env["BERT_KERAS_HOME"] = str(tmp_path / "zoo_cache")
    running = []
    for i, (name, argv, names) in enumerate(CONSOLE_CASES):
        argv = argv_of(argv, inputs, tmp_path / f"out{i}")
        running.append((name, argv, names, subprocess.Popen([str(script), *argv], stdout=subprocess.PIPE,
                                                            stderr=subprocess.PIPE, text=True, env=env)))
    for name, argv, names, process in running:
        stdout, stderr = process.communicate(timeout=600)
        assert_one_error_line(process.returncode, stdout, stderr, names, [name])
    assert not [p for p in tmp_path.rglob("*") if p.is_file()], list(tmp_path.rglob("*"))
