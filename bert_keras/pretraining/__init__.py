"""Pretraining: google-research's data format and instance recipe (instances.py, records.py), tf.data pipelines
(dataset.py) and the resumable training loop (trainer.py)."""

from __future__ import annotations

import os

from bert_keras.pretraining.instances import Instance, MaskingConfig, create_instances, read_documents, \
    tokenize_documents
from bert_keras.pretraining.records import check_records, feature_spec, record_files, write_records
from bert_keras.pretraining.trainer import PretrainConfig, pretrain


def create_pretraining_data(inputs: list[str], preprocessor, out: str, num_shards: int = 1,
                            config: MaskingConfig = MaskingConfig(), seed: int = 12345) -> dict:
    """Text files -> `<out>-0000i-of-0000n.tfrecord` shards; returns counts."""
    missing = [f for f in inputs if not os.path.exists(f)]
    if missing:
        raise FileNotFoundError(f"no such file: {', '.join(missing)}")
    documents = tokenize_documents(read_documents(inputs), preprocessor)
    if len(documents) < 2:
        raise ValueError(f"{len(documents)} non-empty document(s) in {', '.join(inputs)}: next-sentence "
                         "prediction needs at least two (separate documents by a blank line)")
    instances = create_instances(documents, list(preprocessor.vocab), config, seed)
    paths = [f"{out}-{i:05d}-of-{num_shards:05d}.tfrecord" for i in range(num_shards)]
    write_records(instances, paths, config.max_seq_length, config.max_predictions_per_seq)
    return {"documents": len(documents), "sentences": sum(len(d) for d in documents),
            "instances": len(instances), "files": paths}


__all__ = ["Instance", "MaskingConfig", "PretrainConfig", "check_records", "create_instances",
           "create_pretraining_data", "feature_spec", "pretrain", "read_documents", "record_files",
           "tokenize_documents", "write_records"]
