"""TF Serving exports of bert_keras models, and the client and local server that talk to them."""
