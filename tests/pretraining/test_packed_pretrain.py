"""`pretrain` on packed records (pretraining-data --pack): the trainer sees they are packed, trains on rows of 1 to
3 sequences, and its metrics.json says so with the rows and sequences a step trained on; a mix of packed and
unpacked files is refused. (That a packed step computes what the unpacked step of the same sequences computes is
test_packed_encoder.py's.)"""

import json
import shutil

import numpy as np
import pytest
from packed_batches import PRED, SEQ, write_records

pytestmark = pytest.mark.integration            # a whole pretraining run (in-process)


@pytest.fixture(scope="module")
def record_folders(minilm_vocab, tmp_path_factory):
    folders = {}
    for pack in (False, True):
        folders[pack] = tmp_path_factory.mktemp("packed" if pack else "unpacked")
        write_records(minilm_vocab, folders[pack], pack=pack)
    return folders


def run(vocab, records, out):
    from bert_keras.pretraining import PretrainConfig, pretrain
    return pretrain(PretrainConfig(model="bert_tiny", vocab=vocab, out=str(out), records=str(records),
                                   max_seq_length=SEQ, max_predictions_per_seq=PRED, train_steps=6, save_every=3,
                                   batch_size=4, learning_rate=1e-3, warmup_steps=1, progress=False))


def test_pretrain_trains_on_packed_rows_and_records_it(minilm_vocab, record_folders, tmp_path):
    result = run(minilm_vocab, record_folders[True] / "instances-00000-of-00001.tfrecord", tmp_path / "packed")
    assert result["packed"] and result["step"] == 6
    metrics = json.loads((tmp_path / "packed" / "metrics.json").read_text())
    assert metrics["packed"] is True and metrics["rows_per_step"] == 4
    assert 4 < metrics["sequences_per_step"] <= 12                 # 1 to 3 sequences a row, more than 1 on average
    assert all(np.isfinite(h["loss"]) and 0 <= h["nsp_accuracy"] <= 1 for h in metrics["history"])
    assert metrics["config"]["records"].endswith(".tfrecord")


def test_unpacked_records_train_one_sequence_a_row(minilm_vocab, record_folders, tmp_path):
    result = run(minilm_vocab, record_folders[False] / "instances-00000-of-00001.tfrecord", tmp_path / "plain")
    metrics = json.loads((tmp_path / "plain" / "metrics.json").read_text())
    assert not result["packed"] and metrics["packed"] is False
    assert metrics["rows_per_step"] == metrics["sequences_per_step"] == 4
    assert "sequences_per_row" not in metrics["history"][0]
    assert metrics["real_tokens_per_second"] > 0 and 0 < metrics["history"][0]["real_tokens_per_row"] <= SEQ


def test_text_pack_trains_on_rows_filled_on_the_fly_and_records_it(minilm_vocab, tmp_path, capsys):
    from bert_keras_cli.main import main
    from conftest import FIXTURES
    out = tmp_path / "text_packed"
    main(["pretrain", "--model", "bert_tiny", "--vocab", minilm_vocab, "--text",
          str(FIXTURES / "pretraining_corpus.txt"), "--pack", "--out", str(out), "--max-seq-length", "64",
          "--batch-size", "4", "--train-steps", "4", "--save-every", "2", "--warmup-steps", "1", "--quiet"])
    assert "real tokens/s" in capsys.readouterr().out                 # the run's log, every interval
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["packed"] is True and metrics["rows_per_step"] == 4
    assert 4 < metrics["sequences_per_step"] <= 12
    assert metrics["real_tokens_per_second"] > 0
    assert all(np.isfinite(h["loss"]) and "nsp_accuracy" not in h for h in metrics["history"])
    # real tokens a row: more than one sequence's, at most the row's 64
    assert all(0 < h["real_tokens_per_row"] <= 64 for h in metrics["history"])


def test_a_mix_of_packed_and_unpacked_files_is_refused(minilm_vocab, record_folders, tmp_path):
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    for pack, folder in record_folders.items():
        shutil.copy(folder / "instances-00000-of-00001.tfrecord", mixed / f"{'packed' if pack else 'plain'}.tfrecord")
    with pytest.raises(ValueError, match="mix packed rows"):
        run(minilm_vocab, mixed, tmp_path / "run")
    assert not (tmp_path / "run").exists()
