"""Fetch a released checkpoint by name: download (resumable) → verify → convert → cache as `.keras`.

Cache layout, under $BERT_KERAS_HOME (default: $XDG_CACHE_HOME/bert_keras, i.e. ~/.cache/bert_keras):
  downloads/<archive>          the archive as published (kept, so a re-conversion needs no network)
  downloads/<archive>.part     an interrupted download; the next `get` resumes it with an HTTP Range request
  models/<name>/               model.keras, vocab.txt, bert_config.json, zoo.json, written to a temporary folder
                               and renamed into place, so a half-converted model is never seen.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import zipfile

import numpy as np

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
    return os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "bert_keras")


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
    """The masked-LM head `_convert` kept in a cached model folder, {`cls/predictions/...`: array}; {} when the
    checkpoint had none (or was cached before the head was kept)."""
    path = os.path.join(folder, MLM_HEAD_FILE)
    if not os.path.exists(path):
        return {}
    with np.load(path) as f:
        return {name.replace(":", "/"): f[name] for name in f.files}


def _convert(folder: str, target: str, metadata: dict) -> str:
    """Converts a checkpoint folder into target/ (model.keras, vocab.txt, bert_config.json, zoo.json, and
    mlm_head.npz when the checkpoint has the masked-LM head), atomically."""
    from bert_keras.checkpoints import load_checkpoint_with_heads
    config, encoder, heads = load_checkpoint_with_heads(folder)
    with atomic_directory(target) as tmp:
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
    """Returns a cached model folder for a catalogue name, a local archive, or an unpacked checkpoint folder."""
    catalogue = catalogue if catalogue is not None else load_catalogue()
    home = cache_dir()
    if os.path.isdir(name) and os.path.exists(os.path.join(name, "model.keras")):
        return name                                        # already a converted model folder
    if os.path.isdir(name):
        try:                                  # vocab.txt, else a Hugging Face tokenizer.json (transformers 5)
            vocab, lower = folder_vocabulary(name)
            lower = (not vocab_is_cased(load_vocab(vocab))) if lower is None else lower
        except MissingVocabularyError:
            raise ZooError(f"{name} holds neither vocab.txt nor tokenizer.json: put the vocab.txt the checkpoint "
                           "was trained with beside it.") from None
        except ValueError as e:
            raise ZooError(str(e)) from None
        key = os.path.basename(os.path.abspath(name))
        return _convert(name, os.path.join(home, "models", f"local-{key}"),
                        {"name": key, "source": os.path.abspath(name), "lower_case": lower})
    if os.path.isfile(name):
        with tempfile.TemporaryDirectory() as tmp:
            folder = _extract(name, tmp)
            with open(os.path.join(folder, "vocab.txt"), encoding="utf-8") as f:
                lower = not vocab_is_cased(f.read().splitlines())
            key = os.path.basename(name).split(".")[0]
            return _convert(folder, os.path.join(home, "models", f"local-{key}"),
                            {"name": key, "source": os.path.abspath(name), "lower_case": lower})
    if name not in catalogue:
        raise ZooError(f"Unknown checkpoint {name!r}. `bert-keras zoo list` shows the catalogue; a local archive "
                       "or checkpoint folder path works too.")
    entry = catalogue[name]
    target = os.path.join(home, "models", name)
    if os.path.exists(os.path.join(target, "model.keras")):
        return target
    archive = os.path.join(home, "downloads", entry.archive)
    if not os.path.exists(archive):
        download(entry.url, archive, progress=progress)
    verify_archive(archive, entry)
    with tempfile.TemporaryDirectory(dir=os.path.join(home, "downloads")) as tmp:
        try:
            folder = _extract(archive, tmp)
        except ZooError:
            os.remove(archive)
            raise
        verify_checkpoint(folder, entry)
        return _convert(folder, target, {"name": name, "source": entry.url, "lower_case": entry.lower_case,
                                         "sha256": sha256_of(archive)})
