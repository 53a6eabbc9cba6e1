"""Attention maps on the real all-MiniLM-L6-v2 weights equal PyTorch transformers' (issue 42): every layer's
probabilities from `encoder(inputs, attention_maps=True)` against `BertModel(..., output_attentions=True)` with the
eager attention (the one that returns them), within 1e-5 at the real query rows of a padded batch of texts of
different lengths. docs/attention.md quotes the largest difference this prints."""

import numpy as np
import pytest

pytestmark = pytest.mark.torch

TEXTS = ["The cat sat on the mat because it was tired.", "ok",
         "An extraordinarily long-winded, self-indulgent exercise in style over substance that never ends.",
         "Ünïcödé — “quoted”"]


def test_minilm_attention_maps_match_transformers(minilm_dir):
    import torch
    from transformers import BertModel

    from bert_keras.loading import load_backbone
    encoder, pre = load_backbone(minilm_dir)
    ids = {k: np.asarray(v) for k, v in pre(TEXTS).items()}
    assert len(set(ids["input_mask"].sum(1).tolist())) == len(TEXTS)          # padding in all rows but one
    ours = [np.asarray(m) for m in encoder(ids, attention_maps=True)["attention_maps"]]
    model = BertModel.from_pretrained(minilm_dir, attn_implementation="eager").eval()
    with torch.inference_mode():
        theirs = model(input_ids=torch.tensor(ids["input_word_ids"], dtype=torch.long),
                       attention_mask=torch.tensor(ids["input_mask"], dtype=torch.long),
                       token_type_ids=torch.tensor(ids["input_type_ids"], dtype=torch.long),
                       output_attentions=True).attentions
    assert len(theirs) == len(ours) == 6
    real_rows = ids["input_mask"].astype(bool)[:, None, :, None]                 # [B, 1, S(query), 1]
    worst = 0.0
    for layer, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        b = b.numpy()
        assert a.shape == b.shape == (len(TEXTS), 12) + ids["input_mask"].shape[1:] * 2, layer
        rows = np.broadcast_to(real_rows, a.shape)
        diff = float(np.abs(a[rows] - b[rows]).max())
        assert diff <= 1e-5, f"layer {layer}: {diff}"
        worst = max(worst, diff)
    print(f"largest difference from transformers over {len(ours)} layers: {worst:.2e}")
