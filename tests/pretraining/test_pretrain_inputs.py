"""`pretrain` and `pretraining-data` checked against what their inputs claim (issue 55): a preset trained from
scratch gets the vocabulary's size, a model with weights and a vocabulary of another size is refused, records
bring their own lengths (a contradicting flag is refused, naming both), a refused `pretraining-data` leaves no
folder, an MLM-only run trains no pooler or NSP head (so no "Gradients do not exist" warning), its progress counts
steps, and a rerun removes the half-written files of a killed one.

The expectations are independent of the code under test: the vocabulary's size is its file's line count, the
first loss of an untrained model is that of a uniform guess (ln V for the masked word, ln 2 for next-sentence
prediction), the record lengths are the ones the test asked `pretraining-data` for."""

import contextlib
import io
import json
import math
import re
import warnings

import keras
import pytest

from bert_keras_cli.main import main
from conftest import FIXTURES

CORPUS = FIXTURES / "pretraining_corpus.txt"
SEQ, PRED = 32, 5                     # what the records are written with; `pretrain` is never told


@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
    """A word-level vocabulary of the corpus (BERT's special tokens, then its lower-cased words and punctuation):
    a few hundred tokens, far from the presets' 30522."""
    words = sorted({w for w in re.findall(r"\w+|[^\w\s]", CORPUS.read_text(encoding="utf-8").lower())})
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n", encoding="utf-8")
    return path


