"""The public API documents itself: every exported name, task model and layer has Args (when it takes any) and
an Example, and the Examples run (doctests on bert_tiny with random weights and the MiniLM vocabulary, in a
temporary folder holding `vocab.txt`; the task models' Examples with the slow tests). Examples marked
`# doctest: +SKIP` need a download (a zoo name) or a model from the class's own Example (the readable methods).
Layer and model hyper-parameters are keyword-only, and reach the layers they are meant for."""

import doctest
import inspect
import os
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

import bert_keras
import bert_keras.attention
import bert_keras.features
import bert_keras.layers
import bert_keras.loading
import bert_keras.preprocessing.vocab
import bert_keras.pretraining
import bert_keras.probes
import bert_keras.tasks
import bert_keras.tasks.base
import bert_keras.tasks.pretrainer
import bert_keras.training
import bert_keras.training.data_parallel
from bert_keras import BertConfig, BertEncoder, BertPreprocessor
from bert_keras.layers import BertEmbeddings, TransformerBlock
from bert_keras.preprocessing import folder_vocab, tokenizer_json
from bert_keras.tasks import BertClassifier, BertMultipleChoice, BertPretrainer, BertSpanLabeler, BertTagger
from bert_keras.tasks.masked_lm import MaskedLMHead

TASK_MODELS = [BertClassifier, BertSpanLabeler, BertMultipleChoice, BertTagger, BertPretrainer]
LAYERS = [BertEmbeddings, TransformerBlock, MaskedLMHead]
# The documented public surface: the package's exports (PRESETS through its class), the task models, the layers,
# and the entry points the README and the command line lean on.
PUBLIC = {
    **{name: getattr(bert_keras, name) for name in bert_keras.__all__ if name != "PRESETS"},
    "PRESETS": type(bert_keras.PRESETS),
    **{name: getattr(bert_keras.tasks, name) for name in bert_keras.tasks.__all__},
    **{cls.__name__: cls for cls in TASK_MODELS + LAYERS},
    "TaskModel": bert_keras.tasks.base.TaskModel,
    "load_backbone": bert_keras.loading.load_backbone,
    "load_backbone_and_heads": bert_keras.loading.load_backbone_and_heads,
    "load_checkpoint_with_heads": bert_keras.checkpoints.load_checkpoint_with_heads,
    "bundled_minilm_folder": bert_keras.loading.bundled_minilm_folder,
    "create_optimizer": bert_keras.training.create_optimizer,
    "create_strategy": bert_keras.training.create_strategy,
    "MaskingConfig": bert_keras.pretraining.MaskingConfig,
    "start_data_parallel": bert_keras.training.data_parallel.start_data_parallel,
    "attention_maps": bert_keras.attention.attention_maps,
    "draw_heads": bert_keras.attention.draw_heads,
    "draw_overview": bert_keras.attention.draw_overview,
    "word_features": bert_keras.features.word_features,
    "hidden_state_indices": bert_keras.features.hidden_state_indices,
    "combine_hidden_states": bert_keras.features.combine_hidden_states,
    "ScalarMix": bert_keras.features.ScalarMix,
    "train_probe": bert_keras.probes.train_probe,
    "sklearn_c": bert_keras.probes.sklearn_c,
    "probe_conll2003": bert_keras.probes.probe_conll2003,
    "plot_probe": bert_keras.probes.plot_probe,
    "default_conll_dir": bert_keras.probes.default_conll_dir,
    "read_tokenizer_json": tokenizer_json.read_tokenizer_json,
    "write_tokenizer_json": tokenizer_json.write_tokenizer_json,
    "write_tokenizer_config": tokenizer_json.write_tokenizer_config,
    "folder_vocabulary": folder_vocab.folder_vocabulary,
    "save_vocab": bert_keras.preprocessing.vocab.save_vocab,
}
# The methods people call on a fine-tuned model.
READABLE = [BertClassifier.classify, BertSpanLabeler.answer, BertMultipleChoice.choose, BertTagger.entities,
            BertTagger.tag_words, bert_keras.tasks.BertMaskedLM.fill_mask]


def _takes_arguments(obj) -> bool:
    """Does the function, or a constructor the class defines (not one it inherits from dict), take arguments?"""
    if inspect.isclass(obj):
        own = [c for c in obj.__mro__ if "__init__" in vars(c) and c.__module__.startswith("bert_keras")]
        if not own:
            return False
        target = own[0].__init__
    else:
        target = obj
    params = [p for p in inspect.signature(target).parameters.values() if p.name != "self"]
    return bool(params)


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_public_name_has_args_and_example(name):
    obj = PUBLIC[name]
    doc = inspect.getdoc(obj) or ""
    assert "Example" in doc, f"{name}'s docstring has no Example"
    if _takes_arguments(obj):
        assert "Args:" in doc, f"{name}'s docstring has no Args section"


def test_every_export_is_checked():
    assert set(bert_keras.__all__) | set(bert_keras.tasks.__all__) <= set(PUBLIC)


@pytest.mark.parametrize("method", READABLE, ids=lambda m: m.__qualname__)
def test_readable_methods_say_what_they_take_and_give(method):
    doc = inspect.getdoc(method) or ""
    assert "Args:" in doc and "Returns:" in doc and "Example" in doc, method.__qualname__


def test_help_of_the_encoder_shows_args_and_an_example():
    text = pydoc_text(bert_keras.BertEncoder)
    assert "Args:" in text and "Example:" in text and "input_word_ids" in text


