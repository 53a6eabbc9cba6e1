"""Reduced-precision copies of a task model for export: `bert-keras export --precision fp32|bf16|int8`.

  fp32  the model as trained.
  bf16  weights and matmuls in bfloat16 (Keras dtype policy "bfloat16"); the float32 heads stay float32. oneDNN
        runs them on AVX512_BF16 / AMX-BF16; without those the CPU emulates bfloat16, slower than fp32.
  int8  Keras 3's `quantize("int8")`: Dense and Embedding weights int8 with per-channel scales, activations
        quantized per call (dynamic). A quarter of the weights' bytes, but slower than fp32 on every CPU measured,
        VNNI or not: TensorFlow runs the int8 matmuls as an int8 BatchMatMulV3 on a generic kernel, not oneDNN's
        (at batch 32, 122 against fp32's 303 sentences/s on a 2-core AMD EPYC with AVX512_VNNI, 2026-11-28), so
        export warns every time. LiteRT's int8 (`--format litert`) is the fast int8.
Both stay in the same raw-text signatures, use only ops the stock server has (the export's op check), and load on
the SavedModelBundle path. `cpu_support(precision)` says whether this machine has the instructions; export warns
(the serving machine may differ), the benchmark reports it.
"""

from __future__ import annotations

import warnings

PRECISIONS = ("fp32", "bf16", "int8")
LITERT_PRECISIONS = ("fp32", "fp16", "int8")      # `--format litert` (savedmodels/litert.py): float16 weights, no bf16
INSTRUCTIONS = {"bf16": ("avx512_bf16", "amx_bf16"), "int8": ("avx512_vnni", "avx_vnni", "amx_int8")}


def cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return {flag for line in f if line.startswith("flags") for flag in line.split(":", 1)[1].split()}
    except OSError:
        return set()


def cpu_support(precision: str, flags: set[str] | None = None) -> tuple[bool, str]:
    """(does this CPU run `precision` natively, the instructions found or missing)."""
    wanted = INSTRUCTIONS.get(precision, ())
    if not wanted:
        return True, "fp32"
    found = sorted(set(wanted) & (cpu_flags() if flags is None else flags))
    return bool(found), ", ".join(found) if found else f"none of {', '.join(wanted)}"


def with_precision(model, precision: str, serving_cpu_flags: set[str] | None = None):
    """A copy of a task model at `precision` (the model itself for fp32).

    Args:
        model: a task model.
        precision: "fp32", "bf16" or "int8".
        serving_cpu_flags: the /proc/cpuinfo flags of the CPU that will serve it (default: this machine's), to warn
            when it lacks the instructions the precision needs.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if precision == "fp32":
        return model
    native, detail = cpu_support(precision, serving_cpu_flags)
    if precision == "int8":
        warnings.warn("an int8 export holds a quarter of fp32's weight bytes but serves slower than fp32, with or "
                      "without VNNI: TensorFlow runs Keras' int8 matmuls on a generic int8 BatchMatMulV3 kernel "
                      "(measured at batch 32 on a CPU with AVX512_VNNI: 122 against fp32's 303 sentences/s). For "
                      "speed export bf16 for a CPU with AVX512_BF16 or AMX, or `--format litert --precision int8`",
                      stacklevel=2)
    elif not native:
        warnings.warn(f"this CPU has {detail}: a {precision} export runs emulated here, slower than fp32; serve "
                      "it on a CPU that has them", stacklevel=2)
    import keras                                      # here: the CLI reads PRECISIONS without loading Keras
    if precision == "bf16":
        previous = keras.config.dtype_policy()
        keras.config.set_dtype_policy("bfloat16")
        try:
            return model.with_preprocessor(model.preprocessor)
        finally:
            keras.config.set_dtype_policy(previous)
    copy = model.with_preprocessor(model.preprocessor)
    with warnings.catch_warnings():                   # "Layer X does not have a quantize method": nothing to do
        warnings.simplefilter("ignore", UserWarning)
        copy.quantize("int8")
    return copy
