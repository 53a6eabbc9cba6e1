"""Pretraining: google-research's data format and instance recipe (instances.py, records.py), tf.data pipelines
(dataset.py) and the resumable training loop (trainer.py)."""

from __future__ import annotations

import os

from bert_keras.pretraining.instances import MaskingConfig, create_instances, read_documents, tokenize_documents
from bert_keras.pretraining.records import check_records, feature_spec, record_files, serialize_examples, \
    write_records
from bert_keras.pretraining.trainer import PretrainConfig, pretrain


def create_pretraining_data(inputs: list[str], preprocessor, out: str, num_shards: int = 1,
                            config: MaskingConfig = MaskingConfig(), seed: int = 12345,
                            progress: bool = False) -> dict:
    """Text files -> `<out>-0000i-of-0000n.tfrecord` shards; returns counts. `progress` shows a bar per phase."""
    missing = [f for f in inputs if not os.path.exists(f)]
    if missing:
        raise FileNotFoundError(f"no such file: {', '.join(missing)}")
    texts = read_documents(inputs)
    documents = tokenize_documents(texts, preprocessor, progress=_bar(sum(map(len, texts)), "sentences", progress))
    if len(documents) < 2:
        raise ValueError(f"{len(documents)} non-empty document(s) in {', '.join(inputs)}: next-sentence "
                         "prediction needs at least two (separate documents by a blank line)")
    instances = create_instances(documents, list(preprocessor.vocab), config, seed,
                                 progress=_bar(len(documents) * config.dupe_factor, "documents", progress))
    paths = [f"{out}-{i:05d}-of-{num_shards:05d}.tfrecord" for i in range(num_shards)]
    write_records(instances, paths, progress=_bar(instances.num_instances, "instances", progress))
    return {"documents": len(documents), "sentences": sum(map(len, documents.lengths)),
            "instances": instances.num_instances, "files": paths}


def _bar(total: int, unit: str, show: bool):
    """A keras Progbar's add() as a progress callback, or None."""
    if not show:
        return None
    import keras
    bar = keras.utils.Progbar(total, unit_name=unit)
    return bar.add


__all__ = ["MaskingConfig", "PretrainConfig", "check_records", "create_instances", "create_pretraining_data",
           "feature_spec", "pretrain", "read_documents", "record_files", "serialize_examples", "tokenize_documents",
           "write_records"]