def pydoc_text(obj) -> str:
    import pydoc
    return pydoc.plain(pydoc.render_doc(obj))


# ---- keyword-only hyper-parameters ---------------------------------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda: BertEmbeddings(100, 16, 32, 2),
    lambda: TransformerBlock(16, 2, 64),
    lambda: TransformerBlock(16, num_attention_heads=2, intermediate_size=64),
    lambda: MaskedLMHead(keras.layers.Embedding(10, 4), "gelu"),
    lambda: BertConfig(30522, 128),
], ids=["embeddings", "block", "block-first-positional", "mlm-head", "config"])
def test_positional_hyper_parameters_are_refused(make):
    with pytest.raises(TypeError):
        make()


def test_positional_task_and_preprocessor_options_are_refused(minilm_vocab):
    encoder = BertEncoder(bert_keras.preset_config("bert_tiny"))
    with pytest.raises(TypeError):
        BertPreprocessor(minilm_vocab, True, 64)
    with pytest.raises(TypeError):
        BertClassifier(encoder, 2, 0.1)
    with pytest.raises(TypeError):
        BertTagger(encoder, 9, 0.1)
    with pytest.raises(TypeError):
        BertMultipleChoice(encoder, 0.1)
    with pytest.raises(TypeError):
        BertSpanLabeler(encoder, None, 128, 64)
    with pytest.raises(TypeError):
        BertPretrainer(encoder, "pretrainer")


def test_each_rate_and_size_reaches_its_own_layer():
    # Distinct values for every field, so a swap of two (the risk of positional calls) is seen.
    config = BertConfig(vocab_size=97, hidden_size=24, num_hidden_layers=2, num_attention_heads=3,
                        intermediate_size=40, hidden_act="gelu_new", hidden_dropout_prob=0.11,
                        attention_probs_dropout_prob=0.07, max_position_embeddings=33, type_vocab_size=3,
                        initializer_range=0.05, layer_norm_eps=1e-7)
    encoder = BertEncoder(config)
    e = encoder.embeddings
    assert (e.word_embeddings.input_dim, e.position_embeddings.input_dim, e.token_type_embeddings.input_dim) \
        == (97, 33, 3)
    assert (e.dropout.rate, e.layer_norm.epsilon, e.hidden_size) == (0.11, 1e-7, 24)
    for block in encoder.transformer_layers:
        assert (block.hidden_dropout, block.attention_dropout) == (0.11, 0.07)
        assert (block.output_dropout.rate, block.attention_probs_dropout.rate) == (0.11, 0.07)
        assert (block.num_attention_heads, block.intermediate_size, block.hidden_act) == (3, 40, "gelu_new")
        assert block.intermediate.kernel.shape == (24, 40) and block.output_norm.epsilon == 1e-7
        assert block.query.kernel_initializer.stddev == 0.05
    head = BertPretrainer(encoder).mlm_head
    assert head.layer_norm.epsilon == 1e-7 and head.transform.kernel_initializer.stddev == 0.05


def test_layer_configs_round_trip_with_keywords():
    block = TransformerBlock(hidden_size=16, num_attention_heads=2, intermediate_size=64, hidden_dropout=0.2,
                             attention_dropout=0.3, name="b")
    again = TransformerBlock.from_config(block.get_config())
    assert again.get_config() == block.get_config()
    embeddings = BertEmbeddings(vocab_size=50, hidden_size=8, max_position_embeddings=16, type_vocab_size=2,
                                dropout=0.2, name="e")
    assert BertEmbeddings.from_config(embeddings.get_config()).get_config() == embeddings.get_config()


# ---- the Examples run ------------------------------------------------------------------------------------------

def _doctests():
    finder = doctest.DocTestFinder(recurse=True, exclude_empty=True)
    tests = {}
    for name, obj in sorted(PUBLIC.items()):
        for test in finder.find(obj, name):
            if test.examples:
                tests[test.name] = test
    for method in READABLE:
        for test in finder.find(method, method.__qualname__):
            if test.examples:
                tests[test.name] = test
    return [tests[k] for k in sorted(tests)]


DOCTESTS = _doctests()


@pytest.fixture
def example_folder(tmp_path, minilm_vocab, monkeypatch):
    """A working folder with a `vocab.txt` (the Examples' file names are relative) and its own zoo cache."""
    shutil.copyfile(minilm_vocab, tmp_path / "vocab.txt")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BERT_KERAS_HOME", str(tmp_path / "zoo_cache"))
    return tmp_path


# Examples that trace a task model's fit or serving decoding take 20-100 s each on 2 busy cores: they run with
# the slow tests (-m slow); the rest (seconds each) run by default.
HEAVY = {"BertClassifier", "BertMultipleChoice", "BertSpanLabeler", "BertTagger", "load_task_model"}


@pytest.mark.parametrize("test", [pytest.param(t, marks=[pytest.mark.slow] if t.name in HEAVY else [])
                                  for t in DOCTESTS], ids=[t.name for t in DOCTESTS])
def test_example_runs(test, example_folder):
    test.globs = {"bert_keras": bert_keras, "keras": keras, "np": np, "tf": tf, "os": os,
                  "BertClassifier": BertClassifier}
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    output = []
    result = runner.run(test, out=output.append)
    assert result.failed == 0, "".join(output)
