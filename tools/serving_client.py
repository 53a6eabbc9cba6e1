#!/usr/bin/env python
"""TF Serving client from the command line: `bert-keras predict` (gRPC Predict or Classify), runnable as a script.

    python tools/serving_client.py --server localhost:8500 --model-name sst2 --input text='a gorgeous film'
    python tools/serving_client.py --server localhost:8500 --model-name sst2 --classify --input text='dull'
    python tools/serving_client.py --server localhost:8500 --model-name squad \\
        --input question='Who wrote it?' --input context='It was written by Ada.'

The client itself is savedmodels/client.py (Predict, Classify, Regress, GetModelMetadata over gRPC; REST predict).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bert_keras.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["predict", *sys.argv[1:]]))
