"""Decoding speed: zoo's cached greedy and beam search against uncached loops and keras-hub.

One translator decodes the first 200 English sentences of Multi30k test2016, at batch 1 and
batch 64, six ways, timed alternately in one run (the median of several rounds after a
compiling pass):

- zoo greedy and zoo beam-4: :func:`zoo.decoding.greedy_search` and
  :func:`zoo.decoding.beam_search` under ``tf.function(jit_compile=True)``: the encoder once,
  the decoder one token at a time with its KV caches;
- zoo greedy on 4 copies of each sentence: beam-4's rows without its search, so that
  beam-4's cost over greedy splits into the model's share (4 rows a step) and the search's;
- the uncached loop of the TensorFlow tutorial, :func:`zoo.decoding.uncached_greedy_search`,
  which re-runs the encoder and the decoder over the whole target at every step, twice:
  ``static_shapes=True`` runs the model on the fixed ``(B, L)`` target buffer, so it
  compiles with XLA exactly as the cached searches do, and the ratio to it isolates the
  cache (the headline figure); ``static_shapes=False`` is the tutorial's own growing prefix,
  which cannot be XLA-compiled, in plain graph mode (``tf.function``), for reference;
- keras-hub: ``keras_hub.models.BartSeq2SeqLM.generate`` with the greedy sampler and
  ``jit_compile=True``, on a ``BartBackbone`` of the same vocabulary, width, heads,
  feed-forward size, depth and positions, with random weights (its own KV caches;
  ``preprocessor=None``, token ids in).

Every method generates exactly the same number of new tokens per sentence (``--new-tokens``,
32 by default, about the longest reference translation): the zoo searches get an EOS id
that no token has (-1), beam search runs without early stopping, and keras-hub runs with
``stop_token_ids=None``. A random model rarely emits EOS, and a trained one stops at
different steps in different methods, so this is how the work is kept equal; generated
tokens/s counts sentences x new tokens (x1, not x4, for beam-4). The figures are the ratios.

    python benchmarks/decode.py [--workdir workdirs/translator-small] [--quick]

Without ``--workdir`` (a folder with ``model.keras`` and ``sentencepiece.model``), the
``small`` preset is built with random weights, and a SentencePiece model of its vocabulary
size is first learned on the Multi30k training sentences.
"""

import argparse
import os
import sys
import tempfile
import time

from zoo_cli import quiet_native_logs  # noqa: E402

quiet_native_logs()  # before TensorFlow: none of its C++ start-up lines

import keras  # noqa: E402
import keras_hub  # noqa: E402
import numpy as np  # noqa: E402
import sentencepiece as spm  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    append_results,
    machine_description,
    markdown_table,
    time_alternating,
)

from zoo.artifacts import MODEL_FILE  # noqa: E402
from zoo.data import (  # noqa: E402
    BOS_ID,
    PAD_ID,
    SentencePieceTokenizer,
    load_multi30k,
    train_sentencepiece,
)
from zoo.decoding import beam_search, greedy_search, uncached_greedy_search  # noqa: E402
from zoo.models import build_translator, translator_config  # noqa: E402
from zoo.models.translator import step_and_caches  # noqa: E402

from zoo.tasks import load, translate  # noqa: E402
from zoo.tasks.translation.config import TRAINING_PRESETS  # noqa: E402

NEVER = -1  # an EOS id that no token has: every search runs its full length
GREEDY = "zoo greedy (KV cache)"
BEAM = "zoo beam-4 (KV cache)"
GREEDY_ROWS = "zoo greedy on 4 copies of each sentence (beam-4's rows)"
UNCACHED = "uncached greedy, XLA (static shapes)"
TUTORIAL = "uncached greedy, tutorial (growing prefix, no XLA)"
HUB = "keras-hub BART generate (greedy)"
API_GREEDY = "translate() greedy, natural lengths"
API_BEAM = "translate() beam-4, natural lengths"
API_SETTINGS = {API_GREEDY: {"method": "greedy"}, API_BEAM: {"method": "beam", "beam_size": 4}}
SOURCE_BUCKET = 8


