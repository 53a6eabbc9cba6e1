"""Dataset readers returning raw-text examples (no tokenization): GLUE TSVs, SQuAD JSON,
multiple choice (SWAG csv, OpenBookQA/ARC/CommonsenseQA jsonl) and CoNLL-2003 NER.

`SAMPLES` is the folder of the data that ships with the package: 1,000 SST-2 training phrases
(`sst2_train.tsv`) and 200 dev sentences (`sst2_dev.tsv`), for the demo, the notebook and the tests."""

import os as _os

from bert_keras.data.errors import DataFormatError
from bert_keras.data.conll import CONLL2003_LABELS, TaggedSentence, iob1_to_iob2, read_conll2003
from bert_keras.data.glue import GLUE_LABELS, TextExample, read_glue
from bert_keras.data.multiple_choice import ChoiceExample, read_choice_jsonl, read_swag
from bert_keras.data.squad import (
    SquadExample,
    answer_found,
    answer_offset_mismatches,
    answer_span,
    answerable_for_training,
    hold_out_articles,
    load_squad_json,
    read_squad,
    squad_examples,
)

SAMPLES = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "samples")

__all__ = [
    "SAMPLES",
    "CONLL2003_LABELS",
    "ChoiceExample",
    "DataFormatError",
    "GLUE_LABELS",
    "SquadExample",
    "TaggedSentence",
    "TextExample",
    "answer_found",
    "answer_offset_mismatches",
    "answer_span",
    "answerable_for_training",
    "hold_out_articles",
    "iob1_to_iob2",
    "load_squad_json",
    "read_choice_jsonl",
    "read_conll2003",
    "read_glue",
    "read_squad",
    "read_swag",
    "squad_examples",
]
