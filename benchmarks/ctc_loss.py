"""The CTC loss: zoo's forward recursion in Keras ops against TensorFlow's ``tf.nn.ctc_loss``.

Both jit-compiled as ``fit`` runs them. First the loss and its gradient alone at a NAT batch's
shape (64 sentences of 24 labels, 48 decoder positions, vocabulary 8,000); then a whole train
step of the small CTC + GLAT NAT (upsampling 2) on 128 sentences of 16 source and 16 target
tokens, one model compiled with each loss. Timed alternately in one run; the figure is the ratio.

    python benchmarks/ctc_loss.py [--rounds 5] [--steps 3]
"""

import argparse

from zoo_cli import quiet_native_logs

quiet_native_logs()  # before TensorFlow: none of its C++ start-up lines

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from common import append_results, machine_description, markdown_table, time_alternating  # noqa: E402
from keras import ops  # noqa: E402

from zoo.layers import ctc_log_likelihood  # noqa: E402
from zoo.models.nat import MASK_ID, build_nat_translator, get_config  # noqa: E402
from zoo.training.losses import CTCLoss  # noqa: E402
from zoo.training.optimizer import make_optimizer  # noqa: E402

VOCAB = 8000


class TensorFlowCTCLoss(CTCLoss):
    """:class:`CTCLoss` as it was: ``keras.ops.ctc_loss``, which is ``tf.nn.ctc_loss``."""

    def call(self, y_true, y_pred):
        y_true = ops.cast(y_true, "int32")
        counts = ops.sum(ops.cast(ops.not_equal(y_true, self.pad_id), "int32"), axis=1)
        widths = ops.full((ops.shape(y_pred)[0],), ops.shape(y_pred)[1], "int32")
        nll = ops.ctc_loss(y_true, ops.cast(y_pred, "float32"), counts, widths,
                           mask_index=self.blank_id)  # fmt: skip
        return nll / ops.cast(ops.maximum(counts, 1), "float32")


def loss_steps(rng):
    """Loss and gradient alone: name -> step, and the largest gradient difference."""
    batch, positions, width = 64, 48, 24
    logits = tf.constant(rng.normal(size=(batch, positions, VOCAB)).astype("float32"))
    counts = rng.integers(8, width + 1, batch)
    labels = rng.integers(2, VOCAB, (batch, width))
    labels = tf.constant(np.where(np.arange(width) < counts[:, None], labels, 0).astype("int32"))

    def compiled(function):
        @tf.function(jit_compile=True)
        def step():
            with tf.GradientTape() as tape:
                tape.watch(logits)
                total = tf.reduce_sum(function())
            return tape.gradient(total, logits)

        return step

    zoo = compiled(lambda: -ctc_log_likelihood(tf.nn.log_softmax(logits), labels, MASK_ID))
    reference = compiled(lambda: tf.nn.ctc_loss(labels, logits, counts, tf.fill([batch], positions),
                                                logits_time_major=False, blank_index=MASK_ID))  # fmt: skip
    difference = float(tf.reduce_max(tf.abs(zoo() - reference())))
    return {"zoo": lambda: zoo().numpy(), "tf.nn.ctc_loss": lambda: reference().numpy()}, difference


def train_steps(rng):
    """One CTC + GLAT train step per loss: name -> step."""
    config = get_config("small", decoder="ctc", ctc_upsample=2, glancing_ratio=0.5,
                        vocab_size=VOCAB)  # fmt: skip
    x = {"source": rng.integers(5, VOCAB, (128, 16)).astype("int32"),
         "target_in": rng.integers(5, VOCAB, (128, 16)).astype("int32")}  # fmt: skip
    y = {"tokens": x["target_in"]}
    steps = {}
    for name, loss in (("zoo", CTCLoss(MASK_ID)), ("tf.nn.ctc_loss", TensorFlowCTCLoss(MASK_ID))):
        model = build_nat_translator(config)
        model.compile(optimizer=make_optimizer(config), loss={"tokens": loss}, jit_compile=True)
        steps[name] = lambda model=model: model.train_on_batch(x, y)
    return steps


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--no-record", action="store_true", help="do not write to RESULTS.md")
    args = parser.parse_args()
    print(machine_description())
    rng = np.random.default_rng(0)
    losses, difference = loss_steps(rng)
    rows = []
    for label, steps in (("loss + gradient", losses), ("CTC + GLAT train step", train_steps(rng))):
        times = time_alternating(steps, args.steps, args.rounds)
        ours, theirs = times["zoo"], times["tf.nn.ctc_loss"]
        rows.append([label, f"{1000 * ours:.0f}", f"{1000 * theirs:.0f}", f"{theirs / ours:.2f}x"])
    table = markdown_table(["", "zoo ms", "tf.nn.ctc_loss ms", "speed-up"], rows)
    print("\n".join(table))
    print(f"largest gradient difference: {difference:.2e}")
    if not args.no_record:
        append_results(
            "CTC loss: zoo against tf.nn.ctc_loss (XLA)",
            f"python benchmarks/ctc_loss.py --rounds {args.rounds} --steps {args.steps}",
            table, notes=[f"largest gradient difference: {difference:.2e}"],
        )  # fmt: skip


if __name__ == "__main__":
    main()
