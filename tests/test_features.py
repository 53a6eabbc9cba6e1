"""Word features (bert_keras.features) on a bert_tiny-sized encoder with 4 layers (random weights, the MiniLM
vocabulary): every layer choice equals the same combination of the encoder's own outputs at the words' first
pieces (found here from the vocabulary's "##" rule), the mean alignment, offsets of multi-piece, accented and CJK
words, pre-split words against the tagger's alignment, long texts, the scalar mix, errors, and the CLI's .npz."""

import dataclasses
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import bert_keras
from bert_keras import BertEncoder, BertPreprocessor
from bert_keras.features import (LAYER_CHOICES, WORD_CHOICES, ScalarMix, combine_hidden_states, hidden_state_indices,
                                 word_features)

TEXTS = ["The unbelievably naïve Zürich cat sat.", "東京 is big", "ok", "Hyperparameterization, again!"]


@pytest.fixture(scope="module")
def encoder():
    keras.utils.set_random_seed(3)
    return BertEncoder(dataclasses.replace(bert_keras.preset_config("bert_tiny"), num_hidden_layers=4))


@pytest.fixture(scope="module")
def pre(minilm_vocab):
    return BertPreprocessor(minilm_vocab, max_seq_length=64)


def reference_states(encoder, pre, texts):
    """All hidden states [L + 1] x [B, S, H] computed directly, the id dict, and per text the positions of the words'
    first pieces and each word's piece positions (from the vocabulary: a "##" piece continues a word)."""
    x = {k: v.numpy() for k, v in pre(texts).items()}
    out = encoder(x, training=False)
    states = [encoder.embeddings(x["input_word_ids"], x["input_type_ids"]).numpy()]
    states += [h.numpy() for h in out["encoder_outputs"]]
    words = []
    for row, mask in zip(x["input_word_ids"], x["input_mask"]):
        pieces = row[1:int(mask.sum()) - 1]
        text_words = []
        for p, piece in enumerate(pieces):
            if pre.vocab[piece].startswith("##"):
                text_words[-1].append(p + 1)
            else:
                text_words.append([p + 1])
        words.append(text_words)
    return states, x, words


def expected(states, words, choice, mode):
    num_layers = len(states) - 1
    rows = []
    for b, text_words in enumerate(words):
        for positions in text_words:
            per_state = np.stack([s[b, positions].mean(0) if mode == "mean" else s[b, positions[0]] for s in states])
            last_four = per_state[num_layers - 3:]
            rows.append({"embeddings": per_state[0], "last": per_state[-1], "second_to_last": per_state[-2],
                         "sum_last_four": last_four.sum(0), "concat_last_four": np.concatenate(list(last_four)),
                         "sum_all": per_state.sum(0), "weighted_sum_last_four": last_four,
                         "weighted_sum_all": per_state}[choice])
    return np.stack(rows)


@pytest.mark.parametrize("mode", WORD_CHOICES)
def test_every_choice_is_that_combination_of_the_encoder_outputs(encoder, pre, mode):
    states, _, words = reference_states(encoder, pre, TEXTS)
    hidden = encoder.config.hidden_size
    widths = {"concat_last_four": (4 * hidden,), "weighted_sum_last_four": (4, hidden), "weighted_sum_all": (5, hidden)}
    for choice in LAYER_CHOICES:
        out = word_features(encoder, pre, TEXTS, layers=choice, words=mode, batch_size=3)
        want = expected(states, words, choice, mode)
        assert out.features.shape == (want.shape[0], *widths.get(choice, (hidden,))), choice
        assert out.features.dtype == np.float32
        np.testing.assert_allclose(out.features, want, atol=1e-5, rtol=0, err_msg=choice)
        assert out.text_index.tolist() == [b for b, w in enumerate(words) for _ in w]
        assert out.word_index.tolist() == [i for w in words for i in range(len(w))]


def test_a_hidden_state_index_and_a_list(encoder, pre):
    states, _, words = reference_states(encoder, pre, TEXTS)
    stack = word_features(encoder, pre, TEXTS, layers=[0, -1, 2]).features
    first = [(b, w[0]) for b, ws in enumerate(words) for w in ws]
    for j, i in enumerate([0, 4, 2]):
        np.testing.assert_allclose(stack[:, j], np.stack([states[i][b, p] for b, p in first]), atol=1e-6, rtol=0)
    np.testing.assert_allclose(word_features(encoder, pre, TEXTS, layers=3).features,
                               np.stack([states[3][b, p] for b, p in first]), atol=1e-6, rtol=0)
    assert hidden_state_indices("sum_all", 4) == [0, 1, 2, 3, 4]
    assert hidden_state_indices("concat_last_four", 6) == [3, 4, 5, 6]
    assert hidden_state_indices([-1, -5], 4) == [4, 0]


