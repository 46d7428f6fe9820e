"""The tf.data pipeline for training a tagger: encoded words, characters and tags, bucketed to
a word budget, with word dropout so that the model learns to tag every word from its
characters too (:func:`make_tagging_dataset`).
"""

import dataclasses

import numpy as np
import tensorflow as tf

from zoo.data.epoch_order import DataPosition, draw_seed, epoch_shuffled, per_pass
from zoo.data.tagger_vocabulary import OOV_ID, PAD_ID
from zoo.data.translation_pipeline import bucket_spec, equal_shares, prefetched

__all__ = ["make_tagging_dataset", "split_long_sentences"]


def split_long_sentences(sentences, max_length):
    """Cut every sentence longer than ``max_length`` words into consecutive pieces.

    Training sees every word once: nothing is dropped, a long sentence only loses the context
    across its cuts. (Tagging long sentences uses overlapping windows instead; see
    ``zoo.models.tagger.preprocessor.window_plan``.)

    Args:
        sentences: :class:`~zoo.data.Sentence` objects.
        max_length: the longest piece, in words.

    Returns:
        A list of ``Sentence`` objects, each at most ``max_length`` words, with the pieces
        of a sentence ``s`` named ``s.sent_id + "/1"``, ``"/2"``, ...
    """
    pieces = []
    for sentence in sentences:
        if len(sentence.words) <= max_length:
            pieces.append(sentence)
            continue
        for number, start in enumerate(range(0, len(sentence.words), max_length), 1):
            cut = slice(start, start + max_length)
            pieces.append(
                dataclasses.replace(
                    sentence,
                    sent_id=f"{sentence.sent_id}/{number}",
                    words=sentence.words[cut],
                    upos=sentence.upos[cut],
                    xpos=sentence.xpos[cut],
                    lemmas=sentence.lemmas[cut],
                    feats=sentence.feats[cut],
                )
            )
    return pieces


UNSEEN_TAG = -1  # the label of a tag that training never saw: no prediction equals it


def _encode_flat(sentences, preprocessor, heads, unseen_tags="raise"):
    """Every word of every sentence, encoded: flat arrays, the label ids of each head, the
    sentence lengths and the count of unseen labels per head. A UPOS tag outside UD's 17
    raises; another head's class outside the vocabulary raises too, or with
    ``unseen_tags="error"`` gets :data:`UNSEEN_TAG`."""
    vocabulary = preprocessor.vocabulary
    lengths = np.array([len(s.words) for s in sentences], "int64")
    total = int(lengths.sum())
    forms = tf.constant([form for sentence in sentences for form in sentence.words], tf.string)
    words, chars = (ids.numpy() for ids in preprocessor.encode(forms))  # (N,), (N, C)
    labels = {head: np.zeros(total, "int32") for head in heads}
    unseen = dict.fromkeys(heads, 0)
    start = 0
    for sentence in sentences:
        for head in heads:
            for t, name in enumerate(vocabulary.gold_classes(head, sentence)):
                label = vocabulary.class_id(head, name)
                if label is None:
                    if head == "upos" or unseen_tags == "raise":
                        raise ValueError(
                            f"Sentence {sentence.sent_id!r}, word {sentence.words[t]!r}: {head} "
                            f"{'script' if head == 'lemma' else 'tag'} {name!r} is not in the "
                            "vocabulary."
                        )
                    label, unseen[head] = UNSEEN_TAG, unseen[head] + 1
                labels[head][start + t] = label
        start += len(sentence.words)
    return words, chars, labels, lengths, unseen


