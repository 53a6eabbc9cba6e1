"""The zoo's fetcher against a local HTTP server on 127.0.0.1 serving a tiny google-format archive."""

import dataclasses
import hashlib
import http.server
import os
import threading
import zipfile

import keras
import numpy as np
import pytest

from bert_keras import BertConfig, BertEncoder, save_google_checkpoint
from bert_keras.zoo import CatalogueEntry, ZooError, get, load_catalogue

CONFIG = BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=64, max_position_embeddings=16)
UNCASED_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(35)]


class _Server(http.server.ThreadingHTTPServer):
    """Serves files from a dict, honours Range, and can cut the first response short."""
    files: dict = {}
    cut_after: int | None = None
    requests: list = []


class _Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        server = self.server
        data = server.files.get(self.path)
        server.requests.append((self.path, self.headers.get("Range")))
        if data is None:
            self.send_error(404)
            return
        start = int(self.headers["Range"].split("=")[1].rstrip("-")) if self.headers.get("Range") else 0
        self.send_response(206 if start else 200)
        self.send_header("Content-Length", str(len(data) - start))
        self.end_headers()
        body = data[start:]
        if server.cut_after is not None:      # a dropped connection mid-download
            body, server.cut_after = body[:server.cut_after], None
        self.wfile.write(body)


@pytest.fixture()
def server():
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.files, httpd.requests, httpd.cut_after = {}, [], None
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()


@pytest.fixture()
def archive(tmp_path):
    """A google-research style zip (top folder with bert_config.json, bert_model.ckpt.*, vocab.txt)."""
    encoder = BertEncoder(CONFIG)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(UNCASED_VOCAB) + "\n")
    folder = tmp_path / "uncased_L-2_H-16_A-2"
    save_google_checkpoint(encoder, str(folder), vocab_file=str(vocab))
    path = tmp_path / "uncased_L-2_H-16_A-2.zip"
    with zipfile.ZipFile(path, "w") as z:
        for f in sorted(folder.iterdir()):
            z.write(f, f"uncased_L-2_H-16_A-2/{f.name}")
    return encoder, path.read_bytes()


def _entry(server, data, **overrides):
    values = dict(name="tiny", url=f"http://127.0.0.1:{server.server_port}/tiny.zip", archive="tiny.zip",
                  layers=2, hidden=16, heads=2, intermediate=64, vocab_size=40, cased=False, lower_case=True,
                  params=0, released="2020-02-20", sha256=hashlib.sha256(data).hexdigest(), size=len(data))
    values.update(overrides)
    return {"tiny": CatalogueEntry(**values)}


def _x():
    return {"input_word_ids": np.array([[2, 7, 9, 3]], "int32"), "input_mask": np.ones((1, 4), "int32"),
            "input_type_ids": np.zeros((1, 4), "int32")}


def test_get_downloads_verifies_converts_and_caches(server, archive, tmp_path, monkeypatch):
    monkeypatch.setenv("BERT_KERAS_HOME", str(tmp_path / "home"))
    encoder, data = archive
    server.files["/tiny.zip"] = data
    catalogue = _entry(server, data)
    folder = get("tiny", progress=False, catalogue=catalogue)
    model = keras.models.load_model(os.path.join(folder, "model.keras"))
    np.testing.assert_array_equal(model(_x())["sequence_output"], encoder(_x())["sequence_output"])
    assert (tmp_path / "home" / "models" / "tiny" / "vocab.txt").read_text().split() == UNCASED_VOCAB
    assert get("tiny", progress=False, catalogue=catalogue) == folder
    assert len(server.requests) == 1                     # the second get came from the cache


def test_interrupted_download_resumes_with_a_range_request(server, archive, tmp_path, monkeypatch):
    monkeypatch.setenv("BERT_KERAS_HOME", str(tmp_path / "home"))
    _, data = archive
    server.files["/tiny.zip"] = data
    server.cut_after = len(data) // 3
    catalogue = _entry(server, data)
    with pytest.raises(ZooError, match="run the same command again to resume"):
        get("tiny", progress=False, catalogue=catalogue)
    assert not (tmp_path / "home" / "models" / "tiny").exists()
    get("tiny", progress=False, catalogue=catalogue)
    assert server.requests[1] == ("/tiny.zip", f"bytes={len(data) // 3}-")