def test_words_and_byte_offsets_of_multi_piece_accented_and_cjk_words(encoder, pre):
    out = word_features(encoder, pre, TEXTS, words="first")
    assert out.words == ["The", "unbelievably", "naïve", "Zürich", "cat", "sat", ".", "東", "京", "is", "big", "ok",
                         "Hyperparameterization", ",", "again", "!"]
    for t, s, e, w in zip(out.text_index, out.start, out.end, out.words):
        assert TEXTS[t].encode()[s:e].decode() == w
    assert len(pre.tokenize(["unbelievably"])[0]) > 1 and len(pre.tokenize(["Hyperparameterization"])[0]) > 2
    assert out.num_words.tolist() == [7, 4, 1, 4] and out.dropped.tolist() == [0, 0, 0, 0]
    per_text = out.per_text()
    assert [len(p) for p in per_text] == [7, 4, 1, 4]
    np.testing.assert_array_equal(per_text[1], out.features[7:11])


def test_mean_differs_from_first_only_on_multi_piece_words(encoder, pre):
    first = word_features(encoder, pre, TEXTS, layers="last", words="first")
    mean = word_features(encoder, pre, TEXTS, layers="last", words="mean")
    single = np.array([len(pre.tokenize([w])[0]) == 1 for w in first.words])
    assert single.any() and (~single).any()
    np.testing.assert_allclose(mean.features[single], first.features[single], atol=1e-6, rtol=0)
    assert np.abs(mean.features[~single] - first.features[~single]).max(axis=1).min() > 1e-4


def test_pre_split_words_use_the_taggers_first_pieces(encoder, pre):
    from bert_keras.tasks.tagger import tag_inputs
    words = [["New", "York", "unbelievably", "naïve"], ["EU", "rejects", "German", "call", "."]]
    out = word_features(encoder, pre, words, layers="last")
    ragged = tf.ragged.constant(words)
    x, _, word_index = tag_inputs(pre, ragged)
    last = encoder({k: v.numpy() for k, v in x.items()}, training=False)["sequence_output"].numpy()
    word_index = word_index.numpy()
    b, p = np.nonzero(word_index >= 0)
    # float32 rounding of two batchings (features up to ~3): 1.2e-6 seen on an AVX-512 host; a wrong piece is ~1 off
    np.testing.assert_allclose(out.features, last[b, p], atol=1e-5, rtol=0)
    assert out.word_index.tolist() == word_index[b, p].tolist() and out.words == [w for ws in words for w in ws]
    assert out.start.tolist() == [-1] * 9


def test_long_texts_drop_the_words_past_the_limit_and_warn(encoder, minilm_vocab):
    short = BertPreprocessor(minilm_vocab, max_seq_length=8)              # 6 pieces per text
    text = "one two three unbelievably five six seven"                     # "unbelievably": 4 pieces
    with pytest.warns(UserWarning, match=r"4 words of 1 texts were dropped.*more than 6 word pieces"):
        out = word_features(encoder, short, [text, "ok"], layers="last")
    assert out.words == ["one", "two", "three", "ok"]                      # "unbelievably" does not fit whole
    assert out.num_words.tolist() == [7, 1] and out.dropped.tolist() == [4, 0]
    full = word_features(encoder, BertPreprocessor(minilm_vocab), [text], layers="embeddings").features[:3]
    with pytest.warns(UserWarning):
        kept = word_features(encoder, short, [text], layers="embeddings").features
    np.testing.assert_allclose(kept, full, atol=1e-6)


def test_empty_texts_and_no_texts(encoder, pre):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = word_features(encoder, pre, ["", "ok", "  "], layers="sum_all")
        assert out.words == ["ok"] and out.num_words.tolist() == [0, 1, 0]
        empty = word_features(encoder, pre, [], layers="concat_last_four")
    assert empty.features.shape == (0, 4 * encoder.config.hidden_size) and empty.per_text() == []


def test_scalar_mix_learns_a_mix_of_the_stack(encoder, pre):
    stack = word_features(encoder, pre, TEXTS, layers="weighted_sum_all").features      # [W, 5, H]
    mix = ScalarMix()
    np.testing.assert_allclose(np.asarray(mix(stack)), stack.mean(1), atol=1e-5)
    mix.mix_logits.assign(np.log([1.0, 1.0, 1.0, 1.0, 6.0]))
    mix.scale.assign(2.0)
    np.testing.assert_allclose(np.asarray(mix(stack)), 2 * (0.1 * stack[:, :4].sum(1) + 0.6 * stack[:, 4]),
                               atol=1e-5)
    np.testing.assert_allclose(mix.mix_weights(), [0.1, 0.1, 0.1, 0.1, 0.6], atol=1e-6)
    again = ScalarMix.from_config(mix.get_config())
    assert again.trainable_scale is True
    frozen = ScalarMix(trainable_scale=False)
    frozen(stack)
    assert len(frozen.trainable_weights) == 1
    assert combine_hidden_states(stack, "weighted_sum_all") is stack