def make_tagging_dataset(
    sentences,
    preprocessor,
    batch_tokens=1024,
    max_length=256,
    bucket_width=8,
    shuffle=True,
    seed=None,
    word_dropout=0.0,
    xpos=False,
    pad_to_bucket=False,
    batch_multiple=1,
    epoch=None,
    unseen_tags="raise",
    heads=None,
    unseen_counts=None,
    part=None,
):
    """Build a ``tf.data.Dataset`` of word-budget batches of tagged sentences.

    Split sentences longer than ``max_length`` (:func:`split_long_sentences`), encode every
    word, shuffle, bucket by length (``zoo.data.bucket_spec``) so that a padded batch holds at
    most ``batch_tokens`` words, apply word dropout. One pass is one epoch, every sentence once.

    Args:
        sentences: :class:`~zoo.data.Sentence` objects.
        preprocessor: the tagger's ``zoo.models.TaggerPreprocessor`` (``encode`` makes the ids,
            its ``vocabulary`` the labels).
        batch_tokens: the word budget of a batch.
        max_length: the longest sentence, in words; longer ones are split.
        bucket_width: the length step between buckets.
        shuffle: shuffle the sentences, anew each epoch.
        seed: the seed of the shuffle and of word dropout.
        epoch: a :class:`zoo.data.DataPosition`, or its ``epoch`` variable: each epoch's
            order is then a function of ``seed`` and the epoch alone. A resumed run rebuilds
            the batches its epoch has done (:func:`zoo.data.skip_done`): a treebank is small.
        word_dropout: the probability of replacing each real word id by the OOV id (1), the
            characters kept; 0 for evaluation data. Drawn from ``seed``, the epoch and the
            batch's place alone, so that a resumed run drops the words the interrupted one did.
        xpos: the same as ``heads=("upos", "xpos")``; the vocabulary must have XPOS tags.
        heads: the heads to label, ``"upos"`` first (a tagger's ``config.heads``): ids index
            ``vocabulary.classes(head)``; the lemma's label is its edit script.
        pad_to_bucket: pad every batch to its bucket's upper bound (fewer XLA compilations).
        batch_multiple: batch sizes are multiples of this (see ``zoo.data.bucket_spec``).
        unseen_tags: for a class outside the vocabulary (validation data): ``"raise"``, or
            ``"error"``: its label is :data:`UNSEEN_TAG`, which accuracy counts as an error and
            the losses leave out.
        unseen_counts: a dict that receives ``{head: count}`` of such labels, if given.
        part: ``(index, count)``: only part ``index`` of ``count`` disjoint parts of each
            epoch (a worker's): every part draws the one order (a shuffle needs ``seed``) and
            keeps its every ``count``-th sentence.

    Returns:
        A ``tf.data.Dataset`` of ``({"words": (B, T), "chars": (B, T, C)}, labels)``, all
        ``int32`` and 0 at padding, where ``labels`` is the UPOS ids ``(B, T)`` (indices in
        ``zoo.data.UPOS_TAGS``), or with more heads the dict ``{head: ids}`` (the outputs of
        a tagger with those heads).

    Raises:
        ValueError: no sentences, a tag outside the vocabulary (named with its sentence), a
            bad size argument, or a shuffled ``part`` without a seed.

    Example:
        >>> from zoo.data import TaggerVocabulary, load_ud_english_ewt
        >>> from zoo.models import TaggerPreprocessor
        >>> sentences = load_ud_english_ewt("dev")[:100]
        >>> preprocessor = TaggerPreprocessor(TaggerVocabulary.build(sentences))
        >>> features, labels = next(iter(make_tagging_dataset(sentences, preprocessor)))
        >>> sorted(features), features["words"].shape == labels.shape
        (['chars', 'words'], True)
    """
    vocabulary = preprocessor.vocabulary
    heads = tuple(heads or (("upos", "xpos") if xpos else ("upos",)))
    if heads[0] != "upos":
        raise ValueError(f"heads must start with 'upos', got {heads}.")
    for head in heads[1:]:
        if not vocabulary.classes(head):
            raise ValueError(f"The {head.upper()} head needs a vocabulary with {head.upper()} "
                             "classes (built from Sentences with them).")  # fmt: skip
    if not 0.0 <= word_dropout < 1.0:
        raise ValueError(f"word_dropout must be in [0, 1), got {word_dropout}.")
    upper, batch_sizes = bucket_spec(batch_tokens, max_length, bucket_width, batch_multiple)
    sentences = split_long_sentences(list(sentences), max_length)
    sentences = [s for s in sentences if s.words]
    if not sentences:
        raise ValueError("sentences is empty; the dataset needs at least one tagged sentence.")
    if unseen_tags not in ("raise", "error"):
        raise ValueError(f"unseen_tags must be 'raise' or 'error', got {unseen_tags!r}.")
    if part is not None and shuffle and seed is None:
        raise ValueError("A part of an epoch needs a seed: every part must draw one order.")
    words, chars, label_ids, lengths, unseen = _encode_flat(sentences, preprocessor, heads,
                                                            unseen_tags)
    if unseen_counts is not None:
        unseen_counts.update(unseen)

    # Each element is a sentence, sliced out of the flat arrays by its start and length.
    flat = {"words": words, "chars": chars, **label_ids}
    flat = {name: tf.constant(array) for name, array in flat.items()}
    several = len(heads) > 1
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])

    def sentence(start, length):
        piece = {name: array[start : start + length] for name, array in flat.items()}
        features = {"words": piece["words"], "chars": piece["chars"]}
        labels = {head: piece[head] for head in heads} if several else piece["upos"]
        return features, labels

    label_shapes = {head: [None] for head in heads} if several else [None]
    label_padding = {head: PAD_ID for head in heads} if several else PAD_ID

    def one_pass(value):  # value: the epoch, read as the pass begins (None: no epoch given)
        if shuffle:
            ds = epoch_shuffled((starts, lengths), seed, value)
        else:
            ds = tf.data.Dataset.from_tensor_slices((starts, lengths))
        if part is not None:  # every part draws the same order and keeps its every count-th
            ds = ds.shard(part[1], part[0])
        ds = ds.map(sentence, num_parallel_calls=tf.data.AUTOTUNE)
        ds = ds.bucket_by_sequence_length(
            element_length_func=lambda features, _: tf.shape(features["words"])[0],
            bucket_boundaries=[u + 1 for u in upper],
            bucket_batch_sizes=batch_sizes + [1],  # the last bucket (> max_length) stays empty
            padded_shapes=({"words": [None], "chars": [None, vocabulary.max_word_length]},
                           label_shapes),  # fmt: skip
            padding_values=({"words": PAD_ID, "chars": PAD_ID}, label_padding),
            pad_to_bucket_boundary=pad_to_bucket,
        )
        if not word_dropout:
            return ds

        def drop_words(index, batch):  # drawn from the epoch and the batch's place alone
            features, labels = batch
            words = features["words"]
            where = draw_seed(seed, 0 if value is None else value, part_index, index)
            drop = tf.random.stateless_uniform(tf.shape(words), where) < word_dropout
            drop = tf.logical_and(drop, words != PAD_ID)  # padding stays padding
            return dict(features, words=tf.where(drop, OOV_ID, words)), labels

        return ds.enumerate().map(drop_words, num_parallel_calls=tf.data.AUTOTUNE)

    part_index = 0 if part is None else part[0]
    if isinstance(epoch, DataPosition):
        epoch = epoch.epoch
    ds = one_pass(None) if epoch is None else per_pass(epoch, one_pass)
    return prefetched(equal_shares(ds, batch_multiple))
