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


@dataclass(frozen=True)
class NATConfig(Seq2SeqConfig):
    """The NAT's architecture, the arguments of its backbone: the encoder-decoder of
    :class:`~zoo.models.translator.config.Seq2SeqConfig` (the translator's, without its
    left-to-right decoder's options) and what the non-autoregressive model adds.

    Args:
        decoder: ``"cmlm"``, a conditional masked language model with a length predictor,
            refined by Mask-Predict; or ``"ctc"``, reading the source upsampled
            ``ctc_upsample`` times (:class:`~zoo.layers.SourceUpsampling`), trained with the
            CTC loss (the blank is :data:`MASK_ID`) and decoded in one pass, with no length
            predictor (Libovický & Helcl 2018; Gu & Kong 2021). Its sources are at most
            ``max_length // ctc_upsample`` tokens; ``decoder_input`` and ``length_mode`` keep
            their defaults.
        ctc_upsample: the upsampling ratio of ``"ctc"`` (2 or 3 in Gu & Kong 2021).
        glancing_ratio: above 0, glancing training (GLAT, Qian et al. 2021): a first pass, no
            gradient, counts its errors, and that many times this ratio of gold tokens are
            revealed in the second pass's input (:class:`~zoo.layers.GlancingSampler`; with
            ``"ctc"``, placed by the best CTC alignment, :class:`~zoo.layers.CTCGlancingSampler`).
            Decoding is unchanged. 0 trains without.
        glancing_ratio_end: the ratio after ``glancing_anneal_steps`` steps, reached linearly
            (None: ``glancing_ratio`` throughout; GLAT anneals 0.5 to 0.3).
        glancing_anneal_steps: the steps over which the ratio goes to ``glancing_ratio_end``.
        decoder_input: ``"mask"``: the target with :data:`MASK_ID` at the positions to predict
            (CMLM, Ghazvininejad et al. 2019). ``"copy"``: the source embeddings that
            :class:`~zoo.layers.UniformCopy` maps to each target position (Gu et al. 2018);
            decoding is then one pass, since refinement could not change the output
            (:func:`zoo.models.nat.nat_counts`).
        length_mode: ``"predict"``: the length predictor's best offsets to the source length.
            ``"max"``: every sentence is decoded at the widest length the offsets reach
            (:func:`widest_lengths`) and ends at its first EOS; the labels are the target then
            EOS up to that width, so the model, not a length classifier, decides where the
            sentence ends. The length predictor still trains (``length_loss_weight=0`` drops
            it) but decides nothing.
        max_offset: K of the length predictor: target lengths from ``source - K`` to
            ``source + K`` (in pieces, EOS included). With ``"max"``, a target's room beyond
            its source.
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