def test_unknown_choices_say_what_to_choose(encoder, pre):
    with pytest.raises(ValueError, match="unknown layer choice 'sum_last_three'.*sum_last_four"):
        word_features(encoder, pre, TEXTS, layers="sum_last_three")
    with pytest.raises(ValueError, match="unknown word alignment 'last'.*first, mean"):
        word_features(encoder, pre, TEXTS, words="last")
    with pytest.raises(ValueError, match="hidden state 5 does not exist.*0 = embeddings .. 4"):
        word_features(encoder, pre, TEXTS, layers=5)
    with pytest.raises(ValueError, match="not one string"):
        word_features(encoder, pre, "a text")
    tiny = BertEncoder(bert_keras.preset_config("bert_tiny"))
    with pytest.raises(ValueError, match="'sum_last_four' needs at least 4 layers; this encoder has 2"):
        word_features(tiny, pre, TEXTS, layers="sum_last_four")


def test_cli_choices_are_the_librarys():
    from bert_keras import features, probes
    from bert_keras_cli import inside
    assert inside.LAYER_CHOICES == features.LAYER_CHOICES and inside.WORD_CHOICES == features.WORD_CHOICES
    assert inside.PROBE_LABELS == probes.PROBE_LABELS


def test_cli_writes_the_npz(tmp_path, minilm_vocab, capsys):
    from bert_keras_cli.main import main
    texts = tmp_path / "texts.txt"
    texts.write_text("The unbelievably naïve cat.\n東京\n", encoding="utf-8")
    out = tmp_path / "features.npz"
    assert main(["features", "--model", "bert_tiny", "--vocab", minilm_vocab, "--layers", "concat_last_four",
                 str(texts), "--out", str(out)]) == 2
    assert "needs at least 4 layers" in capsys.readouterr().err
    assert main(["features", "--model", "bert_tiny", "--vocab", minilm_vocab, "--layers", "sum_all", "--words",
                 "mean", str(texts), "--out", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    with np.load(out) as f:
        assert f["features"].dtype == np.float32 and f["features"].shape == (7, 128)
        assert f["text_index"].tolist() == [0] * 5 + [1] * 2 and f["word_index"].tolist() == [0, 1, 2, 3, 4, 0, 1]
        assert f["words"].tolist() == ["The", "unbelievably", "naïve", "cat", ".", "東", "京"]
        assert f["start"].tolist() == [0, 4, 17, 24, 27, 0, 3] and f["end"].tolist()[-1] == 6
        assert f["num_words"].tolist() == [5, 2] and str(f["layers"]) == "sum_all"
    assert [p.name for p in tmp_path.iterdir() if ".partial" in p.name] == []


def test_a_checkpoint_without_a_pooler_warns_where_the_pooler_is_read_not_in_features(encoder, minilm_vocab, tmp_path,
                                                                                      capsys):
    """A Hugging Face BertForMaskedLM folder has no pooler weights: loading its encoder warns (its pooled_output is
    random), `bert-keras features` (hidden states only) does not."""
    from safetensors.numpy import load_file

    from bert_keras.checkpoints.huggingface import write_huggingface
    from bert_keras.checkpoints.load import MissingPoolerWarning
    from bert_keras.checkpoints.names import POOLER_NAMES, encoder_weights
    from bert_keras_cli.main import main
    folder = tmp_path / "masked_lm"
    weights = {name: np.asarray(v) for name, v in encoder_weights(encoder).items() if name not in POOLER_NAMES}
    write_huggingface(weights, str(folder), encoder.config, vocab_file=minilm_vocab)
    assert not [name for name in load_file(str(folder / "model.safetensors")) if "pooler" in name]
    with pytest.warns(MissingPoolerWarning, match="has no pooler weights"):
        bert_keras.load_checkpoint(str(folder))
    (tmp_path / "texts.txt").write_text("\n".join(TEXTS), encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("error", MissingPoolerWarning)
        assert main(["features", str(tmp_path / "texts.txt"), "--model", str(folder), "--out",
                     str(tmp_path / "f.npz")]) == 0
    out = capsys.readouterr()
    assert "pooler" not in out.out + out.err


def test_cli_refuses_bad_input(tmp_path, minilm_vocab, capsys):
    from bert_keras_cli.main import main
    texts = tmp_path / "texts.txt"
    texts.write_text("a text\n")
    assert main(["features", "--layers", "middle", str(texts), "--out", str(tmp_path / "f.npz")]) == 2
    assert "--layers 'middle' is not a choice: use one of embeddings" in capsys.readouterr().err
    assert main(["features", str(tmp_path / "missing.txt"), "--out", str(tmp_path / "f.npz")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["features", str(texts), "--out", str(tmp_path / "f.txt")]) == 2
    assert "name an .npz file" in capsys.readouterr().err
    (tmp_path / "latin1.txt").write_bytes("café\n".encode("latin-1"))
    assert main(["features", str(tmp_path / "latin1.txt"), "--out", str(tmp_path / "f.npz")]) == 2
    assert "latin1.txt, line 1: not UTF-8: byte 0xe9 at byte offset 3" in capsys.readouterr().err
    assert not (tmp_path / "f.npz").exists()
