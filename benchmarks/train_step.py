"""Train-step speed: a zoo encoder-decoder against the same model from keras-hub blocks.

Both models: 3+3 layers, d_model 256, 8 heads, ff 1024, vocabulary 8000, learned positions,
dropout 0.1, an untied output projection, batch 64, source and target length 32, AdamW.
They are timed alternately in one run, with XLA on and off; the figure is the ratio.

    python benchmarks/train_step.py [--rounds 5] [--steps 3]
"""

import argparse
import os
import sys

from zoo_cli import quiet_native_logs  # noqa: E402

quiet_native_logs()  # before TensorFlow: none of its C++ start-up lines

import keras  # noqa: E402
import keras_hub  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    append_results,
    machine_description,
    markdown_table,
    measure_matmul_peak,
    random_tokens,
    time_alternating,
)

from zoo.layers import (  # noqa: E402
    TokenAndPositionEmbedding,
    TransformerDecoderBlock,
    TransformerEncoderBlock,
)


LAYERS, D_MODEL, HEADS, FF, VOCAB, BATCH, LENGTH, DROPOUT = 3, 256, 8, 1024, 8000, 64, 32, 0.1


def build_zoo():
    source = keras.Input((LENGTH,), dtype="int32", name="source")
    target = keras.Input((LENGTH,), dtype="int32", name="target")
    x = TokenAndPositionEmbedding(VOCAB, D_MODEL, LENGTH, position="learned", scale_embeddings=False)(source)
    for _ in range(LAYERS):
        x = TransformerEncoderBlock(HEADS, FF, dropout=DROPOUT, attention_dropout=DROPOUT)(x)
    y = TokenAndPositionEmbedding(VOCAB, D_MODEL, LENGTH, position="learned", scale_embeddings=False)(target)
    for _ in range(LAYERS):
        y = TransformerDecoderBlock(HEADS, FF, dropout=DROPOUT, attention_dropout=DROPOUT)(y, x)
    logits = keras.layers.Dense(VOCAB)(y)
    return keras.Model([source, target], logits, name="zoo")


def build_keras_hub():
    source = keras.Input((LENGTH,), dtype="int32", name="source")
    target = keras.Input((LENGTH,), dtype="int32", name="target")
    x = keras_hub.layers.TokenAndPositionEmbedding(VOCAB, LENGTH, D_MODEL, tie_weights=False)(source)
    for _ in range(LAYERS):
        x = keras_hub.layers.TransformerEncoder(FF, HEADS, dropout=DROPOUT)(x)
    y = keras_hub.layers.TokenAndPositionEmbedding(VOCAB, LENGTH, D_MODEL, tie_weights=False)(target)
    for _ in range(LAYERS):
        y = keras_hub.layers.TransformerDecoder(FF, HEADS, dropout=DROPOUT)(y, x)
    logits = keras.layers.Dense(VOCAB)(y)
    return keras.Model([source, target], logits, name="keras_hub")


def train_flops(model_params_in_matmuls):
    """FLOPs of one training step: 3x the forward matmul FLOPs (forward + two backward)."""
    tokens = BATCH * LENGTH
    dense = 2 * tokens * model_params_in_matmuls
    # Scores and weighted values: encoder self, decoder self, decoder cross; 2 matmuls each.
    attention = 3 * LAYERS * 2 * (2 * BATCH * LENGTH * LENGTH * D_MODEL)
    return 3 * (dense + attention)


def matmul_parameters():
    """Weights that take part in a matmul per token (embedding lookups excluded)."""
    attention = 4 * D_MODEL * D_MODEL
    ffn = 2 * D_MODEL * FF
    encoder = LAYERS * (attention + ffn)
    decoder = LAYERS * (2 * attention + ffn)
    return encoder + decoder + D_MODEL * VOCAB


def make_step(model, data):
    def step():
        model.train_on_batch(*data)

    return step


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--no-record", action="store_true", help="do not write to RESULTS.md")
    args = parser.parse_args()

    print(machine_description())
    peak = measure_matmul_peak()
    print(f"measured fp32 matmul peak: {peak / 1e9:.1f} GFLOP/s")
    rng = np.random.default_rng(0)
    data = (
        [random_tokens(rng, BATCH, LENGTH, VOCAB), random_tokens(rng, BATCH, LENGTH, VOCAB)],
        random_tokens(rng, BATCH, LENGTH, VOCAB),
    )
    candidates, params = {}, {}
    for xla in (True, False):
        for name, build in (("zoo", build_zoo), ("keras-hub", build_keras_hub)):
            keras.utils.set_random_seed(0)
            model = build()
            model.compile(
                optimizer=keras.optimizers.AdamW(1e-4),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                jit_compile=xla,
            )
            params[name] = model.count_params()
            candidates[(name, xla)] = make_step(model, data)
    seconds = time_alternating(candidates, steps=args.steps, rounds=args.rounds)

    flops = train_flops(matmul_parameters())
    tokens = 2 * BATCH * LENGTH  # source + target tokens per step
    rows = []
    for xla in (True, False):
        zoo_s, hub_s = seconds[("zoo", xla)], seconds[("keras-hub", xla)]
        for name, s in (("zoo", zoo_s), ("keras-hub", hub_s)):
            rows.append([
                name, "on" if xla else "off", f"{s * 1000:.0f}", f"{tokens / s:,.0f}",
                f"{flops / s / peak:.1%}", f"{hub_s / zoo_s:.2f}x" if name == "zoo" else "",
            ])
    header = ["model", "XLA", "ms/step", "tokens/s", "of fp32 peak", "zoo / keras-hub"]
    table = markdown_table(header, rows)
    print("\n".join(table))
    print(f"parameters: zoo {params['zoo']:,}, keras-hub {params['keras-hub']:,}")
    if not args.no_record:
        append_results(
            "Train step: zoo vs keras-hub (3+3 layers, d256, 8 heads, ff1024, vocab 8000, batch 64, len 32)",
            "make bench  (python benchmarks/train_step.py)",
            table,
            notes=[
                f"median of {args.rounds} alternating rounds of {args.steps} steps after 2 warm-up steps",
                f"measured fp32 matmul peak {peak / 1e9:.1f} GFLOP/s; {flops / 1e9:.1f} GFLOP per step (analytic)",
                "tokens/s counts source + target tokens; the ratio is keras-hub time / zoo time",
                f"parameters: zoo {params['zoo']:,}, keras-hub {params['keras-hub']:,}",
            ],
        )


if __name__ == "__main__":
    main()
