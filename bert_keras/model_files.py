"""Opening a `.keras` file, with the failures named: a missing file, a file that is not a whole zip archive (cut
short by an interrupted copy: Keras itself says "File not found" of a file that is there), or one Keras cannot
rebuild (damaged, or written by a program whose layers are not registered here)."""

from __future__ import annotations

import os
import zipfile


def load_model_file(path: str):
    """`keras.models.load_model(path)` (`import bert_keras` registered every bert-keras layer and task model),
    with its failures as FileNotFoundError / ValueError naming the file and what to do.

    Args:
        path: str. A `.keras` file.

    Returns:
        The Keras model (or layer) saved in it.

    Raises:
        FileNotFoundError: there is no such file.
        ValueError: it is not a whole `.keras` file (damaged or truncated) or Keras cannot rebuild what it holds.

    Example:
        >>> encoder = bert_keras.BertEncoder(bert_keras.preset_config("bert_tiny"))
        >>> encoder.save("tiny.keras")
        >>> type(bert_keras.model_files.load_model_file("tiny.keras")).__name__
        'BertEncoder'
    """
    import keras                      # bert_keras/__init__ has registered every layer and task model

    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such model file: {path}" if not os.path.exists(path) else
                                f"{path} is a folder, not a .keras file")
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{path} is not a whole .keras file (a .keras file is a zip archive; this one is cut short "
                         "or damaged, e.g. by an interrupted copy): save or copy it again")
    try:
        return keras.models.load_model(path)
    except (zipfile.BadZipFile, EOFError, OSError, KeyError) as e:
        raise ValueError(f"{path} is damaged ({type(e).__name__}: {_first_line(e)}): save or copy it again") \
            from None
    except (TypeError, ValueError) as e:
        raise ValueError(f"{path} cannot be rebuilt by keras.models.load_model ({_first_line(e)}): is it a model "
                         "saved by another program? bert-keras opens its own models and Keras' built-in layers") \
            from None


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:300] if text else type(error).__name__
