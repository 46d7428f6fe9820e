"""A linear-chain conditional random field: the layer, its loss, its accuracy and Viterbi decoding.

:class:`CRF` turns emission scores ``(B, T, K)`` into the chain's potentials ``(B, T, K, K)``
(``[b, t, i, j]``: tag ``j`` at token ``t`` after tag ``i``), with the transitions, start and end
scores folded in and zeros at padding; the mask travels as the Keras implicit mask. Everything
else is a pure function of the potentials and the mask, so :class:`CRFLoss`, :class:`CRFAccuracy`
and :class:`CRFDecode` need no reference to the layer and a functional model trains with
``fit`` and saves as plain ``.keras``. Torch-Struct's log-potentials (Rush 2020), in ``keras.ops``;
the chain is scored in float32 whatever the compute dtype.
"""

import keras
from keras import ops

from zoo.layers.loops import fold_over_time, scan_over_time
from zoo.layers.masking import implicit_mask

__all__ = [
    "CRF",
    "CRFAccuracy",
    "CRFDecode",
    "CRFLoss",
    "crf_decode",
    "crf_log_likelihood",
    "crf_log_partition",
    "crf_sequence_score",
]


# ---------------------------------------------------------------- the chain, as functions
def _prepare(potentials, mask):
    """float32 potentials, the (B, T) boolean mask, and the (B, T) first-real-token flags."""
    potentials = ops.cast(potentials, "float32")  # (B, T, K, K)
    if mask is None:
        mask = ops.ones(ops.shape(potentials)[:2], "bool")
    mask = ops.cast(mask, "bool")  # (B, T)
    count = ops.cumsum(ops.cast(mask, "int32"), axis=1)  # real tokens up to and including t
    first = ops.logical_and(mask, ops.equal(count, 1))  # (B, T)
    return potentials, mask, first


def crf_log_partition(potentials, mask=None):
    """The log-partition ``log Z`` of each sequence: the forward algorithm in log space.

    ``alpha_t[j] = logsumexp_i(alpha_{t'}[i] + potentials[t, i, j])`` where ``t'`` is the previous
    real token; at the first real token ``alpha[j] = potentials[t, 0, j]``; padding leaves
    ``alpha`` unchanged. ``log Z = logsumexp_j(alpha[j])``, and 0 for a sequence with no real token
    (its one empty path).

    Args:
        potentials: ``(B, T, K, K)``, the output of :class:`CRF`.
        mask: ``(B, T)`` boolean, True for real tokens; None means all real.

    Returns:
        ``(B,)`` float32.
    """
    potentials, mask, first = _prepare(potentials, mask)

    def step(alpha, p, m, f):  # (B, K), (B, K, K), (B,), (B,)
        reached = ops.logsumexp(ops.expand_dims(alpha, 2) + p, axis=1)  # (B, K)
        alpha_new = ops.where(ops.expand_dims(f, 1), p[:, 0], reached)
        return ops.where(ops.expand_dims(m, 1), alpha_new, alpha)

    init = ops.zeros_like(potentials[:, 0, 0])  # (B, K)
    alpha = fold_over_time(step, init, potentials, mask, first)
    return ops.where(ops.any(mask, axis=1), ops.logsumexp(alpha, axis=-1), 0.0)  # (B,)


def crf_sequence_score(potentials, tags, mask=None):
    """The unnormalised score of the tag sequence ``tags``: the sum of its potentials.

    Args:
        potentials: ``(B, T, K, K)``, the output of :class:`CRF`.
        tags: ``(B, T)`` integer tags; values at padding are ignored (any value).
        mask: ``(B, T)`` boolean, True for real tokens; None means all real.

    Returns:
        ``(B,)`` float32.
    """
    potentials, mask, first = _prepare(potentials, mask)
    num_tags = ops.shape(potentials)[-1]
    tags = ops.cast(tags, "int32")

    def step(carry, p, y, m, f):  # (B, K, K), (B,), (B,), (B,)
        score, previous = carry  # (B,), (B,): the tag of the previous real token
        row = ops.one_hot(ops.where(f, 0, previous), num_tags)  # (B, K)
        value = ops.einsum("bi,bij,bj->b", row, p, ops.one_hot(y, num_tags))  # (B,)
        score = score + ops.where(m, value, 0.0)
        return score, ops.where(m, y, previous)

    batch_zeros = ops.zeros_like(potentials[:, 0, 0, 0])  # (B,)
    init = (batch_zeros, ops.cast(batch_zeros, "int32"))
    score, _ = fold_over_time(step, init, potentials, tags, mask, first)
    return score


