"""Outputs and inputs on a file system that is not POSIX: TensorFlow's `ram://` (tf.io.gfile's in-memory file
system, which has no folder rename: a renamed folder loses its files), standing in for `gs://`. Every write keeps
the local guarantee: a target is whole or absent, a failure leaves nothing half-written and no temporary object."""

import json
import uuid

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_keras import storage
from bert_keras.atomic import atomic_directory, atomic_file, write_json
from bert_keras.training import resume

gfile = tf.io.gfile


@pytest.fixture
def bucket():
    """A fresh `ram://` folder (the file system lives as long as the process)."""
    root = f"ram://bucket-{uuid.uuid4().hex[:8]}"
    gfile.makedirs(root)
    yield root
    if gfile.exists(root):
        gfile.rmtree(root)


def _files(root: str) -> list[str]:
    """Every file under `root`, as paths relative to it."""
    return sorted(f"{top[len(root):].strip('/')}/{name}".lstrip("/") for top, _, names in gfile.walk(root)
                  for name in names)


def test_scheme_detection():
    assert storage.is_remote("gs://b/x") and storage.is_remote("ram://x") and storage.is_remote("hdfs://n/x")
    assert not storage.is_remote("runs/x") and not storage.is_remote("/abs/x") and not storage.is_remote(None)
    assert not storage.is_remote("bert_tiny")


def test_atomic_file_on_a_bucket_replaces_whole_or_not_at_all(bucket, monkeypatch):
    target = f"{bucket}/run/metrics.json"
    write_json(target, {"step": 1})
    assert json.loads(gfile.GFile(target).read()) == {"step": 1} and _files(bucket) == ["run/metrics.json"]
    # The rename into place fails (a lost connection): the old file stays, no temporary object is left.
    real_rename = gfile.rename
    monkeypatch.setattr(gfile, "rename", lambda *a, **k: (_ for _ in ()).throw(tf.errors.UnavailableError(
        None, None, "connection reset")))
    with pytest.raises(OSError, match="connection reset"):
        write_json(target, {"step": 2})
    assert json.loads(gfile.GFile(target).read()) == {"step": 1} and _files(bucket) == ["run/metrics.json"]
    monkeypatch.setattr(gfile, "rename", real_rename)
    # The writer fails half-way: nothing is uploaded.
    with pytest.raises(RuntimeError):
        with atomic_file(f"{bucket}/run/model.keras") as tmp:
            with open(tmp, "wb") as f:
                f.write(b"half")
            raise RuntimeError("killed")
    assert _files(bucket) == ["run/metrics.json"]


def test_a_folder_on_a_bucket_is_published_with_its_keystone_last(bucket, monkeypatch):
    order = []
    real_upload = storage.upload_file
    monkeypatch.setattr(storage, "upload_file", lambda local, target: (order.append(target.rsplit("/", 1)[1]),
                                                                        real_upload(local, target)))
    with atomic_directory(f"{bucket}/serving/1", last=("saved_model.pb",)) as tmp:
        tf.saved_model.save(tf.Module(), tmp)
    assert order[-1] == "saved_model.pb" and len(order) == len(set(order)) >= 4
    assert "saved_model.pb" in gfile.listdir(f"{bucket}/serving/1")
    assert gfile.isdir(f"{bucket}/serving/1/assets")                     # empty folders are kept too
    # TF Serving's loader (the TF1 loader's path) opens it on the bucket.
    with tf.compat.v1.Session(graph=tf.Graph()) as session:
        tf.compat.v1.saved_model.loader.load(session, ["serve"], f"{bucket}/serving/1")


def test_a_failed_folder_upload_leaves_nothing(bucket, monkeypatch):
    real_upload, calls = storage.upload_file, []

    def failing(local, target):
        calls.append(target)
        if len(calls) == 3:
            raise OSError("quota exceeded")
        real_upload(local, target)
    monkeypatch.setattr(storage, "upload_file", failing)
    with pytest.raises(OSError, match="quota exceeded"):
        with atomic_directory(f"{bucket}/serving/1", last=("saved_model.pb",)) as tmp:
            tf.saved_model.save(tf.Module(), tmp)
    assert _files(bucket) == [] and not any(c.endswith("saved_model.pb") for c in calls)


