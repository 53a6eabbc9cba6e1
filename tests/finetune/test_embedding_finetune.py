"""`finetune --task embedding` and `--task rerank` (bert_keras/finetune/embedding.py) on bert_tiny and a few rows:
the cached (GradCache) step's parameter gradients equal the plain loss's; each task trains through the command
line, lowers its loss and saves the model a user loads (a BertEmbedder, a BertReranker); bad data is one line."""

import dataclasses
import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_keras import PRESETS, BertEncoder, BertPreprocessor
from bert_keras.finetune import FinetuneConfig, finetune
from bert_keras.finetune.embedding import EmbeddingTask
from bert_keras.finetune.embedding_model import EmbeddingTrainingModel
from bert_keras.tasks import BertEmbedder, BertReranker
from bert_keras.tasks.embedding_losses import MultipleNegativesRankingLoss
from bert_keras_cli.main import main

TOPICS = ["cats", "dogs", "rain", "music", "football", "coffee", "trains", "mountains", "books", "the sea", "bread",
          "winter"]


def rows_file(path):
    with open(path, "w", encoding="utf-8") as f:
        for i, topic in enumerate(TOPICS):
            f.write(json.dumps({"anchor": f"what do you know about {topic}?",
                                "positive": f"a short passage about {topic} and more {topic}",
                                "negative": f"a passage about {TOPICS[(i + 3) % len(TOPICS)]}"}) + "\n")
    return str(path)


def scored_file(path, shared=None):
    """A scored-pair TSV with a header (query, passage, label in [0, 1])."""
    with open(path, "w", encoding="utf-8") as f:
        f.write("query\tpassage\tlabel\n")
        for i, topic in enumerate(TOPICS):
            f.write(f"about {topic}\ta passage about {topic}\t1\n")
            f.write(f"about {topic}\ta passage about {TOPICS[(i + 5) % len(TOPICS)]}\t0\n")
    return str(path)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("embedding_data")
    return {"rows": rows_file(folder / "rows.jsonl"), "scored": scored_file(folder / "pairs.tsv")}


