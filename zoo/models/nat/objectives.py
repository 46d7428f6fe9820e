"""The NAT's training objectives: what the ids of each training pair become.

:class:`CMLMObjective` (masked targets, length label) or :class:`CTCObjective`, picked by
:func:`nat_objective`, is the ``objective`` of :func:`zoo.data.make_translation_dataset`.
Glancing runs inside the model (:mod:`zoo.layers.glancing`); here it only reads the gold target.
TensorFlow code (tf.data maps), so outside the backbone.
"""

import tensorflow as tf

from zoo.layers.length_predictor import LENGTH_MODES
from zoo.models.nat.config import MASK_ID
from zoo.special_ids import PAD_ID

__all__ = ["CMLMObjective", "CTCObjective", "nat_objective"]


class CMLMObjective:
    """The conditional masked language model of Mask-Predict, one example at a time.

    The target is ``target + [EOS]`` (at most ``max_length``). Each time an example is read, a
    number ``n`` uniform in ``1..T`` is drawn and ``n`` positions chosen at random are replaced
    by ``mask_id`` in ``target_in``: stateless draws from the ``seed`` that the pipeline gives
    (a function of the epoch and the pair's place), so that a resumed run masks as the
    interrupted one did. The labels are ``{"tokens": the target at the masked
    positions, 0 elsewhere, "length": the class of the offset T - len(source)}``, the offset
    clipped to ``[-max_offset, max_offset]`` and shifted by ``max_offset``
    (:meth:`~zoo.layers.LengthPredictor.offset_class`).

    Args:
        max_length: the most source ids, and target ids with the EOS.
        eos_id: the vocabulary's EOS id.
        mask_id: the id of the mask token.
        max_offset: the length predictor's largest offset.
        length_mode: ``"predict"``, or ``"max"``: each target is as wide as its source
            allows, ``W = min(max(len(source) + max_offset, 2), max_length)``
            (:func:`~zoo.models.nat.widest_lengths`): the target cut to ``W - 1`` tokens, EOS,
            then EOS up to ``W``. The masks are drawn over all ``W`` positions; the length
            label is still that of the target and its first EOS.
        mask_all: mask every target position: the objective of a decoder that reads no target
            tokens (``decoder_input="copy"``), every position a label.
        gold_input: nothing masked: ``target_in`` is the target and every position a label
            (glancing training masks it inside the model).

    Example:
        >>> objective = CMLMObjective(max_length=8, eos_id=3, max_offset=4, mask_all=True)
        >>> features, labels = objective.example(tf.constant([5, 6, 7]), tf.constant([8, 9]))
        >>> features["target_in"].numpy().tolist(), labels["tokens"].numpy().tolist()
        ([1, 1, 1], [8, 9, 3])
        >>> int(labels["length"])  # the offset 3 - 3, shifted by max_offset
        4

    References:
        Ghazvininejad et al. 2019, Mask-Predict: Parallel Decoding of Conditional Masked
        Language Models (https://arxiv.org/abs/1904.09324).
    """

    def __init__(self, max_length, eos_id, mask_id=MASK_ID, max_offset=24,
                 length_mode="predict", mask_all=False, gold_input=False):  # fmt: skip
        if length_mode not in LENGTH_MODES:
            raise ValueError(f"Unknown length_mode {length_mode!r}; expected 'predict' or 'max'.")
        self.max_length, self.eos_id, self.mask_id = max_length, eos_id, mask_id
        self.max_offset, self.length_mode = max_offset, length_mode
        self.mask_all, self.gold_input = mask_all, gold_input
        self.target_limit = max_length - 1  # room for the EOS

    def example(self, source, target, seed=None):
        """``(S,)``, ``(T - 1,)`` ids -> ``({"source", "target_in"}, {"tokens", "length"})``;
        ``seed`` (shape (2,); None: zeros) draws the masks."""
        seed = tf.zeros([2], tf.int64) if seed is None else seed
        count_seed, order_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
        max_length, max_offset = self.max_length, self.max_offset
        source = source[:max_length]
        if self.length_mode == "max":  # the width of zoo.models.nat.widest_lengths, in tf
            width = tf.minimum(tf.maximum(tf.shape(source)[0] + max_offset, 2), max_length)
            tokens = target[: width - 1]
            length = tf.shape(tokens)[0] + 1  # T, the EOS included
        else:
            tokens = target[: max_length - 1]
            length = width = tf.shape(tokens)[0] + 1
        target = tf.concat([tokens, tf.fill([width - length + 1], self.eos_id)], 0)  # (W,)
        if self.mask_all:
            count = width
        elif self.gold_input:
            count = 0
        else:
            count = tf.random.stateless_uniform(  # masks, uniform in 1..W
                [], count_seed, 1, width + 1, dtype=tf.int32)
        rank = tf.argsort(tf.argsort(tf.random.stateless_uniform([width], order_seed)))
        masked = rank < count
        offset = tf.clip_by_value(length - tf.shape(source)[0], -max_offset, max_offset)
        features = {"source": source, "target_in": tf.where(masked, self.mask_id, target)}
        labels = target if self.gold_input else tf.where(masked, target, PAD_ID)
        return features, {"tokens": labels, "length": offset + max_offset}