def crf_log_likelihood(potentials, tags, mask=None):
    """``log p(tags | x) = score(tags) - log Z``, per sequence: ``(B,)`` float32."""
    return crf_sequence_score(potentials, tags, mask) - crf_log_partition(potentials, mask)


def crf_decode(potentials, mask=None):
    """Viterbi decoding: the highest-scoring tag sequence, with backpointers.

    A forward pass keeps ``delta_t[j] = max_i(delta_{t'}[i] + potentials[t, i, j])`` and its
    argmax (the backpointer); padding copies ``delta`` and points each tag to itself. A reverse
    pass follows the pointers from the best final tag.

    Args:
        potentials: ``(B, T, K, K)``, the output of :class:`CRF`.
        mask: ``(B, T)`` boolean, True for real tokens; None means all real.

    Returns:
        ``(tags, scores)``: the best tags ``(B, T)`` int32, 0 at padding, and their scores
        ``(B,)`` float32 (``crf_sequence_score`` of the tags; 0 for an empty sequence).
    """
    potentials, mask, first = _prepare(potentials, mask)
    num_tags = ops.shape(potentials)[-1]
    identity = ops.expand_dims(ops.arange(num_tags, dtype="int32"), 0)  # (1, K)

    def forward(carry, p, m, f):  # (B, K, K), (B,), (B,)
        delta, _ = carry  # (B, K)
        scores = ops.expand_dims(delta, 2) + p  # (B, K, K): previous tag i, tag j
        delta_new = ops.where(ops.expand_dims(f, 1), p[:, 0], ops.max(scores, axis=1))
        moved = ops.expand_dims(ops.logical_and(m, ops.logical_not(f)), 1)  # (B, 1)
        pointers = ops.where(moved, ops.cast(ops.argmax(scores, axis=1), "int32"), identity)
        delta = ops.where(ops.expand_dims(m, 1), delta_new, delta)
        return (delta, pointers), (delta, pointers)

    delta0 = ops.zeros_like(potentials[:, 0, 0])  # (B, K)
    init = (delta0, ops.cast(delta0, "int32"))
    (delta, _), (_, pointers) = scan_over_time(forward, init, potentials, mask, first)

    def backward(carry, pointers_t):
        _, tag = carry  # the tag at this position
        previous = ops.take_along_axis(pointers_t, ops.expand_dims(tag, 1), axis=1)[:, 0]
        return (tag, previous), (tag, previous)

    last = ops.cast(ops.argmax(delta, axis=-1), "int32")  # (B,)
    _, (tags, _) = ops.scan(backward, (last, last), pointers, reverse=True)  # (T, B)
    tags = ops.where(mask, ops.moveaxis(tags, 0, 1), 0)  # (B, T)
    scores = ops.where(ops.any(mask, axis=1), ops.max(delta, axis=-1), 0.0)
    return tags, scores