def test_corrupted_archive_fails_verification_and_leaves_no_cache_entry(server, archive, tmp_path, monkeypatch):
    monkeypatch.setenv("BERT_KERAS_HOME", str(tmp_path / "home"))
    _, data = archive
    corrupted = bytearray(data)
    corrupted[len(data) // 2] ^= 0xFF
    server.files["/tiny.zip"] = bytes(corrupted)
    with pytest.raises(ZooError, match="corrupted .*sha256"):
        get("tiny", progress=False, catalogue=_entry(server, data))
    home = tmp_path / "home"
    assert not (home / "models").exists() and list((home / "downloads").iterdir()) == []


def test_truncated_archive_without_recorded_hash_fails_cleanly(server, archive, tmp_path, monkeypatch):
    monkeypatch.setenv("BERT_KERAS_HOME", str(tmp_path / "home"))
    _, data = archive
    server.files["/tiny.zip"] = data[: len(data) // 2]
    with pytest.raises(ZooError, match="cannot be unpacked|neither a zip"):
        get("tiny", progress=False, catalogue=_entry(server, data, sha256=None, size=None))
    assert not (tmp_path / "home" / "models").exists()


def test_checkpoint_that_disagrees_with_the_catalogue_is_refused(server, archive, tmp_path, monkeypatch):
    monkeypatch.setenv("BERT_KERAS_HOME", str(tmp_path / "home"))
    _, data = archive
    server.files["/tiny.zip"] = data
    with pytest.raises(ZooError, match="looks uncased, the catalogue says cased"):
        get("tiny", progress=False, catalogue=_entry(server, data, cased=True))
    with pytest.raises(ZooError, match="num_hidden_layers=2 \\(catalogue: 4\\)"):
        get("tiny", progress=False, catalogue=_entry(server, data, layers=4))
    assert not (tmp_path / "home" / "models").exists()


def test_offline_error_names_the_url_and_where_to_put_the_archive(tmp_path, monkeypatch):
    monkeypatch.setenv("BERT_KERAS_HOME", str(tmp_path / "home"))
    entry = load_catalogue()["bert_base_uncased"]
    closed = {"bert_base_uncased": dataclasses.replace(entry, url="http://127.0.0.1:9/uncased_L-12_H-768_A-12.zip")}
    with pytest.raises(ZooError) as error:
        get("bert_base_uncased", progress=False, catalogue=closed)
    assert "http://127.0.0.1:9/uncased_L-12_H-768_A-12.zip" in str(error.value)
    assert str(tmp_path / "home" / "downloads" / "uncased_L-12_H-768_A-12.zip") in str(error.value)


def test_a_local_archive_and_a_folder_work_where_a_name_does(archive, tmp_path, monkeypatch):
    monkeypatch.setenv("BERT_KERAS_HOME", str(tmp_path / "home"))
    encoder, data = archive
    path = tmp_path / "mine.zip"
    path.write_bytes(data)
    for source in (str(path), str(tmp_path / "uncased_L-2_H-16_A-2")):
        folder = get(source, progress=False)
        model = keras.models.load_model(os.path.join(folder, "model.keras"))
        np.testing.assert_array_equal(model(_x())["sequence_output"], encoder(_x())["sequence_output"])


def test_catalogue_parameter_counts_match_built_encoders():
    catalogue = load_catalogue()
    assert len(catalogue) == 32 and sum(1 for n in catalogue if n.startswith("bert_uncased_L-")) == 24
    for entry in catalogue.values():
        assert entry.params == entry.config().num_parameters(), entry.name
    for name in ("bert_uncased_L-2_H-128_A-2", "bert_uncased_L-4_H-256_A-4", "bert_base_cased", "bert_base_chinese"):
        assert BertEncoder(catalogue[name].config()).count_params() == catalogue[name].params, name
    # Published figures: BERT-Base 110M / BERT-Large 340M (uncased, 30,522 vocab).
    assert catalogue["bert_base_uncased"].params == 109_482_240
    assert catalogue["bert_large_uncased"].params == 335_141_888


def test_from_preset_gives_the_encoder_and_a_matching_preprocessor(archive, tmp_path, monkeypatch):
    from bert_keras import from_preset
    from bert_keras.tasks import BertClassifier
    monkeypatch.setenv("BERT_KERAS_HOME", str(tmp_path / "home"))
    encoder, data = archive
    path = tmp_path / "tiny.zip"
    path.write_bytes(data)
    loaded, preprocessor = from_preset(str(path), progress=False)
    assert preprocessor.lower_case and preprocessor.vocab == UNCASED_VOCAB
    x = preprocessor(["w1 w2 w3", "w4"])
    assert x["input_word_ids"][0, :5].numpy().tolist() == [2, 6, 7, 8, 3]    # [CLS] w1 w2 w3 [SEP]
    np.testing.assert_array_equal(loaded(x)["sequence_output"], encoder(x)["sequence_output"])
    classifier = BertClassifier.from_preset(str(path), progress=False, num_classes=3)
    assert classifier(x).shape == (2, 3) and classifier.predict(["w1 w2 w3", "w4"], verbose=0).shape == (2, 3)
    assert classifier.preprocessor.vocab == UNCASED_VOCAB
    np.testing.assert_array_equal(classifier.encoder(x)["pooled_output"], encoder(x)["pooled_output"])


def test_the_cache_keeps_a_checkpoints_masked_lm_head_for_fill_mask(tmp_path, monkeypatch):
    from bert_keras.loading import load_backbone_and_heads
    from bert_keras.tasks import BertPretrainer
    monkeypatch.setenv("BERT_KERAS_HOME", str(tmp_path / "home"))
    pretrainer = BertPretrainer(BertEncoder(CONFIG))
    pretrainer.mlm_head.output_bias.assign(np.arange(CONFIG.vocab_size, dtype="float32"))
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(UNCASED_VOCAB) + "\n")
    save_google_checkpoint(pretrainer.encoder, str(tmp_path / "ckpt"), vocab_file=str(vocab),
                           heads=pretrainer.head_weights())
    folder = get(str(tmp_path / "ckpt"), progress=False)
    _, _, heads = load_backbone_and_heads(folder)
    want = {k: v for k, v in pretrainer.head_weights().items() if k.startswith("cls/predictions/")}
    assert sorted(heads) == sorted(want)
    for name, value in want.items():
        np.testing.assert_array_equal(heads[name], value)