class CTCObjective:
    """The examples of a CTC decoder: the source alone in, the target (no BOS, no EOS) out.

    Args:
        max_length: the most target ids, and source ids.
        max_source_length: the most source ids kept (default and at most ``max_length``): a
            CTC decoder's upsampled source must fit its positions.
        gold_input: the features add ``target_in``, the target (what glancing aligns and
            reveals).

    Example:
        >>> features, labels = CTCObjective(8, max_source_length=2).example(
        ...     tf.constant([5, 6, 7]), tf.constant([8, 9]))
        >>> features["source"].numpy().tolist(), labels["tokens"].numpy().tolist()
        ([5, 6], [8, 9])

    References:
        Libovický & Helcl 2018, End-to-End Non-Autoregressive Neural Machine Translation with
        Connectionist Temporal Classification (https://arxiv.org/abs/1811.04719).
    """

    def __init__(self, max_length, max_source_length=None, gold_input=False):
        self.max_length, self.gold_input = max_length, gold_input
        self.max_source_length = (max_length if max_source_length is None
                                  else min(max_source_length, max_length))  # fmt: skip
        self.target_limit = max_length  # no BOS, no EOS

    def example(self, source, target, seed=None):
        """``(S,)``, ``(T,)`` ids -> ``({"source"[, "target_in"]}, {"tokens"})``; it draws
        nothing (``seed`` unused)."""
        features = {"source": source[: self.max_source_length]}
        if self.gold_input:
            features["target_in"] = target[: self.max_length]
        return features, {"tokens": target[: self.max_length]}


def nat_objective(config, eos_id):
    """The training objective of the NAT of ``config`` (a :class:`~zoo.models.nat.NATConfig`).

    A CTC decoder's targets, on sources that fit its upsampling; otherwise CMLM masking, of
    every position for a decoder that reads no target token (``decoder_input="copy"``). With
    glancing the model reads the gold target and masks it itself (GLAT).

    Args:
        config: the NAT's config.
        eos_id: the vocabulary's EOS id.

    Returns:
        A :class:`CTCObjective` or a :class:`CMLMObjective`.
    """
    glancing = bool(config.glancing_ratio)
    if config.decoder == "ctc":
        limit = config.max_length // config.ctc_upsample
        return CTCObjective(config.max_length, max_source_length=limit, gold_input=glancing)
    return CMLMObjective(
        config.max_length,
        eos_id,
        mask_id=MASK_ID,
        max_offset=config.max_offset,
        length_mode=config.length_mode,
        mask_all=config.decoder_input == "copy",  # it reads no target token
        gold_input=glancing,  # the model masks it (GLAT)
    )
