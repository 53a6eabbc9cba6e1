"""One input pipeline per host: the parts the pipelines read are disjoint and together the whole data, for
fine-tuning (examples) and pretraining (segments of records), also through the InputContexts of a real
2-worker MultiWorkerMirroredStrategy cluster on loopback. (Both workers ending with equal weights is
tests/pretraining/test_pretrain.py's two-worker test, which trains through the same pipelines.)"""

import collections
import json
import sys
import textwrap

import numpy as np
import pytest

from bert_keras.data import SAMPLES
from conftest import pretraining_records, run_workers

SEQ, PRED = 64, 10


def _rows(batches, *keys):
    """Multiset of the rows (tuples of the named features) in an iterable of (x, y) batches."""
    out = collections.Counter()
    for x, y in batches:
        features = {**x, **(y if isinstance(y, dict) else {"labels": y})}
        parts = [np.asarray(features[k]).reshape(len(np.asarray(features[k])), -1) for k in keys]
        out.update(tuple(np.concatenate(row).tolist()) for row in zip(*parts))
    return out


def test_fine_tuning_pipelines_split_the_examples(minilm_vocab):
    from bert_keras.finetune.registry import get_task
    from bert_keras.finetune.trainer import FinetuneConfig, training_input
    from bert_keras.loading import load_backbone
    task = get_task("sst-2")
    train = task.read(f"{SAMPLES}/sst2_train.tsv")[:96]
    config = FinetuneConfig(task="sst-2", model="bert_tiny", vocab=minilm_vocab, out="-", seq_length=48,
                            max_seq_length=48)
    model = task.build_model(*load_backbone("bert_tiny", minilm_vocab, seq_length=48, max_seq_length=48), train)
    whole = _rows(training_input(task, train, model, config, 0, 1, 8).take(96 // 8), "input_word_ids")
    assert sum(whole.values()) == 96 and max(whole.values()) == 1              # 96 distinct examples
    for shards in (2, 3):
        parts = [_rows(training_input(task, train, model, config, i, shards, 8).take(96 // shards // 8),
                       "input_word_ids") for i in range(shards)]
        assert sum(parts, collections.Counter()) == whole                     # together: every example once


@pytest.fixture(scope="module")
def records(minilm_vocab, tmp_path_factory):
    return pretraining_records(minilm_vocab, tmp_path_factory.mktemp("records"), 2, 2)


@pytest.mark.parametrize("shards", [2, 3])           # every 2nd or 3rd segment of 256 records
def test_pretraining_pipelines_split_the_records(records, shards):
    from bert_keras.pretraining.dataset import records_dataset
    read = lambda shard: _rows(records_dataset(records, 16, SEQ, PRED, training=False, shard=shard),  # noqa: E731
                               "input_word_ids", "masked_lm_positions")
    whole, parts = read((0, 1)), [read((i, shards)) for i in range(shards)]
    assert len(records) == 2 and sum(whole.values()) > 100
    assert sum(parts, collections.Counter()) == whole
    assert all(sum(p.values()) > 0 for p in parts)


@pytest.mark.integration
def test_two_workers_read_disjoint_halves(records, tmp_path):
    """Each worker of a real 2-worker cluster builds its pipeline from the InputContext the strategy gives it."""
    script = textwrap.dedent(f"""
        import json
        from bert_keras.training import create_strategy
        strategy = create_strategy("multi_worker")
        from bert_keras.pretraining.dataset import records_dataset
        from bert_keras.training.input_pipelines import distributed_input
        contexts = []
        def make(shard, shards, batch):
            contexts.append([shard, shards, batch])
            return records_dataset({records!r}, batch, {SEQ}, {PRED}, training=False, shard=(shard, shards))
        rows = []
        for x, _ in distributed_input(strategy, make, 16):
            for ids in strategy.experimental_local_results(x["input_word_ids"]):
                rows += ids.numpy().tolist()
        print(json.dumps({{"contexts": contexts, "rows": rows}}))
    """)
    outputs = run_workers([sys.executable, "-c", script], timeout=600)
    got = [json.loads(out.strip().splitlines()[-1]) for out in outputs]
    assert sorted(tuple(g["contexts"][0]) for g in got) == [(0, 2, 8), (1, 2, 8)]     # global 16 / 2 replicas
    from bert_keras.pretraining.dataset import records_dataset
    whole = collections.Counter(tuple(r) for x, _ in records_dataset(records, 16, SEQ, PRED, training=False)
                                for r in x["input_word_ids"].numpy().tolist())
    parts = [collections.Counter(tuple(r) for r in g["rows"]) for g in got]
    assert parts[0] + parts[1] == whole and not set(parts[0]) & set(parts[1])
