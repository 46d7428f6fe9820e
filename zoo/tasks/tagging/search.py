"""Words in, tags out: a tagger over whole sentences, long ones in overlapping windows.

A tagger reads at most ``window`` words at a time (by default its ``max_length``, the positions
of its word embedding). A longer sentence is tagged in overlapping windows of ``window`` words,
and every word takes its tag from the one window where it is most central:

- windows start every ``stride = max(window // 2, 1)`` words, ``0, stride, 2 * stride, ...``,
  while they end before the sentence does; one last window ends with the sentence (it starts at
  ``length - window``). Every word is in one window at least, and nothing is truncated.
- a word's tag comes from the window whose centre is nearest to it (the distance from word
  ``i`` to the centre of the window at ``start`` is ``|i - start - (window - 1) / 2|``); on a
  tie, from the earlier window. The nearest centre always belongs to a window that holds the
  word, so each window keeps a contiguous run of its words, and the runs tile the sentence.

A sentence of at most ``window`` words is one window, tagged in one pass; an empty sentence has
no windows and no tags. Windows start and end where the sentence does not, so a CRF reads the
start and end transitions at their edges; the centre rule keeps the words near those edges in
another window wherever there is one. :func:`tagging_windows` gives the plan of one sentence;
the serving SavedModel of :mod:`zoo.tasks.tagging.serving` computes the same plan in its graph.
:func:`predict_tags` decodes the model's scores of encoded windows into tag ids.
"""

import numpy as np

from zoo.data.conllu import UPOS_TAGS
from zoo.layers import crf_decode
from zoo.models.tagger import tagger_heads
from zoo.progress import Progress

__all__ = ["predict_tags", "tag_columns", "tag_sentences", "tagger_window", "tagging_windows"]


def _positive_int(value, name):
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}.")
    return int(value)


