"""Sampling over a step function: temperature, top-k and top-p (nucleus) sampling."""

import numbers

import keras
from keras import ops

from zoo.decoding.search_helpers import batch_size, check_max_length, token_by_token
from zoo.special_ids import BOS_ID, EOS_ID

__all__ = ["sample", "sample_from_logits"]


def sample_from_logits(logits, uniform, temperature=1.0, top_k=None, top_p=None):
    """Draw one token per row of ``logits`` by inverting the cumulative distribution.

    The logits are divided by ``temperature``, cut to the ``top_k`` most likely tokens and
    then to the smallest set whose probability reaches ``top_p``; the token is the first one
    whose cumulative probability passes ``uniform`` times the kept mass. Only one uniform
    number per row is needed, so a whole search draws its randomness up front, from a seed.

    Args:
        logits: ``(B, V)`` float logits.
        uniform: ``(B,)`` floats in ``[0, 1)``.
        temperature: a positive float; 0 (a Python number) takes the argmax.
        top_k: keep the ``top_k`` most likely tokens (a Python int), or None for all.
        top_p: keep the smallest set of most likely tokens whose probability is at least
            ``top_p`` (a float in ``(0, 1]``), or None for all.

    Returns:
        ``(B,)`` int32 token ids.
    """
    logits = ops.cast(logits, "float32")
    if isinstance(temperature, numbers.Number) and temperature == 0:
        return ops.cast(ops.argmax(logits, axis=-1), "int32")
    logits = logits / ops.cast(temperature, "float32")
    vocab = logits.shape[-1]
    if top_k is not None:
        order_k = min(int(top_k), vocab)
    elif top_p is not None:
        order_k = vocab  # nucleus sampling needs every token, most likely first
    else:
        order_k = None
    if order_k == 1:
        return ops.cast(ops.argmax(logits, axis=-1), "int32")
    if order_k is not None:
        logits, token_of = ops.top_k(logits, order_k)  # (B, K), sorted
        token_of = ops.cast(token_of, "int32")
    probs = ops.softmax(logits, axis=-1)  # (B, K)
    if top_p is not None:
        # Keep a token when the mass before it is below top_p: the first is always kept.
        before = ops.cumsum(probs, axis=-1) - probs
        probs = ops.where(before < top_p, probs, 0.0)
    cdf = ops.cumsum(probs, axis=-1)  # (B, K)
    target = ops.expand_dims(ops.cast(uniform, "float32") * cdf[:, -1], 1)  # (B, 1)
    choice = ops.sum(ops.cast(cdf <= target, "int32"), axis=-1)  # the first cdf > target
    # Rounding can leave no cdf above the target; the most likely token is then chosen.
    fallback = ops.cast(ops.argmax(probs, axis=-1), "int32")
    choice = ops.where(choice >= ops.shape(probs)[-1], fallback, choice)
    if order_k is None:
        return choice
    return ops.take_along_axis(token_of, ops.expand_dims(choice, 1), axis=1)[:, 0]


def sample(
    step,
    caches,
    max_length,
    temperature=1.0,
    top_k=None,
    top_p=None,
    seed=None,
    bos_id=BOS_ID,
    eos_id=EOS_ID,
):
    """Decode by sampling every next token.

    Like :func:`~zoo.decoding.greedy_search`, but the next token is drawn from the model's
    distribution, sharpened or flattened by ``temperature`` and cut by ``top_k`` and
    ``top_p`` (see :func:`sample_from_logits`). ``top_k=1`` and ``temperature=0`` are greedy
    search. The random numbers are drawn once, before the loop, from ``seed``: the same seed
    gives the same translations, also under ``tf.function`` and XLA.

    Args:
        step: ``step(token_ids, caches, index) -> (logits, caches)``, as for
            :func:`~zoo.decoding.greedy_search`.
        caches: the initial caches, a nested structure of batch-major tensors ``(B, ...)``.
        max_length: Python int, the most tokens generated per sentence (EOS included); the
            caches must have room for that many steps.
        temperature: a positive float (0 for the argmax).
        top_k: sample among the ``top_k`` most likely tokens (a Python int), or None.
        top_p: sample among the smallest set of most likely tokens with probability at least
            ``top_p``, or None.
        seed: an int, a ``keras.random.SeedGenerator`` (made outside any ``tf.function``)
            or None (Keras's global generator). An int makes the result reproducible; a
            generator, or None, gives new draws on every call.
        bos_id: the id the decoder starts from.
        eos_id: the id that ends a sentence.

    Returns:
        ``(B, max_length)`` int32 ids, as :func:`~zoo.decoding.greedy_search` returns them.

    Example:
        >>> from zoo.models import build_translator, translator_config
        >>> from zoo.models.translator import step_and_caches
        >>> model = build_translator(translator_config("tiny"))
        >>> source = keras.ops.convert_to_tensor([[5, 6, 7, 0]], "int32")
        >>> step, caches = step_and_caches(model, source, max_length=6)
        >>> ids = sample(step, caches, max_length=6, top_p=0.9, seed=1)
        >>> bool(keras.ops.all(ids == sample(step, caches, max_length=6, top_p=0.9, seed=1)))
        True

    References:
        Fan et al. 2018, "Hierarchical Neural Story Generation" (top-k sampling).
        Holtzman et al. 2020, "The Curious Case of Neural Text Degeneration" (top-p).
    """
    max_length = check_max_length(max_length)
    if top_k is not None and (not isinstance(top_k, int) or top_k < 1):
        raise ValueError(f"top_k must be a positive int or None, got {top_k!r}.")
    if top_p is not None and isinstance(top_p, numbers.Number) and not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p!r}.")
    if isinstance(temperature, numbers.Number) and temperature < 0:
        raise ValueError(f"temperature must be at least 0, got {temperature!r}.")
    batch = batch_size(caches)
    uniforms = keras.random.uniform((max_length, batch), seed=seed)  # one per step and row

    def choose(logits, index):
        uniform = ops.take(uniforms, index, axis=0)
        return sample_from_logits(logits, uniform, temperature=temperature, top_k=top_k,
                                  top_p=top_p)  # fmt: skip

    return token_by_token(step, caches, max_length, choose, bos_id, eos_id)
