"""The NAT's search: candidate lengths, then Mask-Predict (:func:`zoo.decoding.nat_search`)
over its parallel decoder, optionally reranked by an autoregressive translator.

:func:`nat_translator_search` is what the NAT task hands the strings frame and its SavedModel;
keras.ops only, so that it also runs on Keras's JAX backend.
"""

from keras import ops

from zoo.decoding.ctc import ctc_greedy
from zoo.decoding.nat import MAX_ITERATIONS, check_length_beam, length_candidates, nat_search
from zoo.decoding.search_helpers import check_count
from zoo.decoding.text import bucket_length
from zoo.models.nat.config import MASK_ID
from zoo.models.nat.inference import ctc_logits, decode_and_lengths, nat_modes
from zoo.models.translator import rescorer, translator_layers
from zoo.models.translator.search import halves_side_by_side
from zoo.special_ids import BOS_ID

__all__ = [
    "METHODS", "NAT_DEFAULTS", "check_rescorer", "nat_counts", "nat_length_candidates",
    "nat_translator_search",
]  # fmt: skip

METHODS = ("mask_predict",)
NAT_DEFAULTS = {"iterations": 4, "length_beam": 3}  # of the NAT task and its serving


def nat_counts(model, iterations=None, length_beam=None):
    """A NAT's Mask-Predict iterations and length beam, checked against what it can use.

    A ``decoder_input="copy"`` model reads no target tokens, so refinement cannot change its
    output: it takes one iteration. A ``length_mode="max"`` model decodes one length per
    sentence: it takes one candidate. A CTC decoder takes one of each: it decodes in one pass,
    at the length its alignment gives. (Read from the model: :func:`~zoo.models.nat.nat_modes`.)

    Args:
        model: a model of :func:`zoo.models.nat.build_nat_translator`.
        iterations: a Python int, a scalar int tensor (graph mode), or None for the default:
            4, or 1 for a copy model.
        length_beam: likewise; the default is 3, or 1 for a max-length model.

    Returns:
        ``(iterations, length_beam)``: Python ints as given, or tensors clamped (to
        ``[1, MAX_ITERATIONS]`` and as by :func:`~zoo.decoding.nat.check_length_beam`, and
        to 1 where the model takes one).

    Raises:
        ValueError: an int that is not positive, more iterations than one for a copy model,
            or more candidates than one for a max-length model (or than its length classes).
    """
    modes = nat_modes(model)
    if iterations is None:
        iterations = NAT_DEFAULTS["iterations"] if modes.refines else 1
    if length_beam is None:
        length_beam = NAT_DEFAULTS["length_beam"] if modes.predicts_length else 1
    iterations = check_count(iterations, "iterations", MAX_ITERATIONS if modes.refines else 1)
    if modes.predicts_length:
        length_beam = check_length_beam(length_beam, modes.max_offset)
    else:
        length_beam = check_count(length_beam, "length_beam", 1)
    if not modes.refines and isinstance(iterations, int) and iterations > 1:
        why = ("a CTC decoder decodes in one pass" if modes.ctc else "a model with "
               "decoder_input='copy' reads no target tokens, so refinement cannot change its "
               "output")  # fmt: skip
        raise ValueError(f"iterations={iterations}: {why}; use iterations=1.")
    if not modes.predicts_length and isinstance(length_beam, int) and length_beam > 1:
        why = ("a CTC decoder's length is its alignment's" if modes.ctc else "a model with "
               "length_mode='max' decodes one length per sentence")  # fmt: skip
        raise ValueError(f"length_beam={length_beam}: {why}; use length_beam=1.")
    return iterations, length_beam


def nat_length_candidates(model, source_ids, length_beam, max_length):
    """A NAT's ``(B, l)`` candidate lengths (EOS included), best first: its length
    predictor's ``l`` best (:func:`~zoo.decoding.length_candidates`), or for a
    ``length_mode="max"`` model (``l`` = 1) each sentence's widest length.

    Args:
        model: a model of :func:`zoo.models.nat.build_nat_translator`.
        source_ids: ``(B, S)`` int ids, 0-padded.
        length_beam: l, as checked or clamped by :func:`nat_counts`.
        max_length: Python int, the longest target (EOS included).
    """
    _, lengths = decode_and_lengths(model, source_ids, max_length, length_beam)
    if "lengths" in lengths:
        return ops.expand_dims(lengths["lengths"], 1)
    return length_candidates(
        **lengths, length_beam=length_beam, max_offset=nat_modes(model).max_offset,
        max_length=max_length,
    )


