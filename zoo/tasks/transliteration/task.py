"""The transliteration task: the translator on a rule-made character task whose alignment moves
left to right (:mod:`zoo.data.transliteration`), where cross attention must keep its place.

All but the data, the vocabulary (one piece per character) and the scores is the translation
task's. The cross-attention options that shape alignment are compared on it
(``benchmarks/studies/alignment_attention.py``).
"""

import os
import sys
from dataclasses import replace

from zoo.artifacts import SENTENCEPIECE_PREFIX
from zoo.data import train_sentencepiece
from zoo.data.transliteration import load_transliteration
from zoo.evaluation.bleu import save_evaluation
from zoo.models.translator import build_translator
from zoo.tasks.translation.config import PRESETS as TRANSLATOR_PRESETS
from zoo.tasks.task import Task
from zoo.tasks.translation.task import TranslationTask
from zoo.tasks.transliteration.evaluation import transliteration_scores

__all__ = ["PRESETS", "TransliterationTask"]

# Small: 26 letters and the space, one piece each, plus the four special ids. Sinusoidal
# positions, so that the long split's positions (beyond any trained) have encodings at all.
PRESETS = {
    "small": replace(
        TRANSLATOR_PRESETS["small"], vocab_size=31, max_length=128, d_model=64, num_heads=4,
        ff_dim=128, encoder_layers=2, decoder_layers=2, warmup_steps=400, epochs=8,
        batch_tokens=4096,
    ),
}  # fmt: skip
PRESETS["tiny"] = replace(PRESETS["small"], d_model=32, num_heads=2, ff_dim=64, encoder_layers=1,
                          decoder_layers=1, epochs=2, warmup_steps=50)  # fmt: skip


class TransliterationTask(TranslationTask):
    """Train, evaluate and run a translator on :func:`~zoo.data.load_transliteration` pairs.

    ``evaluate`` scores the share of outputs entirely right (``exact``) and the character error
    rate (``cer``) of a split: ``test`` (the training lengths) and ``long`` (longer than any
    trained); greedy search by default.
    """

    name = "transliterator"
    run_presets = PRESETS
    evaluation_splits = ("test", "long")
    default_method = "greedy"
    validation_metric, validation_scores = "exact", staticmethod(transliteration_scores)

    def load_data(self, split):
        return load_transliteration(split)

    # Its data and vocabulary are its own (no files, no languages): Task's defaults, not the
    # translation task's.
    training_data, validation_data = Task.training_data, Task.validation_data
    data_fingerprint, languages = Task.data_fingerprint, Task.languages
    check_given_vocabulary = Task.check_given_vocabulary

    def make_vocabulary(self, config, workdir, train_data, verbose=False):
        """One piece per character of the training pairs (a SentencePiece ``char`` model)."""
        texts = [text for pair in train_data for text in pair]
        if verbose:
            print(f"learning the characters of {len(texts)} phrases", file=sys.stderr, flush=True)
        train_sentencepiece(texts, os.path.join(workdir, SENTENCEPIECE_PREFIX),
                            vocab_size=config.vocab_size, model_type="char",
                            byte_fallback=False)  # fmt: skip

    def build_model(self, config):
        return build_translator(config, name=self.name)

    def evaluate(self, model, vocabulary, split, output_dir, verbose=False, method="greedy",
                 beam_size=None, alpha=None):
        pairs = self.load_data(split)
        options = {} if method != "beam" else {"beam_size": beam_size or 4}
        hypotheses = self.translate(model, vocabulary, [s for s, _ in pairs], method=method,
                                    verbose=verbose, **options)  # fmt: skip
        name = f"{split}.{method}{options.get('beam_size', '')}"
        scores = save_evaluation(
            output_dir, name, [s for s, _ in pairs], hypotheses, [t for _, t in pairs],
            extra={"split": split, "method": method}, score=transliteration_scores, kind="scores",
        )  # fmt: skip
        return [f"{split}: exact {scores['exact']:.2%}, CER {scores['cer']:.2%} "
                f"({len(pairs)} phrases); outputs in {output_dir}"]  # fmt: skip

    def predict(self, model, vocabulary, lines, verbose=False, method="greedy", beam_size=None,
                alpha=None):
        options = {} if method != "beam" else {"beam_size": beam_size or 4}
        return self.translate(model, vocabulary, lines, method=method, verbose=verbose, **options)
