"""Embedders and rerankers against sentence-transformers 6.2 itself (torch tier, issue 56): `encode` within 1e-5
on the real all-MiniLM-L6-v2 folder as it ships (the 5.x module layout) and on folders sentence-transformers 6.2
saves (the 6.x layout): CLS pooling with prompts, mean_sqrt_len_tokens with a Dense layer and no Normalize,
weightedmean leaving the prompt out of the pooling, max pooling; a text longer than max_seq_length and the empty
string in every batch. A CrossEncoder folder's predict and rank equal CrossEncoder's. STS-B dev Spearman and
SQuAD question-to-paragraph retrieval equal sentence-transformers' evaluators' on the same model."""

import json

import numpy as np
import pytest

pytestmark = pytest.mark.torch

torch = pytest.importorskip("torch")
st = pytest.importorskip("sentence_transformers")

from bert_keras.metrics.embeddings import retrieval_scores, sts_scores  # noqa: E402
from bert_keras.tasks import BertEmbedder, BertReranker, load_task_model  # noqa: E402

TEXTS = ["A man is playing a guitar.", "", "Ünïcödé — “quoted” text", "the cat " * 60, "query: already prefixed"]
PROMPTS = {"query": "query: ", "passage": "passage: "}


def _modules(minilm_dir, pooling, dense=None, normalize=True, include_prompt=True):
    from sentence_transformers.base.modules import Dense, Normalize, Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling
    modules = [Transformer(minilm_dir, max_seq_length=64), Pooling(384, pooling_mode=pooling,
                                                                    include_prompt=include_prompt)]
    if dense:
        torch.manual_seed(0)
        modules.append(Dense(384 * (len(pooling) if isinstance(pooling, tuple) else 1), dense[0],
                             activation_function=dense[1]))
    if normalize:
        modules.append(Normalize())
    return modules


@pytest.fixture(scope="module")
def folders(minilm_dir, tmp_path_factory):
    """{name: (folder, prompt names)}: the shipped folder, and folders sentence-transformers 6.2 saves itself."""
    root = tmp_path_factory.mktemp("st_folders")
    made = {"shipped": (minilm_dir, [None])}
    specs = {"cls_prompts": dict(pooling="cls"),
             "mean_sqrt_dense": dict(pooling="mean_sqrt_len_tokens", dense=(128, torch.nn.Tanh()), normalize=False),
             "weightedmean_no_prompt": dict(pooling="weightedmean", include_prompt=False),
             "max_cls_identity": dict(pooling=("max", "cls"), dense=(64, torch.nn.Identity()))}
    for name, spec in specs.items():
        model = st.SentenceTransformer(modules=_modules(minilm_dir, **spec), prompts=PROMPTS, device="cpu")
        model.save(str(root / name))
        made[name] = (str(root / name), [None, "query", "passage"])
    return made


@pytest.mark.parametrize("name", ["shipped", "cls_prompts", "mean_sqrt_dense", "weightedmean_no_prompt",
                                  "max_cls_identity"])
def test_encode_equals_sentence_transformers(folders, name):
    folder, prompt_names = folders[name]
    reference = st.SentenceTransformer(folder, device="cpu")
    ours = load_task_model(folder)
    assert isinstance(ours, BertEmbedder)
    assert ours.preprocessor.max_seq_length == reference.max_seq_length
    for prompt_name in prompt_names:
        want = reference.encode(TEXTS, prompt_name=prompt_name, convert_to_numpy=True)
        got = ours.encode(TEXTS, prompt_name=prompt_name)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, atol=1e-5, err_msg=f"{name}, prompt {prompt_name}")


def test_the_6x_layout_is_what_was_read(folders):
    """The saved folders carry sentence-transformers 6.x's module paths, the shipped one 5.x's."""
    new = json.load(open(f"{folders['cls_prompts'][0]}/modules.json"))
    old = json.load(open(f"{folders['shipped'][0]}/modules.json"))
    assert any(m["type"].startswith("sentence_transformers.base.modules") for m in new)
    assert all(m["type"].startswith("sentence_transformers.models.") for m in old)


