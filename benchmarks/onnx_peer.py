"""ONNX Runtime peers for the benchmarks: a transformers model exported with torch.onnx.export, run by onnxruntime.

    fp32 = export(model, ["input_ids", "attention_mask"], "last_hidden_state", "bert.onnx")
    int8 = quantize_int8(fp32)                        # quantize_dynamic: QInt8 weights per channel
    session = make_session(int8, threads)             # ORT_ENABLE_ALL, intra_op_num_threads=threads

The export is the TorchScript exporter (dynamo=False) at opset 17 with dynamic batch and sequence axes, traced
on a batch whose attention mask holds padding: transformers drops the mask from the traced graph when the mask it
sees is all ones, and the exported model would then attend to padding. The module passed in is the peer's own
model object, so PyTorch and ONNX Runtime run the same weights. Needs the [torch] extra (torch, transformers,
onnx, onnxruntime).
"""

from __future__ import annotations

import os

OPSET = 17
EXPORTER = "torch.onnx.export (TorchScript, dynamo=False)"
INT8 = "onnxruntime.quantization.quantize_dynamic, QuantType.QInt8 weights, per_channel=True"


def export(model, input_names: list[str], output: str, path: str, output_axes: tuple[int, ...] = (0,)) -> str:
    """Writes `model` (a transformers module, called by keyword) to `path`; returns `path`.

    input_names: int64 [batch, sequence] inputs among input_ids, attention_mask, token_type_ids; output: the
    attribute of the model's output to export (logits, last_hidden_state); output_axes: its dynamic axes
    (0 batch, 1 sequence)."""
    import torch

    class ByKeyword(torch.nn.Module):       # transformers 5 reordered forward()'s positional arguments
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, *tensors):
            return getattr(self.inner(**dict(zip(input_names, tensors))), output)

    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(1000, 2000, (2, 16), generator=generator)
    example = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids)}
    example["attention_mask"][1, 9:] = 0    # padding in the trace, so the mask stays in the graph
    wrapper = ByKeyword(model).eval()       # export restores the wrapper's mode onto the model: eval, not train
    names = {0: "batch", 1: "sequence"}
    with torch.no_grad():
        torch.onnx.export(wrapper, tuple(example[n] for n in input_names), path, input_names=input_names,
                          output_names=[output], opset_version=OPSET, dynamo=False,
                          dynamic_axes={**{n: names for n in input_names},
                                        output: {a: names[a] for a in output_axes}})
    model.eval()
    return path


def quantize_int8(fp32_path: str, path: str | None = None) -> str:
    """Dynamic int8 quantization of an exported model (int8 weights, one scale per output channel; activations
    quantized per call); returns its path. Per channel: on a fine-tuned MiniLM SST-2 classifier, per-tensor
    scales flipped 3.6% of the dev predictions against fp32 and per-channel ones 1.1%, at the same speed."""
    from onnxruntime.quantization import QuantType
    from onnxruntime.quantization import quantize_dynamic
    path = path or fp32_path.removesuffix(".onnx") + ".int8.onnx"
    quantize_dynamic(fp32_path, path, weight_type=QuantType.QInt8, per_channel=True)
    return path


def make_session(path: str, threads: int):
    """An InferenceSession on the CPU with every graph optimization on and `threads` intra-op threads."""
    import onnxruntime
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    return onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def describe(threads: int, fp32_path: str | None = None, int8_path: str | None = None) -> dict:
    """How the peers were built, for the JSON."""
    import onnxruntime
    import torch
    info = {"onnxruntime": onnxruntime.__version__, "torch": torch.__version__, "exporter": EXPORTER,
            "opset": OPSET, "dynamic_axes": "batch, sequence", "graph_optimization_level": "ORT_ENABLE_ALL",
            "intra_op_num_threads": threads, "providers": ["CPUExecutionProvider"], "int8": INT8}
    for key, path in (("fp32_mb", fp32_path), ("int8_mb", int8_path)):
        if path:
            info[key] = round(os.path.getsize(path) / 2 ** 20, 1)
    return info