def test_local_copy_of_a_file_a_folder_and_a_checkpoint_prefix(bucket):
    gfile.makedirs(f"{bucket}/model/sub")
    for name, text in (("model/config.json", "{}"), ("model/sub/vocab.txt", "[PAD]\n")):
        with gfile.GFile(f"{bucket}/{name}", "w") as f:
            f.write(text)
    folder = storage.local_copy(f"{bucket}/model")
    assert open(f"{folder}/sub/vocab.txt").read() == "[PAD]\n" and open(f"{folder}/config.json").read() == "{}"
    assert storage.local_copy(f"{bucket}/model/") == folder                      # copied once per process
    assert open(storage.local_copy(f"{bucket}/model/config.json")).read() == "{}"
    checkpoint = tf.train.Checkpoint(v=tf.Variable([1.0, 2.0]))
    prefix = checkpoint.write(f"{bucket}/ckpt/model.ckpt")
    with gfile.GFile(f"{bucket}/ckpt/bert_config.json", "w") as f:
        f.write("{}")
    local = storage.local_copy(prefix)
    reader = tf.train.load_checkpoint(local)
    np.testing.assert_array_equal(reader.get_tensor("v/.ATTRIBUTES/VARIABLE_VALUE"), [1.0, 2.0])
    assert open(local.rsplit("/", 1)[0] + "/bert_config.json").read() == "{}"
    with pytest.raises(FileNotFoundError, match="no such file or folder"):
        storage.local_copy(f"{bucket}/nothing")
    assert storage.local_copy("bert_tiny") == "bert_tiny"


def test_a_resume_point_on_a_bucket_survives_a_failed_save(bucket, monkeypatch):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile("adam", "mse")
    model.fit(np.ones((4, 3)), np.ones((4, 2)), verbose=0)
    folder = f"{bucket}/run/backup"
    resume.save_resume_point(model, folder, 5, {"step": 5})
    kept = [w.copy() for w in model.get_weights()]
    model.fit(np.ones((4, 3)), np.zeros((4, 2)), verbose=0)
    real_upload = storage.upload_file
    monkeypatch.setattr(storage, "upload_file", lambda local, target: (_ for _ in ()).throw(
        OSError("no space left in the bucket")) if target.endswith("state.json") else real_upload(local, target))
    with pytest.raises(OSError, match=r"could not save the resume point at 10 in .*the point at 5 is kept") as e:
        resume.save_resume_point(model, folder, 10, {"step": 10})
    assert "\n" not in str(e.value)
    assert sorted(gfile.listdir(folder)) == ["state.json", "weights-5.weights.h5"]
    fresh = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    fresh.compile("adam", "mse")
    fresh.optimizer.build(fresh.trainable_variables)
    assert resume.restore_resume_point(fresh, folder)["step"] == 5
    for a, b in zip(fresh.get_weights(), kept):
        np.testing.assert_array_equal(a, b)


def test_a_run_folder_on_a_bucket(bucket):
    out = f"{bucket}/run"
    write_json(f"{out}/model.keras", {})                  # a finished run's result (content does not matter)
    with pytest.raises(FileExistsError, match="holds a finished run"):
        with resume.run_folder(out, f"{out}/backup", "model.keras", ("model.keras",)):
            pass
    with resume.run_folder(out, f"{out}/backup", "model.keras", ("model.keras",), overwrite=True):
        assert not gfile.exists(f"{out}/model.keras")
    with pytest.raises(RuntimeError):                     # a new run that fails before its first point: removed
        with resume.run_folder(f"{bucket}/new", f"{bucket}/new/backup", "model.keras", ("model.keras",)):
            write_json(f"{bucket}/new/metrics.json", {})
            raise RuntimeError("refused")
    assert _files(f"{bucket}/new") == []


def test_gfile_errors_come_out_as_os_errors(bucket):
    with pytest.raises(FileNotFoundError, match="no such file"):
        storage.open(f"{bucket}/missing.txt")
    with pytest.raises(FileNotFoundError):
        storage.listdir(f"{bucket}/missing")
    storage.remove(f"{bucket}/missing.txt")               # nothing to delete: no error, as locally
    storage.rmtree(f"{bucket}/missing")


def test_a_changed_remote_file_is_copied_again(bucket):
    with gfile.GFile(f"{bucket}/model.json", "w") as f:
        f.write("1")
    first = storage.local_copy(f"{bucket}/model.json")
    assert storage.local_copy(f"{bucket}/model.json") == first            # unchanged: the same copy
    gfile.remove(f"{bucket}/model.json")                # (ram:// appends where a bucket replaces)
    with gfile.GFile(f"{bucket}/model.json", "w") as f:
        f.write("22")
    assert open(storage.local_copy(f"{bucket}/model.json")).read() == "22"


def test_a_killed_uploads_leftover_is_removed_by_the_next_upload(bucket):
    with gfile.GFile(f"{bucket}/run/.metrics.json.partial-0123456789ab", "w") as f:
        f.write("{")                                     # what a process killed mid-upload leaves
    write_json(f"{bucket}/run/metrics.json", {"step": 3})
    assert _files(bucket) == ["run/metrics.json"]
