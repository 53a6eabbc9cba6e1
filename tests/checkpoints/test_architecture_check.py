"""A Hugging Face folder of another architecture is refused by name (issue 55): RoBERTa's and GPT-2's config.json
carry BERT's size keys, so before this check their folders fine-tuned as BERT with exit 0, and `export` said "no
model at ...". The folders here are real BERT folders (our writer's) whose config.json then claims another model,
as a user's mislabelled or other-architecture folder would; every reader of config.json must refuse them."""

import json
import shutil

import pytest

from bert_keras.config import BertConfig, check_bert_architecture
from bert_keras_cli.main import main

OTHERS = {"roberta": {"model_type": "roberta", "architectures": ["RobertaForSequenceClassification"]},
          "gpt2": {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]},
          "bert_type_roberta_head": {"model_type": "bert", "architectures": ["RobertaForMaskedLM"]}}


@pytest.fixture(scope="module")
def folders(tmp_path_factory, minilm_vocab):
    """{name: folder}: a bert_tiny BertForSequenceClassification folder ("bert"), and copies claiming another
    architecture."""
    from bert_keras import BertEncoder, BertPreprocessor, preset_config
    from bert_keras.tasks import BertClassifier, save_huggingface
    root = tmp_path_factory.mktemp("architectures")
    model = BertClassifier(BertEncoder(preset_config("bert_tiny")), num_classes=2,
                           preprocessor=BertPreprocessor(minilm_vocab, max_seq_length=32))
    save_huggingface(model, str(root / "bert"))
    out = {"bert": root / "bert"}
    for name, claims in OTHERS.items():
        shutil.copytree(root / "bert", root / name)
        config = json.loads((root / name / "config.json").read_text())
        (root / name / "config.json").write_text(json.dumps({**config, **claims}))
        out[name] = root / name
    return out


def test_bert_configs_pass():
    check_bert_architecture({"model_type": "bert", "architectures": ["BertForSequenceClassification"]}, "c.json")
    check_bert_architecture({"hidden_size": 768}, "bert_config.json")              # google-research's: no keys


@pytest.mark.parametrize("name", sorted(OTHERS))
def test_every_reader_refuses_another_architecture(folders, name):
    from bert_keras.loading import load_backbone
    from bert_keras.tasks import load_task_model
    folder = str(folders[name])
    kind = OTHERS[name]["model_type"] if OTHERS[name]["model_type"] != "bert" else "RobertaForMaskedLM"
    for read in (lambda: BertConfig.from_json_file(f"{folder}/config.json"), lambda: load_backbone(folder),
                 lambda: load_task_model(folder)):
        with pytest.raises(ValueError, match=f"is a {kind} model.*not BERT"):
            read()


def test_the_bert_folder_itself_loads(folders):
    from bert_keras.tasks import BertClassifier, load_task_model
    assert isinstance(load_task_model(str(folders["bert"])), BertClassifier)


@pytest.mark.parametrize("command", ["finetune", "export", "convert"])
def test_the_commands_refuse_it_in_one_line(folders, tmp_path, capsys, command):
    folder = str(folders["roberta"])
    train = tmp_path / "train.tsv"
    train.write_text("sentence\tlabel\ngood film\t1\nbad film\t0\n")
    argv = {"finetune": ["finetune", "--task", "sst-2", "--model", folder, "--train", str(train),
                         "--out", str(tmp_path / "run"), "--batch-size", "2"],
            "export": ["export", "--model", folder, "--base-path", str(tmp_path / "serving"), "--name", "m"],
            "convert": ["convert", "--checkpoint", folder, "--out", str(tmp_path / "m.keras")]}[command]
    assert main(argv) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "roberta" in err[0] and "not BERT" in err[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.tsv"]
