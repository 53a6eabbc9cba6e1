"""benchmarks/benchmark_finetune.py's matmul count (the floor it sets against the machine's matmul rate) against
PyTorch's own FLOP counter on a training step of transformers' BertForSequenceClassification with the benchmark's
MiniLM config, batch and length. Marked `torch`: run by `make test-torch`."""

import pathlib
import sys

import pytest

pytestmark = pytest.mark.torch
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks"))


def test_step_matmul_flops_equal_torch_flop_counter():
    import torch                                   # the [torch] extra (make test-torch): missing is a failure
    import transformers
    from torch.utils.flop_counter import FlopCounterMode

    from benchmark_finetune import BATCH, MINILM, SEQ, step_gflop
    model = transformers.BertForSequenceClassification(
        transformers.BertConfig(**MINILM, num_labels=2, attn_implementation="eager"))
    ids = torch.randint(0, MINILM["vocab_size"], (BATCH, SEQ), generator=torch.Generator().manual_seed(0))
    with FlopCounterMode(display=False) as counter:
        model(input_ids=ids, labels=torch.zeros(BATCH, dtype=torch.long)).loss.backward()
    # transformers computes every token in the last layer: the count without ours' [CLS]-only saving. The
    # 2-class head's few FLOPs are the only ones the benchmark leaves out.
    assert step_gflop(MINILM, cls_only_last_layer=False) == pytest.approx(counter.get_total_flops() / 1e9, rel=1e-5)
    assert step_gflop(MINILM, cls_only_last_layer=True) < 0.9 * step_gflop(MINILM, cls_only_last_layer=False)