# ---------------------------------------------------------------------- the model
def load_or_build(workdir):
    """(model, tokenizer, config, where): a trained translator, or the random `small` one."""
    if workdir:
        _, model, tokenizer = load(workdir, "translator")
        config = getattr(model, "backbone", model).architecture
        return model, tokenizer, config, f"trained, {os.path.join(workdir, MODEL_FILE)}"
    config = translator_config("small")
    prefix = os.path.join(tempfile.mkdtemp(prefix="decode-bench-"), "sentencepiece")
    start = time.perf_counter()
    texts = [text for pair in load_multi30k("train") for text in pair]
    sample = TRAINING_PRESETS["small"].vocab_sample_size  # as `zoo train` samples it
    vocab_path = train_sentencepiece(texts[:sample], prefix, config.vocab_size)
    seconds = time.perf_counter() - start
    print(f"SentencePiece ({config.vocab_size} pieces) learned in {seconds:.0f} s")
    keras.utils.set_random_seed(0)
    model = build_translator(config)
    return model, SentencePieceTokenizer(vocab_path), config, "`small` preset, random weights"


def build_bart(config):
    """keras-hub's BART of the translator's sizes, as a greedy ``BartSeq2SeqLM`` under XLA."""
    if config.encoder_layers != config.decoder_layers:
        raise SystemExit("BartBackbone has one depth for both stacks; the translator has two.")
    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.BartBackbone(
        vocabulary_size=config.vocab_size,
        num_layers=config.decoder_layers,
        num_heads=config.num_heads,
        hidden_dim=config.d_model,
        intermediate_dim=config.ff_dim,
        dropout=config.dropout,
        max_sequence_length=config.max_length,
    )
    lm = keras_hub.models.BartSeq2SeqLM(backbone=backbone, preprocessor=None)
    lm.compile(sampler="greedy", jit_compile=True)
    return lm


# ---------------------------------------------------------------------- the data
def python_processor(tokenizer):
    """The Python SentencePiece processor of the tokenizer's model: the same ids as tf-text.

    (Eager tf-text calls fail once ``keras.utils.set_random_seed`` has run after the
    tokenizer was made; the ids are computed once, outside every timed function.)
    """
    processor = spm.SentencePieceProcessor()
    processor.LoadFromSerializedProto(tokenizer.model_proto)
    return processor