@pytest.fixture(scope="module")
def cross_encoder_folder(minilm_dir, tmp_path_factory):
    torch.manual_seed(0)
    model = st.CrossEncoder(minilm_dir, num_labels=1, max_length=64, device="cpu")
    folder = tmp_path_factory.mktemp("cross_encoder") / "ce"
    model.save(str(folder))
    return str(folder)


def test_cross_encoder_predict_and_rank(cross_encoder_folder):
    reference = st.CrossEncoder(cross_encoder_folder, device="cpu")
    ours = load_task_model(cross_encoder_folder)
    assert isinstance(ours, BertReranker)
    query = "Who plays the guitar?"
    passages = ["A man is playing a guitar.", "A woman slices an onion.", "", "guitar " * 80, "Music is loud."]
    pairs = [(query, p) for p in passages]
    np.testing.assert_allclose(ours.predict(pairs), reference.predict(pairs, convert_to_numpy=True), atol=1e-5)
    want = reference.rank(query, passages, top_k=3)
    got = ours.rank(query, passages, top_k=3)
    assert [r["corpus_id"] for r in got] == [r["corpus_id"] for r in want]
    np.testing.assert_allclose([r["score"] for r in got], [r["score"] for r in want], atol=1e-5)


def _sts_dev(shared_data):
    rows = [line.split("\t") for line in (shared_data / "stsbenchmark" / "sts-dev.csv").read_text(
        encoding="utf-8").splitlines()]
    return [r[5] for r in rows], [r[6] for r in rows], [float(r[4]) for r in rows]


def test_sts_dev_spearman_equals_the_evaluator(minilm_dir, shared_data):
    from sentence_transformers.sentence_transformer.evaluation import EmbeddingSimilarityEvaluator
    s1, s2, gold = _sts_dev(shared_data)
    reference = st.SentenceTransformer(minilm_dir, device="cpu")
    want = EmbeddingSimilarityEvaluator(s1, s2, gold, write_csv=False)(reference)
    ours = load_task_model(minilm_dir)
    got = sts_scores(ours.encode(s1, batch_size=64), ours.encode(s2, batch_size=64), gold)
    spearman = next(v for k, v in want.items() if k.endswith("spearman_cosine"))
    assert abs(got["spearman_cosine"] - spearman) < 1e-4, (got, spearman)
    assert abs(got["spearman_cosine"] - 0.8672) < 5e-4


def _squad_retrieval(shared_data, articles: int):
    data = json.loads((shared_data / "squad" / "train-split-v1.1.json").read_text(encoding="utf-8"))["data"]
    corpus, queries, relevant = [], [], []
    for article in data[:articles]:
        for paragraph in article["paragraphs"]:
            corpus.append(paragraph["context"])
            for qa in paragraph["qas"]:
                queries.append(qa["question"])
                relevant.append({len(corpus) - 1})
    return corpus, queries, relevant


@pytest.mark.parametrize("articles", [pytest.param(2, id="2_articles"),
                                      pytest.param(24, id="all_24", marks=pytest.mark.slow)])
def test_squad_retrieval_equals_the_evaluator(minilm_dir, shared_data, articles):
    from sentence_transformers.sentence_transformer.evaluation import InformationRetrievalEvaluator
    corpus, queries, relevant = _squad_retrieval(shared_data, articles)
    evaluator = InformationRetrievalEvaluator(
        {str(i): q for i, q in enumerate(queries)}, {str(i): c for i, c in enumerate(corpus)},
        {str(i): {str(d) for d in r} for i, r in enumerate(relevant)}, write_csv=False, batch_size=64)
    want = evaluator(st.SentenceTransformer(minilm_dir, device="cpu"))
    ours = load_task_model(minilm_dir)
    got = retrieval_scores(ours.encode(queries, batch_size=64), ours.encode(corpus, batch_size=64), relevant)
    for metric in ("ndcg@10", "mrr@10", "recall@10", "accuracy@1"):
        value = next(v for k, v in want.items() if k.endswith(f"cosine_{metric}"))
        assert abs(got[metric] - value) < 1e-4, (metric, got[metric], value)
