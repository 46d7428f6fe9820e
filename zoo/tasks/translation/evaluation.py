"""Score a translator (or a NAT) on a Multi30k split or on files: the hypotheses and their
scores, on disk."""

import os

from zoo.data import load_multi30k, read_lines
from zoo.evaluation.bleu import file_scores, save_evaluation
from zoo.tasks.task import EvaluationFiles


def evaluate_translator(translate, model, tokenizer, split, output_dir, method="beam",
                        beam_size=5, max_length=None, verbose=False, rescorer=None,
                        **search_kwargs):
    """Translate a Multi30k split, score it two ways and save the hypotheses beside the score;
    or, for ``split`` an :class:`~zoo.tasks.task.EvaluationFiles` (``zoo evaluate --source F
    --reference F ...``), translate the source file and score BLEU and chrF against its
    references, BLEU tokenized for the target language.

    ``translate`` is the task's (:meth:`TranslationTask.translate`); ``verbose`` draws a
    progress bar over the sentences on stderr; ``search_kwargs`` go to it (``iterations``,
    ``length_beam`` of ``"mask_predict"``) and into the files' names and the score's record. ``rescorer`` (an autoregressive translator
    reranking a non-autoregressive model's candidates) adds ``-rescored`` to the names.

    Returns:
        The score dict (see ``zoo.evaluation.corpus_bleu``).
    """
    score, kind = None, "bleu"
    if isinstance(split, EvaluationFiles):
        sources = read_lines(split.source)
        reference_lists = [read_lines(path) for path in split.references]
        for path, lines in zip(split.references, reference_lists):
            if len(lines) != len(sources):
                raise ValueError(f"--reference {path} has {len(lines)} lines, --source "
                                 f"{split.source} {len(sources)}: they must align")  # fmt: skip
        references = reference_lists[0]
        language = split.target_lang

        def score(hypotheses, _):
            return file_scores(hypotheses, reference_lists, language)

        split = os.path.basename(split.source)
        kind = "scores"
    else:
        pairs = load_multi30k(split)
        sources = [source for source, _ in pairs]
        references = [reference for _, reference in pairs]
    hypotheses = translate(
        model, tokenizer, sources, method=method, beam_size=beam_size, max_length=max_length,
        verbose=verbose, rescorer=rescorer, **search_kwargs,
    )
    settings = "".join(f"-{key}{value}" for key, value in sorted(search_kwargs.items()))
    if rescorer is not None:
        settings, search_kwargs = settings + "-rescored", {**search_kwargs, "rescored": True}
    name = f"{split}.{method}{beam_size if method == 'beam' else ''}{settings}"
    extra = {"split": split, "method": method, "beam_size": beam_size if method == "beam" else 1}
    return save_evaluation(
        output_dir, name, sources, hypotheses, references, extra={**extra, **search_kwargs},
        score=score, kind=kind,
    )
