"""The zoo cache on a bucket ($BERT_KERAS_HOME=gs://...), on TensorFlow's `ram://` file system (not POSIX: no
folder rename): a checkpoint is converted once and published with zoo.json last, a second `get` reuses it, an upload
that stops half-way leaves nothing a reader takes for a cached model, and the loaders read the cached model back
with the checkpoint's own weights. The "download" is a file:// URL (nothing leaves the machine)."""

import dataclasses
import hashlib
import json
import os
import uuid
import zipfile

import numpy as np
import pytest
import tensorflow as tf

from bert_keras import BertConfig, BertEncoder, save_google_checkpoint, storage
from bert_keras.tasks import BertPretrainer
from bert_keras.zoo import CatalogueEntry, ZooError, fetch, get

CONFIG = BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=64, max_position_embeddings=16)
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(35)]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A google-research style checkpoint folder (with the masked-LM head), its zip and a catalogue naming it."""
    root = tmp_path_factory.mktemp("zoo_bucket")
    pretrainer = BertPretrainer(BertEncoder(CONFIG))
    pretrainer.mlm_head.output_bias.assign(np.arange(CONFIG.vocab_size, dtype="float32"))
    (root / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    folder = root / "uncased_L-2_H-16_A-2"
    save_google_checkpoint(pretrainer.encoder, str(folder), vocab_file=str(root / "vocab.txt"),
                           heads=pretrainer.head_weights())
    archive = root / "tiny.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for f in sorted(folder.iterdir()):
            z.write(f, f"uncased_L-2_H-16_A-2/{f.name}")
    data = archive.read_bytes()
    entry = CatalogueEntry(name="tiny", url=archive.as_uri(), archive="tiny.zip", layers=2, hidden=16, heads=2,
                           intermediate=64, vocab_size=40, cased=False, lower_case=True, params=0,
                           released="2020-02-20", sha256=hashlib.sha256(data).hexdigest(), size=len(data))
    catalogue = root / "catalogue.json"
    catalogue.write_text(json.dumps({"checkpoints": [dataclasses.asdict(entry)]}))
    return {"folder": str(folder), "catalogue": str(catalogue), "pretrainer": pretrainer}


@pytest.fixture
def bucket_home(checkpoint, tmp_path, monkeypatch):
    """BERT_KERAS_HOME on a fresh ram:// bucket, a local XDG cache for the downloads, the test catalogue; counts
    the conversions and records every uploaded file in order."""
    home = f"ram://zoo-{uuid.uuid4().hex[:8]}/cache"
    monkeypatch.setenv("BERT_KERAS_HOME", home)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("BERT_KERAS_CATALOGUE", checkpoint["catalogue"])
    calls = {"convert": 0, "uploads": [], "last": []}
    convert, upload, publish = fetch._convert, storage.upload_file, storage.publish_tree

    def counting_convert(*args, **kwargs):
        calls["convert"] += 1
        return convert(*args, **kwargs)

    def recording_upload(local, target):
        calls["uploads"].append(target)
        return upload(local, target)

    def recording_publish(local, target, last=()):
        calls["last"].append(last)
        return publish(local, target, last)

    monkeypatch.setattr(fetch, "_convert", counting_convert)
    monkeypatch.setattr(storage, "publish_tree", recording_publish)
    monkeypatch.setattr(storage, "upload_file", recording_upload)
    yield home, calls
    root = home.rsplit("/", 1)[0]
    if tf.io.gfile.exists(root):
        tf.io.gfile.rmtree(root)


def _x():
    return {"input_word_ids": np.array([[2, 7, 9, 3, 11]], "int32"), "input_mask": np.ones((1, 5), "int32"),
            "input_type_ids": np.zeros((1, 5), "int32")}


def test_get_publishes_once_to_the_bucket_with_zoo_json_last(checkpoint, bucket_home, tmp_path):
    home, calls = bucket_home
    folder = get("tiny", progress=False)
    assert folder == f"{home}/models/tiny" and fetch.is_converted(folder)
    assert sorted(storage.listdir(folder)) == ["bert_config.json", "mlm_head.npz", "model.keras", "vocab.txt",
                                               "zoo.json"]
    assert calls["uploads"][-1] == f"{folder}/zoo.json" and len(calls["uploads"]) == 5
    assert calls["last"] == [("zoo.json",)]          # last whatever the names sort to
    assert os.listdir(tmp_path / "xdg" / "bert_keras" / "downloads") == ["tiny.zip"]     # staged locally only
    assert not storage.exists(f"{home}/downloads")
    assert storage.listdir(f"{home}/models") == ["tiny"]                                 # no probe left behind
    assert (get("tiny", progress=False), calls["convert"], len(calls["uploads"])) == (folder, 1, 5)

    # A checkpoint folder: converted once, again only when its files change.
    local = get(checkpoint["folder"], progress=False)
    assert local == f"{home}/models/local-uncased_L-2_H-16_A-2" and calls["convert"] == 2
    assert get(checkpoint["folder"], progress=False) == local and calls["convert"] == 2
    vocab = os.path.join(checkpoint["folder"], "vocab.txt")
    os.utime(vocab, ns=(os.stat(vocab).st_atime_ns, os.stat(vocab).st_mtime_ns + 10**9))
    assert get(checkpoint["folder"], progress=False) == local and calls["convert"] == 3
    with storage.open(f"{local}/zoo.json") as f:
        assert json.load(f)["source"] == checkpoint["folder"]


def test_an_upload_stopped_half_way_is_never_taken_for_a_cached_model(bucket_home, monkeypatch):
    home, calls = bucket_home
    folder = f"{home}/models/tiny"
    upload, rmtree = storage.upload_file, storage.rmtree

    def failing_on(n):
        def upload_file(local, target):
            if len(calls["uploads"]) == n - 1:
                calls["uploads"].append(target)
                raise OSError(f"{target}: injected write error")
            return upload(local, target)
        return upload_file

    # An error on the 3rd file: one line naming BERT_KERAS_HOME, and what was uploaded is removed.
    monkeypatch.setattr(storage, "upload_file", failing_on(3))
    with pytest.raises(ZooError) as error:
        get("tiny", progress=False)
    assert f"BERT_KERAS_HOME={home}" in str(error.value) and "injected" in str(error.value)
    assert "\n" not in str(error.value)
    assert not fetch.is_converted(folder) and not storage.exists(f"{folder}/model.keras")

    # A kill while zoo.json (the 5th and last file) uploads: no clean-up runs, every other file stays.
    calls["uploads"].clear()
    monkeypatch.setattr(storage, "upload_file", failing_on(5))
    monkeypatch.setattr(storage, "rmtree", lambda path: None)
    with pytest.raises(ZooError):
        get("tiny", progress=False)
    monkeypatch.setattr(storage, "upload_file", upload)
    monkeypatch.setattr(storage, "rmtree", rmtree)
    assert calls["uploads"][-1] == f"{folder}/zoo.json"
    assert storage.exists(f"{folder}/model.keras") and storage.exists(f"{folder}/vocab.txt")
    assert not storage.exists(f"{folder}/zoo.json") and not fetch.is_converted(folder)

    assert get("tiny", progress=False) == folder and calls["convert"] == 3          # the rerun converts, completes
    assert fetch.is_converted(folder) and get("tiny", progress=False) == folder and calls["convert"] == 3


def test_a_bucket_that_cannot_be_written_is_refused_before_any_work(checkpoint, bucket_home, monkeypatch, capsys):
    from bert_keras_cli.main import main
    _, calls = bucket_home
    monkeypatch.setenv("BERT_KERAS_HOME", "nosuch://bucket/cache")        # a scheme gfile cannot write
    for source in ("tiny", checkpoint["folder"]):
        assert main(["zoo", "get", source, "--quiet"]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "BERT_KERAS_HOME=nosuch://bucket/cache" in err, err
    assert calls["convert"] == 0 and not os.path.exists(os.path.join(os.environ["XDG_CACHE_HOME"], "bert_keras"))


def test_the_loaders_read_the_cached_model_from_the_bucket(checkpoint, bucket_home):
    from bert_keras.loading import load_backbone, load_backbone_and_heads
    from bert_keras.zoo import from_preset
    from bert_keras.zoo.fetch import cached_mlm_head
    home, calls = bucket_home
    reference = checkpoint["pretrainer"].encoder(_x())
    # The checkpoint's own weights: the encoder that wrote it, and the checkpoint file read by TensorFlow.
    reader = tf.train.load_checkpoint(os.path.join(checkpoint["folder"], "bert_model.ckpt"))
    bias = reader.get_tensor("cls/predictions/output_bias")
    np.testing.assert_array_equal(bias, np.arange(CONFIG.vocab_size))

    encoder, preprocessor = load_backbone("tiny", max_seq_length=16)
    assert calls["convert"] == 1 and fetch.is_converted(f"{home}/models/tiny")
    assert preprocessor.vocab == VOCAB and preprocessor.lower_case
    for name in ("sequence_output", "pooled_output"):
        np.testing.assert_array_equal(encoder(_x())[name], reference[name])
    _, _, heads = load_backbone_and_heads("tiny", max_seq_length=16)
    np.testing.assert_array_equal(heads["cls/predictions/output_bias"], bias)
    np.testing.assert_array_equal(cached_mlm_head(f"{home}/models/tiny")["cls/predictions/output_bias"], bias)
    for source in ("tiny", f"{home}/models/tiny"):
        encoder, preprocessor = from_preset(source, progress=False, seq_length=8)
        np.testing.assert_array_equal(encoder(_x())["sequence_output"], reference["sequence_output"])
        assert preprocessor.vocab == VOCAB
    encoder, _ = load_backbone(f"{home}/models/tiny", max_seq_length=16)
    np.testing.assert_array_equal(encoder(_x())["sequence_output"], reference["sequence_output"])
    assert calls["convert"] == 1


def test_a_checkpoint_folder_on_the_bucket_is_converted_from_a_local_copy(checkpoint, bucket_home):
    import keras
    home, calls = bucket_home
    remote = f"{home.rsplit('/', 1)[0]}/checkpoints/uncased_L-2_H-16_A-2"
    for name in os.listdir(checkpoint["folder"]):
        storage.upload_file(os.path.join(checkpoint["folder"], name), f"{remote}/{name}")
    folder = get(remote, progress=False)
    assert folder == f"{home}/models/local-uncased_L-2_H-16_A-2" and fetch.is_converted(folder)
    with storage.open(f"{folder}/zoo.json") as f:
        assert json.load(f)["source"] == remote
    model = keras.models.load_model(os.path.join(storage.local_copy(folder), "model.keras"))
    np.testing.assert_array_equal(model(_x())["sequence_output"],
                                  checkpoint["pretrainer"].encoder(_x())["sequence_output"])
    assert get(folder, progress=False) == folder and calls["convert"] == 1      # the cached folder itself