# ---------------------------------------------------------------- layers
@keras.saving.register_keras_serializable(package="zoo")
class CRF(keras.layers.Layer):
    """A linear-chain CRF over emission scores: learns the transitions, outputs the potentials.

    For tags ``y`` of the real tokens ``t_1 < ... < t_n``, ``s(y) = start[y_1] + sum_k
    emissions[t_k, y_k] + sum_k transitions[y_{k-1}, y_k] + end[y_n]`` and ``p(y | x) =
    exp(s(y)) / Z``. The layer returns ``s`` factored per token, the potentials ``(B, T, K, K)``::

        potentials[b, t, i, j] = emissions[b, t, j] + transitions[i, j]     (a later real token)
                               = emissions[b, t, j] + start[j]              (the first real token)
                               (+ end[j] at the last real token; 0 at padding)

    Train with :class:`CRFLoss`, measure with :class:`CRFAccuracy`, decode with
    :func:`crf_decode` or :class:`CRFDecode`. Padding (any mask, not only trailing) never
    changes what is computed for real tokens.

    Args:
        transitions_initializer: initializer of the ``(K, K)`` transitions and of the ``(K,)``
            start and end transitions. The default, zeros, starts the CRF as K independent
            softmaxes: its loss is then exactly the per-token cross entropy.
        **kwargs: standard layer arguments (``name``, ``dtype``).

    Call arguments:
        emissions: ``(B, T, K)`` per-token tag scores (the logits of a ``Dense(K)``).
        mask: ``(B, T)`` boolean, True for real tokens. Defaults to the Keras implicit mask of
            ``emissions``; with neither, every token is real.

    Returns:
        The potentials ``(B, T, K, K)``, carrying the mask on as their implicit mask (which
        :class:`CRFLoss` and :class:`CRFAccuracy` read).

    Example:
        >>> emissions = keras.random.normal((2, 5, 3))
        >>> mask = keras.ops.convert_to_tensor([[True] * 5, [True] * 3 + [False] * 2])
        >>> potentials = CRF()(emissions, mask=mask)
        >>> tuple(potentials.shape)
        (2, 5, 3, 3)
        >>> tags, scores = crf_decode(potentials, mask)
        >>> tuple(tags.shape), int(tags[1, 4])
        ((2, 5), 0)

    References:
        Lafferty, McCallum & Pereira 2001, "Conditional Random Fields: Probabilistic Models for
        Segmenting and Labeling Sequence Data"; Lample et al. 2016, "Neural Architectures for
        Named Entity Recognition" (the CRF over neural emissions, with start/end transitions);
        Rush 2020, "Torch-Struct: Deep Structured Prediction Library" (log-potentials).
    """

    def __init__(self, transitions_initializer="zeros", **kwargs):
        super().__init__(**kwargs)
        self.transitions_initializer = keras.initializers.get(transitions_initializer)

    def build(self, input_shape):
        num_tags = input_shape[-1]
        if num_tags is None:
            raise ValueError("CRF needs a known number of tags (the last emission dimension).")
        self.num_tags = num_tags
        self.transitions = self.add_weight(
            name="transitions", shape=(num_tags, num_tags), initializer=self.transitions_initializer
        )
        self.start_transitions = self.add_weight(
            name="start_transitions", shape=(num_tags,), initializer=self.transitions_initializer
        )
        self.end_transitions = self.add_weight(
            name="end_transitions", shape=(num_tags,), initializer=self.transitions_initializer
        )
        self.built = True

    def call(self, emissions, mask=None):
        dtype = emissions.dtype
        if mask is None:
            mask = ops.ones(ops.shape(emissions)[:2], "bool")
        mask = ops.cast(mask, "bool")  # (B, T)
        count = ops.cumsum(ops.cast(mask, "int32"), axis=1)  # (B, T)
        first = ops.logical_and(mask, ops.equal(count, 1))
        last = ops.logical_and(mask, ops.equal(count, count[:, -1:]))
        transitions = ops.cast(self.transitions, dtype)[None, None]  # (1, 1, K, K)
        start = ops.cast(self.start_transitions, dtype)[None, None, None]  # (1, 1, 1, K)
        end = ops.cast(self.end_transitions, dtype)[None, None]  # (1, 1, K)
        pairwise = ops.where(first[:, :, None, None], start, transitions)  # (B, T, K, K)
        unary = emissions + ops.where(last[:, :, None], end, ops.zeros_like(end))  # (B, T, K)
        potentials = pairwise + ops.expand_dims(unary, 2)  # (B, T, K, K)
        return ops.where(mask[:, :, None, None], potentials, ops.zeros_like(potentials))

    def compute_mask(self, emissions, mask=None):
        return mask

    def compute_output_shape(self, input_shape):
        return tuple(input_shape) + (input_shape[-1],)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "transitions_initializer": keras.initializers.serialize(
                    self.transitions_initializer
                )
            }
        )
        return config


@keras.saving.register_keras_serializable(package="zoo")
class CRFDecode(keras.layers.Layer):
    """Viterbi decoding of CRF potentials, as a layer: for prediction and serving models.

    It has no weights; it is :func:`crf_decode` in a layer, so that a functional model can end
    in tags: ``keras.Model(inputs, CRFDecode()(model.output))``.

    Call arguments:
        potentials: ``(B, T, K, K)``, the output of :class:`CRF`.
        mask: ``(B, T)`` boolean, True for real tokens. Defaults to the implicit mask of the
            potentials; with neither, every token is real.

    Returns:
        The best tags ``(B, T)`` int32, 0 at padding. The mask is passed on.

    Example:
        >>> potentials = CRF()(keras.random.normal((2, 4, 3)))
        >>> tuple(CRFDecode()(potentials).shape)
        (2, 4)

    References:
        Viterbi 1967, "Error Bounds for Convolutional Codes and an Asymptotically Optimum
        Decoding Algorithm".
    """

    def call(self, potentials, mask=None):
        tags, _ = crf_decode(potentials, mask)
        return tags

    def compute_mask(self, potentials, mask=None):
        return mask

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:2])

    def compute_output_spec(self, potentials, mask=None):
        return keras.KerasTensor(tuple(potentials.shape[:2]), dtype="int32")


