"""Word features on the real all-MiniLM-L6-v2 against transformers: every layer choice equals the same combination
of `BertModel.from_pretrained(folder)(..., output_hidden_states=True).hidden_states`, read at each word's first
piece as the HF fast tokenizer's `word_ids()` says (an independent alignment), within 1e-5 per layer (a sum of k
layers within k * 1e-5: on an AVX-512 host the sum of all 7 was 1.7e-5 off), on texts with multi-piece words,
accented and CJK text."""

import numpy as np
import pytest

from bert_keras.features import LAYER_CHOICES, word_features

pytestmark = pytest.mark.torch

TEXTS = ["The unbelievably naïve Zürich café reopened yesterday.",
         "東京タワーは高い。Tokyo Tower is tall!",
         "Hyperparameterization of transformers, e.g. BERT's, isn't trivial.",
         "ok"]


@pytest.fixture(scope="module")
def reference(minilm_dir):
    """Per text: HF's hidden states [L + 1, S, H] at each word's first piece -> [words, L + 1, H], and the words'
    first and all pieces (for the mean)."""
    import torch
    import transformers
    tokenizer = transformers.AutoTokenizer.from_pretrained(minilm_dir)
    model = transformers.BertModel.from_pretrained(minilm_dir).eval()
    first, mean = [], []
    for text in TEXTS:
        encoded = tokenizer(text, return_tensors="pt")
        with torch.no_grad():
            states = torch.stack(model(**encoded, output_hidden_states=True).hidden_states)[:, 0].numpy()
        word_ids = encoded.word_ids(0)
        words = sorted({w for w in word_ids if w is not None})
        first.append(np.stack([states[:, word_ids.index(w)] for w in words]))
        mean.append(np.stack([states[:, [i for i, v in enumerate(word_ids) if v == w]].mean(1) for w in words]))
    return {"first": np.concatenate(first), "mean": np.concatenate(mean),
            "pieces_per_word": [sum(1 for v in encoded.word_ids(0) if v == w) for text in TEXTS
                                for encoded in [tokenizer(text)] for w in sorted(set(encoded.word_ids(0)) - {None})]}


def combination(states, choice):
    """states [W, L + 1, H] -> the choice's features, computed here independently."""
    return {"embeddings": states[:, 0], "last": states[:, -1], "second_to_last": states[:, -2],
            "sum_last_four": states[:, -4:].sum(1), "concat_last_four": states[:, -4:].reshape(len(states), -1),
            "sum_all": states.sum(1), "weighted_sum_last_four": states[:, -4:], "weighted_sum_all": states}[choice]


@pytest.fixture(scope="module")
def backbone(minilm_dir):
    from bert_keras.loading import load_backbone
    return load_backbone(minilm_dir)


@pytest.mark.parametrize("words", ["first", "mean"])
def test_every_choice_matches_transformers(backbone, reference, words):
    encoder, preprocessor = backbone
    assert max(reference["pieces_per_word"]) >= 3          # multi-piece words are in the texts
    diffs = {}
    for choice in LAYER_CHOICES:
        out = word_features(encoder, preprocessor, TEXTS, layers=choice, words=words)
        want = combination(reference[words], choice)
        assert out.features.shape == want.shape, choice
        diffs[choice] = float(np.abs(out.features - want).max())
    print(f"max |ours - transformers| per choice ({words}):", diffs)
    summed = {"sum_last_four": 4, "sum_all": reference[words].shape[1]}      # layers added up by the choice
    assert all(diffs[c] < 1e-5 * summed.get(c, 1) for c in diffs), diffs
