"""`bert-keras`, the command line, and `bert-keras demo`: the one layer above both packages.

    bert_keras   the library (config, layers, preprocessing, tasks, training)
    savedmodels  TF Serving exports and the serving side, built on bert_keras
    bert_keras_cli  this package: thin commands over both (`bert_keras` never imports it or savedmodels)
"""
