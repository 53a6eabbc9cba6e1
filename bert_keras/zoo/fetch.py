"""Fetch a released checkpoint by name: download (resumable) → verify → convert → cache as `.keras`.

Cache layout, under $BERT_KERAS_HOME (default: $XDG_CACHE_HOME/bert_keras, i.e. ~/.cache/bert_keras):
  downloads/<archive>          the archive as published (kept, so a re-conversion needs no network)
  downloads/<archive>.part     an interrupted download; the next `get` resumes it with an HTTP Range request
  models/<name>/               model.keras, vocab.txt, bert_config.json, zoo.json, written to a temporary folder
                               and renamed into place, so a half-converted model is never seen.

$BERT_KERAS_HOME may be a bucket (`gs://bucket/cache`, any tf.io.gfile scheme: storage.py). Archives are then
downloaded to the local cache's downloads/ (a resumable `.part` needs a local file; the archive is not copied to the
bucket), converted locally and `models/<name>/` is uploaded file by file with zoo.json last: a folder is a cached
model only when its zoo.json is there (`is_converted`), so an upload that stopped half-way is converted again. The
loaders read a cached folder through a local copy (storage.local_copy). A converted archive or checkpoint folder
is reused while its path, sizes and modification times are unchanged (zoo.json's `fingerprint`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import uuid
import zipfile

import numpy as np

from bert_keras import storage
from bert_keras.atomic import atomic_directory
from bert_keras.config import BertConfig
from bert_keras.preprocessing.folder_vocab import MissingVocabularyError, folder_vocabulary
from bert_keras.preprocessing.vocab import load_vocab, save_vocab, vocab_is_cased
from bert_keras.zoo.catalogue import CatalogueEntry, load_catalogue


class ZooError(Exception):
    """A checkpoint could not be fetched or verified; the message says what to do."""


def cache_dir() -> str:
    """Where downloads and converted models go: $BERT_KERAS_HOME, else $XDG_CACHE_HOME/bert_keras or ~/.cache."""
    home = os.environ.get("BERT_KERAS_HOME")
    if home:
        return home
    return _local_cache_dir()


def _local_cache_dir() -> str:
    return os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "bert_keras")


def download_dir() -> str:
    """Where archives are downloaded: $BERT_KERAS_HOME/downloads, or, for a cache on a bucket (`gs://...`), the
    local cache's downloads/ ($XDG_CACHE_HOME/bert_keras, else ~/.cache/bert_keras): a resumable download needs a
    local file."""
    home = cache_dir()
    return os.path.join(_local_cache_dir() if storage.is_remote(home) else home, "downloads")


def is_converted(folder: str) -> bool:
    """Is `folder` (local or on a bucket) a model folder the zoo converted: zoo.json beside model.keras? zoo.json
    is written last, so a folder whose upload stopped half-way is not one."""
    return (storage.exists(os.path.join(folder, "zoo.json"))
            and storage.exists(os.path.join(folder, "model.keras")))


@contextlib.contextmanager
def _cache_errors(home: str, action: str):
    """A cache on a bucket that cannot be read or written: one ZooError naming BERT_KERAS_HOME."""
    if not storage.is_remote(home):
        yield
        return
    import tensorflow as tf
    try:
        yield
    except (OSError, tf.errors.OpError) as e:
        reason = " ".join(str(e).split())
        raise ZooError(f"The zoo cache BERT_KERAS_HOME={home} cannot be {action} ({reason}): set BERT_KERAS_HOME to "
                       "a local folder or a bucket this machine can write.") from None


def _fingerprint(source: str) -> str | None:
    """The names, sizes and modification times of a local archive or checkpoint folder (None for a remote one:
    converted every time), so a cached conversion is reused only while its source is unchanged."""
    if storage.is_remote(source):
        return None
    files = ([source] if os.path.isfile(source) else
             sorted(os.path.join(root, n) for root, _, names in os.walk(source) for n in names))
    digest = hashlib.sha256()
    for path in files:
        stat = os.stat(path)
        digest.update(f"{os.path.relpath(path, source)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _use_cache(target: str, home: str, source: str | None = None, fingerprint: str | None = None) -> bool:
    """True when `target` holds a converted model to reuse (for a local source: converted from the same path with
    the same fingerprint). Otherwise, for a cache on a bucket, a probe object is written and removed, so a bucket
    that cannot be written is refused before a download and a conversion, not after."""
    with _cache_errors(home, "read"):
        if is_converted(target):
            if source is None:
                return True
            with storage.open(os.path.join(target, "zoo.json")) as f:
                metadata = json.load(f)
            if fingerprint is not None and (metadata.get("source"), metadata.get("fingerprint")) == (source,
                                                                                                    fingerprint):
                return True
    if storage.is_remote(home):
        probe = os.path.join(home, "models", f".write-probe-{uuid.uuid4().hex[:12]}")
        with _cache_errors(home, "written"):
            storage.makedirs(os.path.dirname(probe))
            with storage.open(probe, "wb") as f:
                f.write(b"probe")
        with contextlib.suppress(Exception):
            storage.remove(probe)
    return False


def _progress(done: int, total: int | None, started: float, label: str) -> None:
    mb = done / 1e6
    rate = mb / max(time.monotonic() - started, 1e-6)
    if total:
        sys.stderr.write(f"\r{label}: {mb:8.1f} / {total / 1e6:.1f} MB {100 * done / total:5.1f}% {rate:6.1f} MB/s")
    else:
        sys.stderr.write(f"\r{label}: {mb:8.1f} MB {rate:6.1f} MB/s")
    sys.stderr.flush()


def download(url: str, dest: str, progress: bool = True, timeout: float = 60.0) -> str:
    """Downloads url to dest through dest.part, resuming a partial file with a Range request."""
    part = dest + ".part"
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    start = os.path.getsize(part) if os.path.exists(part) else 0
    request = urllib.request.Request(url, headers={"Range": f"bytes={start}-"} if start else {})
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as e:
        if e.code == 416 and start:          # the partial file is already complete
            os.replace(part, dest)
            return dest
        raise ZooError(f"Downloading {url} failed: HTTP {e.code} {e.reason}.") from None
    except (urllib.error.URLError, OSError) as e:
        raise ZooError(
            f"Cannot reach {url} ({getattr(e, 'reason', e)}). Without network, download that file elsewhere and "
            f"place it at {dest} (or pass the archive's path or the unpacked folder instead of the name).") from None
    with response:
        if start and response.status != 206:   # the server ignored the Range header: start over
            start = 0
        length = response.headers.get("Content-Length")
        total = start + int(length) if length else None
        started, last = time.monotonic(), 0.0
        with open(part, "ab" if start else "wb") as f:
            done = start
            while True:
                chunk = response.read(1 << 20)
                if not chunk:
                    break
                f.write(chunk)
                done += len(chunk)
                if progress and time.monotonic() - last > 0.5:
                    _progress(done, total, started, os.path.basename(dest))
                    last = time.monotonic()
    if progress:
        _progress(done, total, started, os.path.basename(dest))
        sys.stderr.write("\n")
    if total is not None and done != total:
        raise ZooError(f"Download of {url} stopped at {done} of {total} bytes; run the same command again to resume.")
    os.replace(part, dest)
    return dest


def sha256_of(path: str) -> str:
    """The SHA-256 hex digest of a file, read 1 MB at a time."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_archive(path: str, entry: CatalogueEntry) -> None:
    """Checks size and sha256 where the catalogue records them; a bad archive is removed so it is fetched anew."""
    problems = []
    if entry.size is not None and os.path.getsize(path) != entry.size:
        problems.append(f"size {os.path.getsize(path)} bytes, expected {entry.size}")
    if entry.sha256 is not None:
        actual = sha256_of(path)
        if actual != entry.sha256:
            problems.append(f"sha256 {actual}, expected {entry.sha256}")
    if problems:
        os.remove(path)
        raise ZooError(f"{path} is corrupted ({'; '.join(problems)}); it was removed, run again to download it anew.")