def tagging_windows(length, window):
    """The windows that tag a sentence of ``length`` words, and the words each one tags.

    Args:
        length: the number of words of the sentence (>= 0).
        window: the most words per window (>= 1).

    Returns:
        A list of ``(start, first, end)``, in order: the window reads words
        ``[start, start + min(window, length))`` and its tags are kept for words
        ``[first, end)``. The ``[first, end)`` ranges tile ``[0, length)``; ``[]`` when
        ``length`` is 0. The rule is in the docstring of :mod:`zoo.tasks.tagging.search`.

    Example:
        >>> tagging_windows(5, 8)
        [(0, 0, 5)]
        >>> tagging_windows(10, 4)
        [(0, 0, 3), (2, 3, 5), (4, 5, 7), (6, 7, 10)]
    """
    if not isinstance(length, (int, np.integer)) or isinstance(length, bool) or length < 0:
        raise ValueError(f"length must be an int >= 0, got {length!r}.")
    window = _positive_int(window, "window")
    if length == 0:
        return []
    if length <= window:
        return [(0, 0, int(length))]
    stride = max(window // 2, 1)
    starts = list(range(0, length - window, stride)) + [length - window]
    spans = []
    for k, start in enumerate(starts):
        # Word i is nearer the centre of window k than of window k + 1 (or as near) exactly
        # when 2 i <= starts[k] + starts[k + 1] + window - 1.
        first = 0 if k == 0 else (starts[k - 1] + start + window - 1) // 2 + 1
        end = length if k == len(starts) - 1 else (start + starts[k + 1] + window - 1) // 2 + 1
        spans.append((int(start), int(first), int(end)))
    return spans


def _layer(model, name):
    try:
        return model.get_layer(name)
    except ValueError:
        raise ValueError(
            f"Model {model.name!r} has no layer {name!r}: it is not a tagger of "
            "zoo.models.build_tagger."
        ) from None


def _decode(scores, mask, use_crf):
    if use_crf:  # CRF potentials (N, T, K, K)
        return np.asarray(crf_decode(scores, mask)[0])
    return np.where(mask, np.asarray(scores).argmax(-1), 0).astype("int32")


def predict_tags(model, inputs, batch_size=64):
    """The tag ids a tagger predicts: Viterbi for a CRF head, the argmax otherwise.

    Args:
        model: a model from :func:`zoo.models.build_tagger`.
        inputs: ``{"words": (N, T), "chars": (N, T, C)}`` arrays, as from
            :meth:`zoo.data.TaggerVocabulary.encode` (other keys are ignored).
        batch_size: sentences per model call.

    Returns:
        ``(N, T)`` int32 tag ids, 0 at padding; a dict ``{head: ids}`` when the model has more
        heads than UPOS.

    Example:
        >>> from zoo.data import TaggerVocabulary
        >>> from zoo.models import build_tagger, tagger_config
        >>> vocabulary = TaggerVocabulary.build([["A", "cat", "."]], max_word_length=10)
        >>> model = build_tagger(tagger_config("tiny", **vocabulary.config_overrides()))
        >>> predict_tags(model, vocabulary.encode([["A", "cat", "."], ["A"]])).shape
        (2, 3)
    """
    heads = tagger_heads(model)
    words, chars = np.asarray(inputs["words"]), np.asarray(inputs["chars"])
    batches = {head: [] for head in heads}
    for start in range(0, len(words), batch_size):
        rows = slice(start, start + batch_size)
        batch = {"words": words[rows], "chars": chars[rows]}
        outputs = model(batch, training=False)
        outputs = outputs if isinstance(outputs, dict) else {"upos": outputs}
        mask = batch["words"] != 0
        for head, spec in heads.items():
            batches[head].append(_decode(outputs[head], mask, spec.use_crf))
    ids = {
        head: np.concatenate(parts) if parts else np.zeros(words.shape, "int32")
        for head, parts in batches.items()
    }
    return ids if len(ids) > 1 else ids["upos"]


def tagger_window(model, vocabulary, window=None, head="upos"):
    """Check that ``vocabulary`` and ``head`` fit ``model``; return the window to tag with.

    Args:
        model: a tagger of :func:`zoo.models.build_tagger` (or its ``.keras`` reload).
        vocabulary: its :class:`zoo.data.TaggerVocabulary`.
        window: the most words per model call; defaults to the model's ``max_length`` (the
            positions of its ``word_embedding`` layer, stored in the ``.keras`` file).
        head: ``"upos"``, or another head of the model (``"xpos"``, ``"feats"``, ``"lemma"``).

    Returns:
        The window, an ``int``.

    Raises:
        ValueError: a model that is not a tagger, a vocabulary of other sizes, a head the model
            lacks, a window that is not a positive int or exceeds the model's ``max_length``.

    Example:
        >>> from zoo.data import TaggerVocabulary
        >>> from zoo.models import build_tagger, tagger_config
        >>> vocabulary = TaggerVocabulary.build([["A", "cat", "."]], max_word_length=10)
        >>> model = build_tagger(tagger_config("tiny", **vocabulary.config_overrides()))
        >>> tagger_window(model, vocabulary), tagger_window(model, vocabulary, window=8)
        (64, 8)
    """
    words, chars = _layer(model, "word_embedding"), _layer(model, "char_embedding")
    heads = tagger_heads(model)
    max_word_length = model.input["chars"].shape[-1] if isinstance(model.input, dict) else None
    found = (words.vocab_size, chars.vocab_size, max_word_length)
    expected = (
        vocabulary.word_vocab_size,
        vocabulary.char_vocab_size,
        vocabulary.max_word_length,
    )
    if found != expected:
        raise ValueError(
            f"The vocabulary has (word_vocab_size, char_vocab_size, max_word_length) = "
            f"{expected} but the model {model.name!r} has {found}: not its vocabulary."
        )
    if heads["upos"].num_tags != len(UPOS_TAGS):
        raise ValueError(
            f"The model's UPOS head has {heads['upos'].num_tags} tags; UPOS has {len(UPOS_TAGS)}."
        )
    for name, spec in heads.items():
        if name != "upos" and spec.num_tags != len(vocabulary.classes(name)):
            raise ValueError(
                f"The model's {name.upper()} head has {spec.num_tags} classes but the vocabulary "
                f"{len(vocabulary.classes(name))}: not its vocabulary."
            )
    if head not in heads:
        raise ValueError(f"head={head!r}: the model has the heads {sorted(heads)}.")
    if window is None:
        if words.max_length is None:
            raise ValueError("The model's word embedding has no max_length: pass window.")
        return int(words.max_length)
    window = _positive_int(window, "window")
    if words.max_length is not None and window > words.max_length:
        raise ValueError(
            f"window={window} is more than the model's max_length={words.max_length}."
        )
    return window


def tag_sentences(
    model, vocabulary, sentences, window=None, batch_size=64, head="upos", verbose=False
):
    """Tag whitespace-free words of sentences: one tag per word, long sentences in windows.

    The windows of all the sentences (see :mod:`zoo.tasks.tagging.search` for the rule) are
    encoded by ``vocabulary`` and tagged by :func:`predict_tags` in batches of
    ``batch_size`` windows of similar lengths: Viterbi for a CRF head, the argmax otherwise.
    Padding never changes a tag.

    Args:
        model: a tagger of :func:`zoo.models.build_tagger`.
        vocabulary: its :class:`zoo.data.TaggerVocabulary`.
        sentences: a list of sentences, each a list (or tuple) of words (``str``).
        window: the most words per model call; defaults to the model's ``max_length``.
        batch_size: the most windows per model call.
        head: ``"upos"`` (tags of :data:`zoo.data.UPOS_TAGS`), or another head of the model:
            ``"xpos"`` and ``"feats"`` (the vocabulary's tags and bundles), ``"lemma"`` (the
            lemmas that the predicted edit scripts make of the words; a word whose script
            does not apply is its own lemma).
        verbose: draw a progress bar over the windows on stderr.

    Returns:
        A list with one list of tag strings per sentence, one tag per word; ``[]`` for an
        empty sentence.

    Raises:
        TypeError: a sentence that is a string rather than a list of words.
        ValueError: see :func:`tagger_window`; a batch_size that is not a positive int.

    Example:
        >>> from zoo.data import TaggerVocabulary
        >>> from zoo.models import build_tagger, tagger_config
        >>> vocabulary = TaggerVocabulary.build([["A", "cat", "."]], max_word_length=10)
        >>> model = build_tagger(tagger_config("tiny", **vocabulary.config_overrides()))
        >>> tags = tag_sentences(model, vocabulary, [["A", "cat", "."], [], ["x"] * 200])
        >>> [len(t) for t in tags]
        [3, 0, 200]
    """
    return _tag(model, vocabulary, sentences, window, batch_size, (head,), verbose)[head]


def tag_columns(model, vocabulary, sentences, window=None, batch_size=64, verbose=False):
    """Every head of the model on ``sentences`` in one pass: ``{head: tags}``, each as
    :func:`tag_sentences` gives that head's (a lemma head gives lemmas)."""
    heads = tuple(tagger_heads(model))
    return _tag(model, vocabulary, sentences, window, batch_size, heads, verbose)


def _tag(model, vocabulary, sentences, window, batch_size, heads, verbose):
    for head in heads:
        window = tagger_window(model, vocabulary, window, head)
    batch_size = _positive_int(batch_size, "batch_size")
    if isinstance(sentences, str):
        raise TypeError("tag_sentences() takes a list of sentences, each a list of words.")
    sentences = [_words(sentence) for sentence in sentences]

    # Every window: (sentence, the words it reads, the slice of its tags that is kept).
    windows = []
    for index, words in enumerate(sentences):
        for start, first, end in tagging_windows(len(words), window):
            windows.append((index, words[start : start + window], first - start, end - start))
    tags = {head: [None] * len(windows) for head in heads}
    order = sorted(range(len(windows)), key=lambda w: len(windows[w][1]))  # less padding
    progress = Progress(len(windows), enabled=verbose, unit="windows")
    for begin in range(0, len(order), batch_size):
        chunk = order[begin : begin + batch_size]
        encoded = vocabulary.encode([windows[w][1] for w in chunk])
        ids = predict_tags(model, encoded, batch_size=len(chunk))
        ids = ids if isinstance(ids, dict) else {"upos": ids}  # (N, T) per head
        for head in heads:
            names = vocabulary.classes(head)
            for w, row in zip(chunk, ids[head]):
                _, words, first, end = windows[w]
                tags[head][w] = vocabulary.column_values(
                    head, words[first:end], [names[t] for t in row[first:end]])
        progress.add(len(chunk))
    result = {head: [[] for _ in sentences] for head in heads}
    for head in heads:
        for (index, _, _, _), kept in zip(windows, tags[head]):  # windows in sentence order
            result[head][index].extend(kept)
    return result


def _words(sentence):
    if isinstance(sentence, (str, bytes)):
        raise TypeError(
            f"A sentence must be a list of words, got the string {sentence[:40]!r}; "
            "split it into words first (str.split())."
        )
    words = list(sentence)
    for word in words:
        if not isinstance(word, str):
            raise TypeError(f"A word must be a str, got {type(word).__name__}: {word!r}.")
    return words
