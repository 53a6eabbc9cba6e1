import json

import pytest

from bert_keras import BertConfig, preset_config
from conftest import FIXTURES


def test_reads_google_research_bert_config_json():
    config = BertConfig.from_json_file(str(FIXTURES / "google_L8_H512_A8" / "bert_config.json"))
    assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads) == (8, 512, 8)
    assert config.intermediate_size == 2048 and config.vocab_size == 30522 and config.hidden_act == "gelu"


def test_writes_bert_config_json_that_reads_back(tmp_path):
    path = tmp_path / "bert_config.json"
    preset_config("bert_small").to_json_file(str(path))
    values = json.loads(path.read_text())
    assert values["num_hidden_layers"] == 4 and values["hidden_size"] == 512
    assert BertConfig.from_json_file(str(path)) == preset_config("bert_small")
    assert [p.name for p in tmp_path.iterdir()] == ["bert_config.json"]  # no temporary left behind


@pytest.mark.parametrize("name,layers,hidden,heads", [
    ("bert_tiny", 2, 128, 2), ("bert_mini", 4, 256, 4), ("bert_small", 4, 512, 8),
    ("bert_medium", 8, 512, 8), ("bert_base", 12, 768, 12), ("bert_large", 24, 1024, 16)])
def test_presets_match_google_research_sizes(name, layers, hidden, heads):
    config = preset_config(name)
    assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads) == (layers, hidden, heads)
    assert config.intermediate_size == 4 * hidden and config.vocab_size == 30522
    assert config.max_position_embeddings == 512 and config.type_vocab_size == 2


def test_published_parameter_counts():
    # BERT-Base 110M and BERT-Large 340M as counted with the pooler (google-research/bert, TF Hub).
    assert preset_config("bert_base").num_parameters() == 109_482_240
    assert preset_config("bert_large").num_parameters() == 335_141_888


def test_config_errors_name_the_problem():
    with pytest.raises(ValueError, match="multiple of num_attention_heads"):
        BertConfig(hidden_size=100, num_attention_heads=12)
    with pytest.raises(ValueError, match="missing"):
        BertConfig.from_dict({"hidden_size": 128})
    with pytest.raises(ValueError, match="Unknown preset"):
        preset_config("bert_huge")
    with pytest.raises(ValueError, match="hidden_act"):
        BertConfig(hidden_act="swish")