def _extract(archive: str, into: str) -> str:
    """Unpacks a .zip or .tar.gz and returns the folder that holds bert_config.json."""
    try:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as z:
                for member in z.namelist():
                    if member.startswith("/") or ".." in member.split("/"):
                        raise ZooError(f"{archive} has an unsafe path {member!r}; refusing to unpack it.")
                z.extractall(into)
        elif tarfile.is_tarfile(archive):
            with tarfile.open(archive) as t:
                t.extractall(into, filter="data")
        else:
            raise ZooError(f"{archive} is neither a zip nor a tar archive (truncated or corrupted?); delete it "
                           "and run again.")
    except (zipfile.BadZipFile, tarfile.TarError, EOFError) as e:
        raise ZooError(f"{archive} cannot be unpacked ({e}); delete it and run again.") from None
    for root, _, files in os.walk(into):
        if "bert_config.json" in files:
            return root
    raise ZooError(f"{archive} holds no bert_config.json: not a google-research BERT checkpoint archive.")



def verify_checkpoint(folder: str, entry: CatalogueEntry) -> BertConfig:
    """The unpacked checkpoint agrees with its catalogue entry: config values, vocab size, casing."""
    config = BertConfig.from_json_file(os.path.join(folder, "bert_config.json"))
    want = entry.config()
    wrong = [f"{k}={getattr(config, k)} (catalogue: {getattr(want, k)})"
             for k in ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size", "vocab_size")
             if getattr(config, k) != getattr(want, k)]
    vocab_file = os.path.join(folder, "vocab.txt")
    if not os.path.exists(vocab_file):
        raise ZooError(f"{entry.name}: the archive has no vocab.txt.")
    with open(vocab_file, encoding="utf-8") as f:
        tokens = f.read().splitlines()
    if len(tokens) != config.vocab_size:
        wrong.append(f"vocab.txt has {len(tokens)} tokens, bert_config.json says {config.vocab_size}")
    if entry.cased is not None and vocab_is_cased(tokens) != entry.cased:
        wrong.append(f"vocab.txt looks {'cased' if vocab_is_cased(tokens) else 'uncased'}, the catalogue says "
                     f"{'cased' if entry.cased else 'uncased'}")
    if wrong:
        raise ZooError(f"{entry.name} does not match the catalogue: " + "; ".join(wrong))
    return config


