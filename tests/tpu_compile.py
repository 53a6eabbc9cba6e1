"""What a TPU compile would reject in a model's traced train function, read after `fit` (Keras 3, TF backend).

    problems = train_step_problems(model)     # [] when the step is TPU-shaped

Checked, over the train function and every function it calls:
- the batches the iterator hands the step: every shape fully static, no string dtype;
- an XLA-compiled step function exists (`jit_compile=True`: the part a TPU compiles), and its arguments have
  static shapes and no strings;
- no TF.Text op and no string op anywhere in the step, no host callback (PyFunc, EagerPyFunc) anywhere;
- steps_per_execution > 1 shows as a while loop around the step; mixed_bfloat16 as bfloat16 math in the step.
"""

import inspect

from tensorflow.core.framework import types_pb2

from savedmodels.ops import PYTHON_OPS, _read

TF_TEXT_OPS = _read("tf_text_ops_v2.20.1.txt")
STRING_OPS = ("String", "Regex", "Unicode", "Substr", "AsString", "DecodeRaw", "ParseExample", "Normalize")


def _shape_static(shape) -> bool:
    return not shape.unknown_rank and all(d.size >= 0 for d in shape.dim)


def train_step_problems(model, steps_per_execution: int = 1, bfloat16: bool = False) -> list[str]:
    closure = inspect.getclosurevars(model.train_function).nonlocals
    outer = closure["multi_step_on_iterator"]                      # keras/src/backend/tensorflow/trainer.py
    problems = []
    for concrete in outer._list_all_concrete_functions():
        graph_def = concrete.graph.as_graph_def()
        functions = {f.signature.name: f for f in graph_def.library.function}
        nodes = list(graph_def.node) + [n for f in functions.values() for n in f.node_def]
        for node in nodes:
            if node.op in ("IteratorGetNext", "IteratorGetNextAsOptional"):
                for shape in node.attr["output_shapes"].list.shape:
                    if not _shape_static(shape):
                        problems.append(f"{node.op} hands the step a batch of shape "
                                        f"{[d.size for d in shape.dim]} (not static)")
                if types_pb2.DT_STRING in node.attr["output_types"].list.type:
                    problems.append(f"{node.op} hands the step string tensors")
            if node.op in PYTHON_OPS:
                problems.append(f"host callback {node.op} ({node.name})")
            if node.op in TF_TEXT_OPS:
                problems.append(f"TF.Text op {node.op} ({node.name}) in the train function")
        steps = [f for f in functions.values() if f.attr["_XlaMustCompile"].b]
        if not steps:
            problems.append("no XLA-compiled step function (jit_compile is off)")
        for step in steps:
            for i, arg in enumerate(step.signature.input_arg):
                if arg.type == types_pb2.DT_STRING:
                    problems.append(f"step argument {arg.name} is a string")
                shapes = step.arg_attr[i].attr["_output_shapes"].list.shape if i in step.arg_attr else []
                if arg.type != types_pb2.DT_RESOURCE and (not shapes or not _shape_static(shapes[0])):
                    problems.append(f"step argument {arg.name} has no static shape")
            called = [step] + [functions[n.op] for n in step.node_def if n.op in functions]
            step_nodes = [node for function in called for node in function.node_def]
            for node in step_nodes:
                if node.op.startswith(STRING_OPS) or node.op in TF_TEXT_OPS:
                    problems.append(f"string op {node.op} inside the step")
            if bfloat16 and not any(node.attr["T"].type == types_pb2.DT_BFLOAT16 for node in step_nodes
                                    if node.op in ("MatMul", "BatchMatMulV2", "Einsum")):
                problems.append("no bfloat16 matmul inside the step (mixed_bfloat16 is off)")
        loops = [n for n in nodes if n.op in ("While", "StatelessWhile")]
        if steps_per_execution > 1 and not loops:
            problems.append(f"steps_per_execution={steps_per_execution} but no loop around the step")
    return problems