# ---------------------------------------------------------------- training
@keras.saving.register_keras_serializable(package="zoo")
class CRFLoss(keras.losses.Loss):
    """The negative log-likelihood of the gold tags under a :class:`CRF`, per real token.

    ``y_pred`` is the CRF potentials ``(B, T, K, K)`` and ``y_true`` the gold tags ``(B, T)``.
    The padding mask is the implicit mask of ``y_pred`` (the ``mask_zero`` of the model's word
    embedding, passed on by every layer); labels at padding may hold any value. Each sentence's
    NLL is shared out evenly over its real tokens, and Keras averages over the real tokens: the
    loss is ``sum_b NLL_b / (number of real tokens)``, on the scale of a per-token cross entropy
    (which it equals while the transitions are zero), so the optimiser settings of a softmax
    tagger carry over. With ``reduction=None`` the per-token shares ``(B, T)`` come back.

    Args:
        name, reduction, dtype: as for any ``keras.losses.Loss``.

    Example:
        >>> emissions = keras.random.normal((2, 4, 3))
        >>> potentials = CRF()(emissions)
        >>> float(CRFLoss()(keras.ops.zeros((2, 4), "int32"), potentials)) > 0
        True

    References:
        Lafferty et al. 2001; Lample et al. 2016 (see :class:`CRF`).
    """

    def __init__(self, name="crf_loss", reduction="sum_over_batch_size", dtype=None):
        super().__init__(name=name, reduction=reduction, dtype=dtype)

    def __call__(self, y_true, y_pred, sample_weight=None):
        # Keras reads the implicit mask of y_pred only to weight the result; the forward
        # algorithm needs it too, so it rides along with the labels into `call`.
        mask = implicit_mask(y_pred)
        if mask is None:
            mask = ops.ones(ops.shape(y_pred)[:2], "bool")
        return super().__call__((y_true, ops.cast(mask, "float32")), y_pred, sample_weight)

    def call(self, y_true, y_pred):
        tags, mask = y_true
        mask = ops.cast(mask, "bool")  # (B, T)
        nll = -crf_log_likelihood(y_pred, ops.cast(tags, "int32"), mask)  # (B,)
        length = ops.sum(ops.cast(mask, "float32"), axis=1)  # (B,)
        share = ops.divide_no_nan(nll, length)
        return ops.where(mask, ops.expand_dims(share, 1), 0.0)  # (B, T)


@keras.saving.register_keras_serializable(package="zoo")
class CRFAccuracy(keras.metrics.Mean):
    """Token accuracy of the Viterbi tags of CRF potentials, over real tokens.

    ``y_pred`` is the CRF potentials ``(B, T, K, K)`` carrying the padding mask (see
    :class:`CRFLoss`), ``y_true`` the gold tags ``(B, T)``. A ``sample_weight`` of shape
    ``(B,)`` or ``(B, T)`` weights sentences or tokens.

    Args:
        name, dtype: as for any ``keras.metrics.Metric``.

    Example:
        >>> metric = CRFAccuracy()
        >>> metric.update_state(keras.ops.zeros((1, 3), "int32"), CRF()(keras.ops.zeros((1, 3, 2))))
        >>> float(metric.result())
        1.0
    """

    def __init__(self, name="accuracy", dtype=None):
        super().__init__(name=name, dtype=dtype)

    def _decode(self, y_pred, mask):
        return crf_decode(y_pred, mask)[0]

    def update_state(self, y_true, y_pred, sample_weight=None):
        mask = implicit_mask(y_pred)
        tags = self._decode(y_pred, mask)  # (B, T)
        matches = ops.cast(ops.equal(tags, ops.cast(y_true, "int32")), self.dtype)
        weights = ops.ones_like(matches) if mask is None else ops.cast(mask, self.dtype)
        if sample_weight is not None:
            sample_weight = ops.cast(sample_weight, self.dtype)
            if len(sample_weight.shape) == 1:
                sample_weight = ops.expand_dims(sample_weight, 1)
            weights = weights * sample_weight
        # Flat, so that every token counts once: Keras's Mean reduces (B, T) weights to
        # per-sentence means first, which weighs the tokens of short batches more.
        flat_matches = ops.reshape(matches, (-1,))
        return super().update_state(flat_matches, sample_weight=ops.reshape(weights, (-1,)))