MLM_HEAD_FILE = "mlm_head.npz"        # {google-research name with ":" for "/": array}


def cached_mlm_head(folder: str) -> dict:
    """The masked-LM head `_convert` kept in a cached model folder (local or on a bucket: read from a local copy),
    {`cls/predictions/...`: array}; {} when the checkpoint had none (or was cached before the head was kept)."""
    path = os.path.join(storage.local_copy(folder), MLM_HEAD_FILE)
    if not os.path.exists(path):
        return {}
    with np.load(path) as f:
        return {name.replace(":", "/"): f[name] for name in f.files}


def _convert(folder: str, target: str, metadata: dict, home: str) -> str:
    """Converts a checkpoint folder into target/ (model.keras, vocab.txt, bert_config.json, zoo.json, and
    mlm_head.npz when the checkpoint has the masked-LM head), atomically (on a bucket: zoo.json uploaded last)."""
    from bert_keras.checkpoints import load_checkpoint_with_heads
    config, encoder, heads = load_checkpoint_with_heads(folder)
    with _cache_errors(home, "written"), atomic_directory(target, last=("zoo.json",)) as tmp:
        encoder.save(os.path.join(tmp, "model.keras"))
        mlm = {name.replace("/", ":"): value for name, value in heads.items() if name.startswith("cls/predictions/")}
        if mlm:                                       # the masked-LM head, for fill-mask (cached_mlm_head reads it)
            np.savez(os.path.join(tmp, MLM_HEAD_FILE), **mlm)
        save_vocab(folder_vocabulary(folder)[0], os.path.join(tmp, "vocab.txt"))   # vocab.txt or tokenizer.json
        config.to_json_file(os.path.join(tmp, "bert_config.json"))
        with open(os.path.join(tmp, "zoo.json"), "w", encoding="utf-8") as f:
            json.dump(metadata, f, indent=1)
    return target


def get(name: str, progress: bool = True, catalogue: dict | None = None) -> str:
    """Returns a cached model folder for a catalogue name, a local archive, or an unpacked checkpoint folder.

    The folder is under $BERT_KERAS_HOME/models, which may be on a bucket (`gs://...`; read it through
    `storage.local_copy`). A name is downloaded and converted once; an archive or folder is converted again only
    when it changed (its path, file sizes or modification times).
    """
    catalogue = catalogue if catalogue is not None else load_catalogue()
    home = cache_dir()
    if storage.isdir(name) and is_converted(name):
        return name                                        # already a converted model folder
    local = storage.local_copy(name) if storage.is_remote(name) else name       # a checkpoint on a bucket
    source = name if storage.is_remote(name) else os.path.abspath(name)
    if os.path.isdir(local):
        try:                                  # vocab.txt, else a Hugging Face tokenizer.json (transformers 5)
            vocab, lower = folder_vocabulary(local)
            lower = (not vocab_is_cased(load_vocab(vocab))) if lower is None else lower
        except MissingVocabularyError:
            raise ZooError(f"{name} holds neither vocab.txt nor tokenizer.json: put the vocab.txt the checkpoint "
                           "was trained with beside it.") from None
        except ValueError as e:
            raise ZooError(str(e)) from None
        key = os.path.basename(os.path.abspath(local))
        target, fingerprint = os.path.join(home, "models", f"local-{key}"), _fingerprint(name)
        if _use_cache(target, home, source, fingerprint):
            return target
        return _convert(local, target, {"name": key, "source": source, "lower_case": lower,
                                        "fingerprint": fingerprint}, home)
    if os.path.isfile(local):
        key = os.path.basename(local).split(".")[0]
        target, fingerprint = os.path.join(home, "models", f"local-{key}"), _fingerprint(name)
        if _use_cache(target, home, source, fingerprint):
            return target
        with tempfile.TemporaryDirectory() as tmp:
            folder = _extract(local, tmp)
            with open(os.path.join(folder, "vocab.txt"), encoding="utf-8") as f:
                lower = not vocab_is_cased(f.read().splitlines())
            return _convert(folder, target, {"name": key, "source": source, "lower_case": lower,
                                             "fingerprint": fingerprint}, home)
    if name not in catalogue:
        raise ZooError(f"Unknown checkpoint {name!r}. `bert-keras zoo list` shows the catalogue; a local archive "
                       "or checkpoint folder path works too.")
    entry = catalogue[name]
    target = os.path.join(home, "models", name)
    if _use_cache(target, home):
        return target
    downloads = download_dir()
    archive = os.path.join(downloads, entry.archive)
    if not os.path.exists(archive):
        download(entry.url, archive, progress=progress)
    verify_archive(archive, entry)
    with tempfile.TemporaryDirectory(dir=downloads) as tmp:
        try:
            folder = _extract(archive, tmp)
        except ZooError:
            os.remove(archive)
            raise
        verify_checkpoint(folder, entry)
        return _convert(folder, target, {"name": name, "source": entry.url, "lower_case": entry.lower_case,
                                         "sha256": sha256_of(archive)}, home)