def lines(path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


@pytest.fixture(scope="module")
def records(vocab, tmp_path_factory):
    """{packed: folder} of records written at SEQ and PRED with `vocab`."""
    folders = {}
    for pack in (False, True):
        folder = tmp_path_factory.mktemp("packed" if pack else "plain")
        assert main(["pretraining-data", str(CORPUS), "--out", str(folder / "c"), "--vocab", str(vocab),
                     "--max-seq-length", str(SEQ), "--max-predictions-per-seq", str(PRED), "--dupe-factor", "1",
                     "--workers", "1", "--quiet", *(["--pack"] if pack else [])]) == 0
        folders[pack] = folder
    return folders


@pytest.fixture(scope="module")
def records_run(vocab, records, tmp_path_factory):
    """`pretrain --model bert_tiny --vocab V --records R` with no length flags: one step, its stdout."""
    out = tmp_path_factory.mktemp("runs") / "records"
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        code = main(["pretrain", "--model", "bert_tiny", "--vocab", str(vocab), "--records", str(records[False]),
                     "--out", str(out), "--train-steps", "1", "--save-every", "1", "--batch-size", "8"])
    assert code == 0, stdout.getvalue()
    return out, stdout.getvalue()


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_a_preset_from_scratch_takes_the_vocabularys_size(vocab, records_run):
    out, stdout = records_run
    size = lines(vocab)
    assert f"bert_tiny with vocab_size {size} from {vocab}" in stdout
    encoder = keras.models.load_model(out / "encoder.keras")
    assert encoder.embeddings.word_embeddings.embeddings.shape[0] == size
    # The first step's loss is an untrained model's: a uniform guess over the vocabulary's ids plus NSP's ln 2.
    first = json.loads((out / "metrics.json").read_text())["history"][0]["loss"]
    assert abs(first - (math.log(size) + math.log(2))) < 0.3
    assert first < math.log(30522) + math.log(2) - 2            # ln(30522 / ~1,500) = 3: not the preset's rows


def test_records_bring_their_own_lengths(records_run):
    out, _ = records_run
    config = json.loads((out / "metrics.json").read_text())["config"]
    assert (config["max_seq_length"], config["max_predictions_per_seq"]) == (SEQ, PRED)


@pytest.mark.parametrize("pack", [False, True])
def test_a_length_flag_contradicting_the_records_is_refused_naming_both(vocab, records, pack, tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["pretrain", "--model", "bert_tiny", "--vocab", str(vocab), "--records", str(records[pack]),
            "--out", str(out), "--train-steps", "1", "--save-every", "1"]
    assert main([*argv, "--max-seq-length", "64"]) == 2
    err = one_line_error(capsys)
    assert "--max-seq-length 64" in err and f"sequences of {SEQ} tokens" in err
    if not pack:
        assert main([*argv, "--max-predictions-per-seq", "9"]) == 2
        err = one_line_error(capsys)
        assert "--max-predictions-per-seq 9" in err and f"hold {PRED} a sequence" in err
    assert not out.exists()


def test_the_packed_records_layout_is_read_from_them(records):
    from bert_keras.pretraining.packed_records import packed_prediction_slots
    from bert_keras.pretraining.records import record_files, record_layout
    layout = record_layout(record_files(str(records[True])))
    assert (layout.max_seq_length, layout.predictions, layout.packed) == (SEQ, packed_prediction_slots(SEQ, PRED),
                                                                         True)


def test_a_file_that_is_not_records_is_refused_in_one_line(vocab, tmp_path, capsys):
    assert main(["pretrain", "--model", "bert_tiny", "--vocab", str(vocab), "--records", str(CORPUS),
                 "--out", str(tmp_path / "run"), "--train-steps", "1", "--save-every", "1"]) == 2
    assert "not a pretraining TFRecord file" in one_line_error(capsys)
    assert not (tmp_path / "run").exists()


def test_a_model_with_weights_and_another_vocabulary_is_refused(vocab, records_run, minilm_vocab, tmp_path, capsys):
    trained, _ = records_run               # its encoder has the small vocabulary's rows; MiniLM's has 30522 lines
    assert main(["pretrain", "--model", str(trained / "encoder.keras"), "--vocab", minilm_vocab, "--text",
                 str(CORPUS), "--out", str(tmp_path / "run"), "--train-steps", "1", "--save-every", "1"]) == 2
    err = one_line_error(capsys)
    assert f"has vocab_size {lines(vocab)} but the vocabulary {minilm_vocab} has 30522 tokens" in err
    assert not (tmp_path / "run").exists()


def test_mlm_only_run_trains_no_pooler_warns_nothing_counts_steps_and_clears_a_killed_runs_leftovers(
        vocab, tmp_path, capsys):
    out = tmp_path / "mlm"
    # What a run killed while saving leaves: atomic.py's temporaries beside the results and the resume point.
    leftovers = [out / ".encoder.keras.partial-k2j4f8x1.keras", out / ".metrics.json.partial-0a1b2c3d.json",
                 out / "checkpoint" / ".state.json.partial-9z8y7x6w.json",
                 out / ".tf1_checkpoint.partial-q1w2e3r4" / "bert_model.ckpt.index"]
    for path in leftovers:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"half written")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["pretrain", "--model", "bert_tiny", "--vocab", str(vocab), "--text", str(CORPUS),
                     "--out", str(out), "--train-steps", "2", "--save-every", "1", "--batch-size", "4",
                     "--max-seq-length", "32", "--quiet"]) == 0
    captured = capsys.readouterr()
    assert not [str(w.message) for w in caught if "Gradients do not exist" in str(w.message)]
    assert "warn" not in captured.err.lower(), captured.err
    # progress in steps, one line per checkpoint interval; no Keras "Epoch 2/2"
    assert "Epoch" not in captured.out
    assert re.search(r"^step 1/2 \(checkpoint 1 of 2\): loss \d", captured.out, re.M)
    assert re.search(r"^step 2/2 \(checkpoint 2 of 2\): loss \d.* real tokens/s", captured.out, re.M)
    assert not any(p.exists() for p in leftovers) and not (out / ".tf1_checkpoint.partial-q1w2e3r4").exists()
    # the pooler (untrained here) is trainable again in what fine-tuning loads
    encoder = keras.models.load_model(out / "encoder.keras")
    assert encoder.pooler.trainable and encoder.embeddings.word_embeddings.embeddings.shape[0] == lines(vocab)


def test_pretraining_data_refusing_its_input_leaves_no_folder(vocab, tmp_path, capsys):
    one = tmp_path / "one.txt"
    one.write_text("A single document .\nWith two sentences .\n", encoding="utf-8")
    assert main(["pretraining-data", str(one), "--out", str(tmp_path / "new" / "data" / "wiki"), "--vocab",
                 str(vocab), "--quiet"]) == 2
    assert "at least two" in one_line_error(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.txt"]          # no new/, no spill folder
    (tmp_path / "kept").mkdir()                              # a folder that was there stays
    assert main(["pretraining-data", str(one), "--out", str(tmp_path / "kept" / "wiki"), "--vocab", str(vocab),
                 "--quiet"]) == 2
    one_line_error(capsys)
    assert (tmp_path / "kept").is_dir() and not list((tmp_path / "kept").iterdir())
