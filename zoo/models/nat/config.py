"""The NAT's architecture: the encoder-decoder the translator shares, and what the
non-autoregressive model adds; its presets."""

import dataclasses
from dataclasses import dataclass

from zoo.layers.length_predictor import LENGTH_MODES
from zoo.models.presets import from_presets
from zoo.models.translator import PRESETS as TRANSLATOR_PRESETS
from zoo.models.translator.config import Seq2SeqConfig, seq2seq_fields

__all__ = [
    "DECODERS", "DECODER_INPUTS", "LENGTH_MODES", "MASK_ID", "PRESETS", "NATConfig", "get_config",
]  # fmt: skip

MASK_ID = 1  # the SentencePiece UNK id: byte fallback means real text never needs it
DECODER_INPUTS = ("mask", "copy")
DECODERS = ("cmlm", "ctc")
CTC_LAYER = "ctc_upsampling"  # the SourceUpsampling layer: its presence means decoder="ctc"
CTC_OUTPUT = "ctc_output"  # the CTCBlankPadding layer on a CTC decoder's logits
COPY_LAYER = "source_copy"  # the UniformCopy layer: its presence means decoder_input="copy"


@dataclass(frozen=True)
class NATConfig(Seq2SeqConfig):
    """The NAT's architecture, the arguments of its backbone: the encoder-decoder of
    :class:`~zoo.models.translator.config.Seq2SeqConfig` (the translator's, without its
    left-to-right decoder's options) and what the non-autoregressive model adds.

    Args:
        decoder: ``"cmlm"``, a conditional masked language model with a length predictor,
            refined by Mask-Predict; or ``"ctc"``: the decoder reads the source upsampled
            ``ctc_upsample`` times (:class:`~zoo.layers.SourceUpsampling`), is trained with
            the CTC loss (the blank is :data:`MASK_ID`), and decodes in one pass, its best
            alignment with repeats merged and blanks dropped; no length predictor
            (Libovický & Helcl 2018; Gu & Kong 2021). Its sources are at most
            ``max_length // ctc_upsample`` tokens, so that the upsampled ones fit the
            decoder's positions. ``decoder_input`` and ``length_mode`` keep their defaults.
        ctc_upsample: the upsampling ratio of ``"ctc"`` (2 or 3 in Gu & Kong 2021).
        glancing_ratio: above 0, glancing training (GLAT, Qian et al. 2021;
            :class:`~zoo.layers.GlancingSampler`) of a CMLM decoder reading mask tokens: in
            training a first pass over an all-masked target (no gradient) counts its errors,
            and that many times this ratio of gold tokens, at random positions, are revealed in
            the second pass's input, whose loss is on the other positions. With ``"ctc"``
            (:class:`~zoo.layers.CTCGlancingSampler`) the gold tokens are placed by the first
            pass's best CTC alignment, and the CTC loss covers every position (Gu & Kong
            2021). Decoding (one pass or Mask-Predict) is unchanged. 0 trains without.
        glancing_ratio_end: the ratio after ``glancing_anneal_steps`` steps, reached linearly
            (None: ``glancing_ratio`` throughout; GLAT anneals 0.5 to 0.3).
        decoder_input: what the decoder reads. ``"mask"``: the target with mask tokens
            (:data:`MASK_ID`) at the positions to predict (CMLM, Ghazvininejad et al. 2019);
            at inference every position starts masked, and Mask-Predict refines. ``"copy"``:
            at each target position the source token embedding that
            :class:`~zoo.layers.UniformCopy` maps there, plus the decoder's positions (Gu et
            al. 2018). The target ids then give only the length, so every target position is
            a label, and decoding is one pass: refinement could not change the output, so
            more iterations are refused (:func:`zoo.models.nat.nat_counts`).
        length_mode: how the target length is chosen. ``"predict"``: from the length
            predictor's best offsets to the source length. ``"max"``: every sentence is
            decoded at the widest length the offsets reach, :func:`widest_lengths` (the
            ceiling the length classes imply, the same in training and decoding, and a cost
            that grows with the source rather than with ``max_length``), and ends at its
            first EOS. The labels are the target, EOS, then EOS up to that width, so
            refinement works over a defined sequence and the model, not a length classifier,
            decides where the sentence ends. The length predictor is still trained (a small
            auxiliary loss on the encoder, and the ``length_accuracy`` of both modes stays
            comparable) but decides nothing; ``length_loss_weight=0`` drops it.
        max_offset: K of the length predictor: target lengths from ``source - K`` to
            ``source + K`` (in pieces, EOS included) are told apart. With ``"max"``, the room
            a target has beyond its source.
    """

    decoder_input: str = "mask"
    length_mode: str = "predict"
    decoder: str = "cmlm"
    ctc_upsample: int = 2
    glancing_ratio: float = 0.0
    glancing_ratio_end: float | None = None
    glancing_anneal_steps: int = 4000
    max_offset: int = 24

    def __post_init__(self):
        super().__post_init__()
        for field, value, choices in (
            ("decoder_input", self.decoder_input, DECODER_INPUTS),
            ("length_mode", self.length_mode, LENGTH_MODES),
            ("decoder", self.decoder, DECODERS),
        ):
            if value not in choices:
                raise ValueError(f"Unknown {field} {value!r}; expected one of {choices}.")
        if isinstance(self.ctc_upsample, bool) or not (
            isinstance(self.ctc_upsample, int) and 1 <= self.ctc_upsample <= self.max_length
        ):
            raise ValueError(
                f"ctc_upsample must be an int from 1 to max_length, got {self.ctc_upsample!r}."
            )
        if self.glancing_ratio:
            for name, value in (("glancing_ratio", self.glancing_ratio),
                                ("glancing_ratio_end", self.glancing_ratio_end)):  # fmt: skip
                if value is not None and not 0 < value <= 1:
                    raise ValueError(f"{name} must be in (0, 1], got {value!r}.")
            if self.decoder_input != "mask":
                raise ValueError(
                    "Glancing training reveals gold tokens in the decoder's input tokens: "
                    f"decoder_input='copy' reads the source's embeddings, got {self.decoder_input!r}."
                )
        if self.decoder == "ctc" and (self.decoder_input, self.length_mode) != ("mask", "predict"):
            raise ValueError(
                "The CTC decoder reads the upsampled source and needs no length: "
                "decoder_input and length_mode keep their defaults ('mask', 'predict'), got "
                f"{self.decoder_input!r} and {self.length_mode!r}."
            )


# The translator's presets with the NAT's defaults: the same shapes, so a NAT and its teacher
# compare at equal size.
PRESETS = {
    name: NATConfig(**seq2seq_fields(TRANSLATOR_PRESETS[name])) for name in ("tiny", "small")
}
PRESETS["tiny"] = dataclasses.replace(PRESETS["tiny"], max_offset=8)


def get_config(preset, **overrides):
    """The named preset, with any field overridden: ``get_config("small", max_offset=16)``."""
    return from_presets(PRESETS, preset, "NAT translator", **overrides)