@pytest.mark.parametrize("rows,columns,mini_batch", [(5, 3, 2), (6, 2, 3), (4, 2, 8)])
def test_cached_gradients_equal_the_plain_losses(minilm_vocab, rows, columns, mini_batch):
    """GradCache: embeddings in mini-batches without gradients, the loss's gradient for them once, then each
    mini-batch again with its cached gradients: the parameter gradients of the plain loss on the whole batch
    (bert_tiny without dropout; mini-batches that do not divide the batch, and one larger than it)."""
    keras.utils.set_random_seed(0)
    config = dataclasses.replace(PRESETS["bert_tiny"], hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    embedder = BertEmbedder(BertEncoder(config), preprocessor=BertPreprocessor(minilm_vocab, max_seq_length=32))
    model = EmbeddingTrainingModel(embedder, mini_batch_size=mini_batch)
    model.compile(optimizer="sgd", loss=MultipleNegativesRankingLoss())
    texts = [[f"{TOPICS[(i + c) % 12]} row {i} column {c}" * (1 + (i + c) % 3) for c in range(columns)]
             for i in range(rows)]
    x, y = embedder.preprocessor(tf.constant(texts)), tf.zeros([rows])
    with tf.GradientTape() as tape:
        plain_loss = model.compute_loss(x, y, model(x, training=True))
    plain = tape.gradient(plain_loss, model.trainable_weights)
    loss, cached = model.cached_gradients(x, y)
    assert float(plain_loss) > 0.1
    np.testing.assert_allclose(float(loss), float(plain_loss), atol=1e-6)
    assert len(cached) == len(plain)
    worst = max(float(np.abs(np.asarray(tf.convert_to_tensor(p)) - np.asarray(c)).max())
                for p, c in zip(plain, cached) if p is not None)
    largest = max(float(np.abs(np.asarray(tf.convert_to_tensor(p))).max()) for p in plain if p is not None)
    assert worst < 1e-5 and largest > 1e-3


@pytest.mark.parametrize("loss", ["mnrl", "cached-mnrl"])
def test_embedding_training_lowers_the_loss_and_saves_an_embedder(data, minilm_vocab, tmp_path, loss):
    """MNRL trains 3 epochs and its loss falls; the cached step trains one epoch (batches of 4 rows in
    mini-batches of 3: the last one short) through Keras' fit, then both save a plain BertEmbedder."""
    epochs = 3 if loss == "mnrl" else 1
    result = finetune(FinetuneConfig(task="embedding", model="bert_tiny", vocab=minilm_vocab, out=str(tmp_path / loss),
                                     train=data["rows"], eval=data["rows"] if loss == "mnrl" else None,
                                     epochs=epochs, batch_size=4, learning_rate=1e-3, max_seq_length=32,
                                     progress=False, task_args={"loss": loss, "mini_batch_size": 3}))
    assert len(result["loss"]) == epochs and all(np.isfinite(result["loss"]))
    if loss == "mnrl":
        assert result["loss"][-1] < result["loss"][0] * 0.8, result["loss"]
        assert result["metrics"]["ndcg@10"] >= result["history"][0]["ndcg@10"]
    saved = keras.models.load_model(tmp_path / loss / "model.keras", safe_mode=True)
    assert type(saved) is BertEmbedder
    texts = [f"what do you know about {t}?" for t in TOPICS[:3]]
    np.testing.assert_allclose(saved.encode(texts), result["model"].embedder.encode(texts), atol=1e-6)


def test_cli_scored_pairs_train_with_cosent_and_rerank_with_bce(data, minilm_vocab, tmp_path, capsys):
    common = ["--model", "bert_tiny", "--vocab", minilm_vocab, "--epochs", "1", "--batch-size", "8",
              "--max-seq-length", "32", "--quiet"]
    assert main(["finetune", "--task", "embedding", "--train", data["scored"], "--eval", data["scored"],
                 "--out", str(tmp_path / "cosent"), *common]) == 0
    metrics = json.loads((tmp_path / "cosent" / "metrics.json").read_text())
    assert set(metrics["final"]) >= {"spearman_cosine", "pearson_cosine"}
    assert main(["finetune", "--task", "rerank", "--train", data["scored"], "--eval", data["scored"],
                 "--out", str(tmp_path / "rerank"), *common]) == 0
    reranker = keras.models.load_model(tmp_path / "rerank" / "model.keras", safe_mode=True)
    assert type(reranker) is BertReranker
    scores = reranker.predict([("about cats", "a passage about cats"), ("about cats", "a passage about bread")])
    assert scores.shape == (2,) and ((scores > 0) & (scores < 1)).all()          # after the sigmoid
    assert "spearman" in json.loads((tmp_path / "rerank" / "metrics.json").read_text())["final"]
    capsys.readouterr()


def test_a_sentence_transformers_folder_keeps_its_modules(minilm_dir):
    """--model <all-MiniLM-L6-v2 as it ships>: the model trained starts as the folder's own embedder (mean
    pooling, its Normalize module), not a new --pooling head: the same vectors as the folder loaded for encode."""
    from bert_keras.tasks.sentence_transformers import load_sentence_transformer
    from bert_keras.finetune.source_head import start_from_source_head
    from bert_keras.loading import load_backbone
    task = EmbeddingTask("embedding", pooling="cls")
    model = task.build_model(*load_backbone(minilm_dir, max_seq_length=128), [])
    note = start_from_source_head(model, minilm_dir)
    assert note.startswith(f"continuing the sentence-transformers modules of {minilm_dir}: pooling mean, 0 Dense, "
                           "normalized"), note
    texts = ["A man is playing a flute.", "The cat sits outside."]
    reference = load_sentence_transformer(minilm_dir).encode(texts)
    np.testing.assert_allclose(model.embedder.encode(texts), reference, atol=1e-6)
    assert len(model.trainable_weights) == len(model.embedder.trainable_weights)


def test_a_scored_file_chooses_cosent_and_rows_choose_mnrl(data):
    task = EmbeddingTask("embedding")
    task.read(data["scored"])
    assert task.loss == "cosent" and task.metric_name == "spearman_cosine"
    task = EmbeddingTask("embedding")
    task.read(data["rows"])
    assert task.loss == "mnrl" and task.metric_name == "ndcg@10"


@pytest.mark.parametrize("argv,names", [
    (["--task", "embedding", "--loss", "cosent", "--train", "{rows}"], ["cosent trains on scored pairs", "rows.jsonl"]),
    (["--task", "embedding", "--loss", "mnrl", "--train", "{scored}"], ["pairs are scored", "--loss cosent"]),
    (["--task", "rerank", "--train", "{rows}"], ["scored pairs", "add a score"]),
    (["--task", "sst-2", "--loss", "mnrl", "--train", "{rows}"], ["--loss", "--task embedding"]),
])
def test_bad_input_is_one_line(data, minilm_vocab, tmp_path, capsys, argv, names):
    argv = [a.format(**data) for a in argv]
    code = main(["finetune", *argv, "--model", "bert_tiny", "--vocab", minilm_vocab, "--out", str(tmp_path / "run"),
                 "--quiet", "--batch-size", "4"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert all(name in err for name in names), err
    assert not (tmp_path / "run").exists()


def test_scores_outside_0_1_are_refused_for_a_reranker(tmp_path, minilm_vocab, capsys):
    path = tmp_path / "scores.tsv"
    path.write_text("query\tpassage\tscore\na\tb\t3.5\nc\td\t0.5\n", encoding="utf-8")
    code = main(["finetune", "--task", "rerank", "--train", str(path), "--model", "bert_tiny", "--vocab",
                 minilm_vocab, "--out", str(tmp_path / "run"), "--quiet", "--batch-size", "1"])
    err = capsys.readouterr().err
    assert code == 2 and "1 scores outside [0, 1] (e.g. 3.5)" in err and len(err.strip().splitlines()) == 1
