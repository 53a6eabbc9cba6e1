"""The matmul floor of a classifier request: the exported model's dense matmuls and nothing else, on the session path.

    floor = MatmulFloor(config, num_classes)            # BertConfig of the classifier's encoder
    floor.run(token_counts)                             # one request: each sentence's real tokens ([CLS]..[SEP])

What it bounds: the export runs every position-wise part on real tokens only (layers.RealTokens), so a request of
B sentences holding T real tokens in all does, in every layer but the last, [T, H] x [H, H] for queries, keys,
values and the attention output, then [T, H] x [H, I] and [T, I] x [I, H]; the classifier's last layer computes
keys and values for all T tokens but queries, output projection and feed-forward for the B [CLS] rows only
(BertEncoder's pooled_only); then the pooler [B, H] x [H, H] and the head [B, H] x [H, C]. Here each of those is a
MatMul + BiasAdd (oneDNN fuses the pair, as in the export), with distinct float32 weights (so they stream from
memory as the model's do) and the model's dependencies (queries, keys and values side by side from a layer's
input, the rest in a chain), in a tf.compat.v1 Session at TensorFlow's default threads. Left out: attention's
batched matmuls and softmax, LayerNorm, GELU, the gathers and scatters, the tokenizer. So its time is a lower bound
for the export's graph with TensorFlow's kernels, whatever overhead is removed around them: benchmark_serving
reports it beside the export and ONNX Runtime's whole request. (tests/test_matmul_floor.py checks that its
matmuls have the shapes of those a traced run of a real export executes.)
"""

from __future__ import annotations

import numpy as np


class MatmulFloor:
    def __init__(self, config, num_classes: int):
        import tensorflow as tf

        h, i = config.hidden_size, config.intermediate_size
        rng = np.random.default_rng(0)
        self.graph = tf.Graph()
        with self.graph.as_default():
            def dense(x, n_in, n_out):
                w = tf.Variable(rng.normal(0, 0.02, (n_in, n_out)).astype(np.float32))
                return tf.nn.bias_add(tf.matmul(x, w), tf.Variable(np.zeros(n_out, np.float32)))

            self.tokens = tf.compat.v1.placeholder(tf.float32, [None, h])       # [T, H]
            self.cls_rows = tf.compat.v1.placeholder(tf.int32, [None])          # [B]: each sentence's first row
            x = self.tokens
            for layer in range(config.num_hidden_layers):
                last = layer == config.num_hidden_layers - 1
                k, v = dense(x, h, h), dense(x, h, h)
                if last:
                    x = tf.gather(x, self.cls_rows)                             # [B, H]
                    q, kv = dense(x, h, h), tf.gather(k + v, self.cls_rows)
                else:
                    q, kv = dense(x, h, h), k + v
                attended = dense(q + kv, h, h)
                x = dense(dense(attended, h, i), i, h)
            self.output = dense(dense(x, h, h), h, num_classes)
            init = tf.compat.v1.global_variables_initializer()
        self.session = tf.compat.v1.Session(graph=self.graph)
        self.session.run(init)
        self._zeros = np.zeros((0, h), np.float32)

    def feeds(self, token_counts) -> dict:
        counts = np.asarray(token_counts, np.int64)
        total = int(counts.sum())
        if total > len(self._zeros):
            self._zeros = np.zeros((max(total, 2 * len(self._zeros)), self._zeros.shape[1]), np.float32)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int32)
        return {self.tokens: self._zeros[:total], self.cls_rows: starts}

    def run(self, token_counts, options=None, run_metadata=None):
        """One request of sentences with these real-token counts -> logits [B, C] (of zeros: only time counts)."""
        return self.session.run(self.output, self.feeds(token_counts), options=options, run_metadata=run_metadata)

    def close(self) -> None:
        self.session.close()