def nat_translator_search(model, method, max_length, compile_stage=None, **kwargs):
    """A NAT's ids -> ids search, for :func:`zoo.decoding.translate_strings`.

    Args:
        model: a model of :func:`zoo.models.nat.build_nat_translator`.
        method: ``"mask_predict"`` (:func:`~zoo.decoding.nat_search`).
        max_length: Python int, the longest target; None: the model's positions.
        compile_stage: None (traced in the caller's graph), or a function that compiles a
            function (``translate()`` passes XLA's); it compiles each of the two stages (the
            candidate lengths, then the refinement at their width).
        **kwargs: ``iterations`` and ``length_beam`` (1 by default; checked, or clamped, by
            :func:`nat_counts`; a CTC decoder takes 1 and 1 and decodes in one pass, without
            ``max_length``), ``rescorer`` (an autoregressive translator of the same
            vocabulary that picks among the length candidates), ``bos_id``, ``eos_id``, and
            the other arguments of :func:`~zoo.decoding.nat_search`.

    Returns:
        A function ``(B, S)`` source ids -> ``(B, L)`` int32 ids; ``L`` is the longest
        candidate length padded up to its length bucket (:data:`zoo.decoding.text.BUCKETS`),
        at most ``max_length``.
    """
    compile_stage = compile_stage or (lambda function: function)
    if method not in METHODS or model.name != "nat":
        raise ValueError(
            f"Method {method!r} does not decode a model named {model.name!r}; the NAT's "
            f"methods are {METHODS}."
        )
    if kwargs.get("monotonic_window") is not None:
        raise ValueError("monotonic_window constrains a left-to-right decoder; not the NAT's.")
    if max_length is None:  # a NAT's buffers span its predicted lengths
        max_length = translator_layers(model).max_length
        if max_length is None:
            raise ValueError("The model's embedding has no max_length: pass max_length.")
    teacher = kwargs.get("rescorer")
    nat_kwargs = {k: v for k, v in kwargs.items()
                  if k not in ("bos_id", "rescorer", "monotonic_window", "beam_size")}  # fmt: skip
    # Checked, or clamped (a tensor), once: the memory is repeated by the count searched.
    nat_kwargs["iterations"], length_beam = nat_counts(
        model, kwargs.get("iterations", 1), kwargs.get("length_beam", 1)
    )
    nat_kwargs.pop("length_beam", None)
    if nat_modes(model).ctc:
        if teacher is not None:
            raise ValueError("rescorer picks among length candidates; a CTC decoder has none.")

        def one_pass(source_ids):  # the best alignment, collapsed, cut to max_length
            return ctc_greedy(ctc_logits(model, source_ids), MASK_ID)[:, :max_length]

        return halves_side_by_side(compile_stage(one_pass), model, method)
    if teacher is not None:
        check_rescorer(teacher, model, max_length)

    def candidates(source_ids):
        return nat_length_candidates(model, source_ids, length_beam, max_length)

    def refine(source_ids, lengths, width_template):
        """Mask-Predict at the given candidate lengths, on buffers as wide as
        ``width_template`` (a shape, so that XLA compiles it as a constant)."""
        width = ops.shape(width_template)[1]
        decode, _ = decode_and_lengths(model, source_ids, width, length_beam)
        rescore = None
        if teacher is not None:
            rescore = rescorer(teacher, source_ids, kwargs.get("bos_id", BOS_ID))
        ids, _ = nat_search(
            decode, max_length=width, lengths=lengths, rescore=rescore, **nat_kwargs
        )
        return ids

    candidates, refine = compile_stage(candidates), compile_stage(refine)

    def search(source_ids):
        # The buffers span the longest candidate, padded up to its length bucket (few
        # compiled shapes), not every position: the decoder runs T times on them. Two
        # stages, since a width read from values cannot be a shape inside one XLA program;
        # the encoder runs in both (it costs far less than the positions it saves).
        lengths = candidates(source_ids)  # (B, l)
        width = bucket_length(ops.max(lengths), source_limit=max_length)
        return refine(source_ids, lengths, ops.zeros((1, width), "int32"))

    return halves_side_by_side(search, model, method)


def check_rescorer(teacher, model, max_length):
    """An autoregressive translator that can read the NAT's candidates, or a ValueError."""
    if getattr(teacher, "name", None) != "translator":
        raise ValueError(
            f"rescorer must be an autoregressive translator (a model named 'translator'), got "
            f"{getattr(teacher, 'name', type(teacher).__name__)!r}."
        )
    sizes = (translator_layers(teacher).vocab_size, translator_layers(model).vocab_size)
    if sizes[0] != sizes[1]:
        raise ValueError(
            f"The rescorer has {sizes[0]} tokens and the model {sizes[1]}: a rescorer must "
            "share the model's vocabulary."
        )
    positions = translator_layers(teacher).max_length
    if positions is not None and positions < max_length:
        raise ValueError(
            f"The rescorer reads {positions} target positions; the candidates have up to "
            f"{max_length} (pass max_length={positions})."
        )