def source_batches(processor, sentences, batch_size, max_length):
    """The sentences as (B, S) int32 id batches; one S for all, so each batch size compiles once."""
    ids = [row[:max_length] for row in processor.encode(sentences)]
    length = -(-max(len(row) for row in ids) // SOURCE_BUCKET) * SOURCE_BUCKET
    length = min(length, max_length)
    padded = np.full((len(ids), length), PAD_ID, np.int32)
    for i, row in enumerate(ids):
        padded[i, : len(row)] = row
    return [tf.constant(padded[i : i + batch_size]) for i in range(0, len(ids), batch_size)]


# ---------------------------------------------------------------------- the methods
def zoo_methods(model, new_tokens):
    """name -> XLA-compiled function (B, S) ids -> (B, new_tokens) ids."""

    @tf.function(jit_compile=True)
    def greedy(source):
        step, caches = step_and_caches(model, source, new_tokens)
        return greedy_search(step, caches, new_tokens, eos_id=NEVER)

    @tf.function(jit_compile=True)
    def beam(source):
        step, caches = step_and_caches(model, source, new_tokens)
        ids, _ = beam_search(
            step, caches, new_tokens, beam_size=4, early_stopping=False, eos_id=NEVER
        )
        return ids

    @tf.function(jit_compile=True)
    def greedy_rows(source):
        """Greedy search on beam-4's rows: the model's share of beam-4's cost, no search."""
        rows = tf.repeat(source, 4, axis=0)
        step, caches = step_and_caches(model, rows, new_tokens)
        return greedy_search(step, caches, new_tokens, eos_id=NEVER)[::4]

    @tf.function(jit_compile=True)
    def uncached(source):
        return uncached_greedy_search(model, source, new_tokens, eos_id=NEVER, static_shapes=True)

    @tf.function  # plain graph mode: the growing prefix has a new shape at every step
    def tutorial(source):
        return uncached_greedy_search(
            model, source, new_tokens, eos_id=NEVER, static_shapes=False
        )

    return {GREEDY: greedy, BEAM: beam, GREEDY_ROWS: greedy_rows, UNCACHED: uncached,
            TUTORIAL: tutorial}


def hub_method(lm, new_tokens):
    """keras-hub ``generate`` on token ids: BOS then ``new_tokens`` generated positions."""

    def generate(source):
        batch = source.shape[0]
        decoder_ids = np.zeros((batch, new_tokens + 1), np.int32)
        decoder_ids[:, 0] = BOS_ID
        decoder_mask = np.zeros((batch, new_tokens + 1), bool)
        decoder_mask[:, 0] = True
        inputs = {
            "encoder_token_ids": source,
            "encoder_padding_mask": tf.not_equal(source, PAD_ID),
            "decoder_token_ids": tf.constant(decoder_ids),
            "decoder_padding_mask": tf.constant(decoder_mask),
        }
        out = lm.generate(inputs, stop_token_ids=None)
        return out["decoder_token_ids"][:, 1:]  # the generated tokens after BOS

    return generate


def run_all(function, batches):
    """Decode every batch; the step the timer measures (it blocks on the numpy result)."""
    return [np.asarray(function(batch)) for batch in batches]


# ---------------------------------------------------------------------- main
def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", help="a folder with model.keras and sentencepiece.model")
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--new-tokens", type=int, default=32, help="generated per sentence")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 64])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=0,
                        help="untimed passes after the first, compiling pass (itself a warm-up)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 16 sentences, batch 1 and 8, 8 new tokens, 1 round")
    parser.add_argument("--no-record", action="store_true", help="do not write to RESULTS.md")
    args = parser.parse_args()
    if args.quick:
        args.sentences, args.new_tokens, args.batch_sizes, args.rounds = 16, 8, [1, 8], 1

    print(machine_description())
    print("XLA: on for the zoo searches, the XLA uncached loop and keras-hub; "
          "off for the tutorial loop (dynamic shapes)")
    model, tokenizer, config, where = load_or_build(args.workdir)
    if args.new_tokens + 1 > config.max_length:
        raise SystemExit(f"--new-tokens must be below the model's {config.max_length} positions")
    lm = build_bart(config)
    params = {"zoo": model.count_params(), "keras-hub": lm.count_params()}
    print(f"model: {where}; parameters zoo {params['zoo']:,}, "
          f"keras-hub BART {params['keras-hub']:,}")

    pairs = load_multi30k("test2016")[: args.sentences]
    sentences = [source for source, _ in pairs]
    processor = python_processor(tokenizer)
    reference = np.array([len(ids) + 1 for ids in processor.encode([t for _, t in pairs])])
    lengths = (f"reference translations: {reference.mean():.1f} tokens with EOS on average, "
               f"90th percentile {np.percentile(reference, 90):.0f}, longest {reference.max()}")
    print(lengths)
    methods = zoo_methods(model, args.new_tokens)
    methods[HUB] = hub_method(lm, args.new_tokens)

    candidates, outputs, api_tokens, source_length = {}, {}, {}, None
    for batch_size in args.batch_sizes:
        batches = source_batches(processor, sentences, batch_size, config.max_length)
        source_length = int(batches[0].shape[1])
        for name, function in methods.items():
            start = time.perf_counter()
            outputs[(name, batch_size)] = run_all(function, batches)  # compiles every shape
            print(f"  first pass (compiles) {name}, batch {batch_size}: "
                  f"{time.perf_counter() - start:.1f} s", flush=True)
            candidates[(name, batch_size)] = lambda f=function, b=batches: run_all(f, b)
        # The public API as users call it: sentences in, EOS ends each one, the search
        # sized from the source (zoo.decoding.output_length).
        for name, settings in API_SETTINGS.items():
            def api(b=batch_size, kwargs=settings):
                return translate(model, tokenizer, sentences, batch_size=b, **kwargs)
            start = time.perf_counter()
            texts = api()
            print(f"  first pass (compiles) {name}, batch {batch_size}: "
                  f"{time.perf_counter() - start:.1f} s", flush=True)
            api_tokens[(name, batch_size)] = sum(len(ids) + 1 for ids in processor.encode(texts))
            candidates[(name, batch_size)] = api

    # Equal work: every method generated new_tokens real tokens for every sentence.
    for key, out in outputs.items():  # (the forced-length methods)
        ids = np.concatenate(out)
        assert ids.shape == (len(sentences), args.new_tokens), (key, ids.shape)
        assert np.all(ids != PAD_ID), f"{key} stopped early"
    def same_tokens(name, batch_size):
        ours, theirs = (np.concatenate(outputs[(m, batch_size)]) for m in (GREEDY, name))
        return f"{np.mean(ours == theirs):.1%}"

    agreement = "tokens equal to zoo cached greedy's: " + ", ".join(
        f"{name} batch {b} {same_tokens(name, b)}"
        for b in args.batch_sizes for name in (UNCACHED, TUTORIAL, GREEDY_ROWS)
    )
    print(agreement)

    print(f"timing: median of {args.rounds} alternating rounds", flush=True)
    seconds = time_alternating(candidates, steps=1, rounds=args.rounds, warmup=args.warmup)

    n = len(sentences)
    rows = []
    for batch_size in args.batch_sizes:
        for name in [*methods, *API_SETTINGS]:
            s = seconds[(name, batch_size)]
            tokens = api_tokens.get((name, batch_size), n * args.new_tokens)
            rows.append([name, batch_size, f"{1000 * s / n:.1f}", f"{n / s:.1f}",
                         f"{tokens / s:,.0f}"])
    table = markdown_table(
        ["method", "batch", "ms / sentence", "sentences/s", "generated tokens/s"], rows
    )
    ratios = []
    for batch_size in args.batch_sizes:
        greedy, api_beam = seconds[(GREEDY, batch_size)], seconds[(API_BEAM, batch_size)]
        ratios.append(
            f"batch {batch_size}: zoo cached greedy is "
            f"{seconds[(UNCACHED, batch_size)] / greedy:.1f}x the XLA uncached loop, "
            f"{seconds[(TUTORIAL, batch_size)] / greedy:.1f}x the tutorial loop, "
            f"{seconds[(HUB, batch_size)] / greedy:.2f}x keras-hub generate; beam-4 costs "
            f"{seconds[(BEAM, batch_size)] / greedy:.2f}x greedy (greedy on its 4 rows per "
            f"sentence, the model's share: {seconds[(GREEDY_ROWS, batch_size)] / greedy:.2f}x; "
            f"natural lengths, translate(): "
            f"{api_beam / seconds[(API_GREEDY, batch_size)]:.2f}x)"
        )
    targets = ("targets: zoo cached greedy >= 10x the uncached loop at batch 1, "
               ">= 1.3x keras-hub generate at batch 1 and 64; beam-4 <= 2.5x greedy at batch 1")
    print("\n".join(table))
    print("\n".join(ratios))
    print(targets)

    if not args.no_record:
        append_results(
            f"Decoding: zoo KV-cache greedy/beam vs uncached loops vs keras-hub BART "
            f"({config.encoder_layers}+{config.decoder_layers} layers, d{config.d_model}, "
            f"{config.num_heads} heads, ff{config.ff_dim}, vocab {config.vocab_size})",
            " ".join(["python benchmarks/decode.py", *sys.argv[1:]]),
            table,
            notes=[
                f"model: {where}; keras-hub: BartBackbone of the same sizes (post-LN, GELU, "
                "learned positions: its own architecture), random weights, preprocessor=None",
                "XLA on (tf.function(jit_compile=True)) for the zoo searches, the XLA uncached "
                "loop and keras-hub (compile(sampler='greedy', jit_compile=True)); off for the "
                "tutorial loop, whose prefix grows a shape at every step",
                f"{n} Multi30k test2016 sentences, sources padded to {source_length} tokens; "
                f"every method generates exactly {args.new_tokens} new tokens per sentence "
                "(zoo: an EOS id no token has, beam without early stopping; keras-hub: "
                "stop_token_ids=None); tokens/s = sentences x new tokens (beam: not x4)",
                lengths,
                "translate() rows: the public API on the same sentences (strings in and out, "
                "tokenization in the graph), each stopping at its EOS, the search sized from "
                "its source (1.2 S + 10); generated tokens/s counts the output tokens with EOS",
                "uncached loops: zoo.decoding.uncached_greedy_search, encoder and decoder "
                "re-run at every step; static_shapes=True over the fixed target buffer under "
                "XLA (isolates the cache), static_shapes=False as the TensorFlow tutorial",
                "greedy on 4 copies: each sentence repeated 4 times, greedy search over "
                "those rows (beam-4's model work without its search); tokens/s counts one copy",
                f"median of {args.rounds} alternating rounds (one round = every method over "
                f"all sentences) after a compiling pass and {args.warmup} warm-up pass(es)",
                *ratios,
                targets,
                agreement,
                f"parameters: zoo {params['zoo']:,}, keras-hub {params['keras-hub']:,}",
            ],
        )


if __name__ == "__main__":
    main()
