"""Checkpoint import (google-research TF1, Model Garden TF2, Hugging Face safetensors) and TF1 export."""

from bert_keras.checkpoints.load import (load_checkpoint, load_checkpoint_with_heads, read_checkpoint,
                                        save_google_checkpoint)

__all__ = ["load_checkpoint", "load_checkpoint_with_heads", "read_checkpoint", "save_google_checkpoint"]
