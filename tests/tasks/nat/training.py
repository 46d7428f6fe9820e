"""A tiny NAT trained for a test module: two epochs of real Multi30k pairs through train()."""

import keras

from zoo.data import load_multi30k
from zoo.tasks import get_task
from zoo.training import train

TASK = get_task("nat")


def train_tiny_nat(tmp_path_factory, name, seed, sentences=600, bleu_sample_size=8, **fields):
    """``(model, history, tokenizer, workdir, config)`` of the ``tiny`` preset with ``fields``;
    ``bleu_sample_size=0``: no BLEU after each epoch (its decoding compiles for seconds)."""
    keras.utils.set_random_seed(seed)
    # A 400-piece vocabulary makes many pairs longer than 48 pieces: truncated, as they were
    # before training learned to skip them, so that every pair is trained on.
    config = TASK.get_config("tiny", **{"vocab_size": 400, "max_length": 48, "epochs": 2,
                                        "batch_tokens": 1024, "long_pairs": "truncate",
                                        **fields})  # fmt: skip
    workdir = str(tmp_path_factory.mktemp(name))
    model, history, tokenizer = train(
        TASK, config, workdir, train_data=load_multi30k("train")[:sentences],
        validation_data=load_multi30k("val")[:16], bleu_sample_size=bleu_sample_size,
        verbose=0,
    )  # fmt: skip
    return model, history, tokenizer, workdir, config
