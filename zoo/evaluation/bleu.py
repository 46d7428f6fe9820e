"""Corpus BLEU with sacreBLEU, reported two ways."""

import json
import os

import sacrebleu

from zoo.data.multi30k import one_line


def corpus_bleu(hypotheses, references):
    """sacreBLEU two ways: the default signature, and lowercased (comparable to papers).

    - ``bleu``: detokenized, cased, 13a tokenization: sacreBLEU's default signature, the
      figure to compare across systems.
    - ``bleu_lowercase``: lowercased, 13a tokenization: comparable to the published
      Multi30k figures, which lowercase.

    Args:
        hypotheses: list of detokenized output strings.
        references: list of reference strings, aligned with ``hypotheses``.

    Returns:
        A dict with ``bleu``, ``bleu_lowercase`` (floats) and their sacreBLEU signatures.

    Example:
        >>> corpus_bleu(["ein Hund läuft ."], ["Ein Hund läuft ."])["bleu_lowercase"]
        100.00000000000004
    """
    if len(hypotheses) != len(references):
        raise ValueError(
            f"{len(hypotheses)} hypotheses but {len(references)} references: they must align."
        )
    cased = sacrebleu.BLEU()
    lowercase = sacrebleu.BLEU(lowercase=True)
    cased_score = cased.corpus_score(hypotheses, [references])
    lower_score = lowercase.corpus_score(hypotheses, [references])
    return {
        "bleu": cased_score.score,
        "bleu_signature": str(cased.get_signature()),
        "bleu_lowercase": lower_score.score,
        "bleu_lowercase_signature": str(lowercase.get_signature()),
    }


# sacreBLEU's tokenizer for a target language (as its trg_lang picks), and the extra it needs.
_TOKENIZER_EXTRAS = {"ja": "sacrebleu[ja]", "ko": "sacrebleu[ko]"}


def file_scores(hypotheses, references, target_lang):
    """sacreBLEU's BLEU and chrF of ``hypotheses`` against one or more reference lists, with
    their signatures; BLEU's tokenizer follows ``target_lang`` as sacreBLEU's ``trg_lang``
    does (``zh``, ``ja-mecab``, ``ko-mecab``, else ``13a``).

    Raises:
        ValueError: a reference list of another length, or a tokenizer whose sacreBLEU extra
            is not installed (the message says which to install).

    Example:
        >>> scores = file_scores(["Ein Hund läuft ."], [["Ein Hund läuft ."]], "de")
        >>> round(scores["bleu"]), round(scores["chrf"]), scores["bleu_signature"][:7]
        (100, 100, 'nrefs:1')
    """
    for number, refs in enumerate(references, start=1):
        if len(refs) != len(hypotheses):
            raise ValueError(f"reference {number} has {len(refs)} lines, the source "
                             f"{len(hypotheses)}: they must align")  # fmt: skip
    try:
        bleu = sacrebleu.BLEU(trg_lang=target_lang or "")
        bleu_score = bleu.corpus_score(hypotheses, references)
    except (SystemExit, ImportError, RuntimeError) as error:  # sacreBLEU exits without its extra
        extra = _TOKENIZER_EXTRAS.get(target_lang, "sacrebleu's extras")
        raise ValueError(
            f"sacreBLEU's tokenizer for target language {target_lang!r} needs {extra}: pip "
            f"install '{extra}' ({type(error).__name__}: {error})"
        ) from None
    chrf = sacrebleu.CHRF()
    chrf_score = chrf.corpus_score(hypotheses, references)
    return {
        "bleu": bleu_score.score,
        "bleu_signature": str(bleu.get_signature()),
        "chrf": chrf_score.score,
        "chrf_signature": str(chrf.get_signature()),
    }


def save_evaluation(output_dir, name, sources, hypotheses, references, extra=None,
                    score=None, kind="bleu"):  # fmt: skip
    """Score and write ``{name}.hyp.txt`` and ``{name}.{kind}.json`` next to each other.

    ``score(hypotheses, references) -> dict`` is :func:`corpus_bleu` by default (a task with
    other scores, the transliterator's, passes its own and its ``kind``).

    Returns:
        The score dict, with ``extra`` merged in.
    """
    os.makedirs(output_dir, exist_ok=True)
    score = score or corpus_bleu
    scores = {**score(hypotheses, references), "sentences": len(hypotheses), **(extra or {})}
    with open(os.path.join(output_dir, f"{name}.hyp.txt"), "w", encoding="utf-8") as f:
        f.writelines(one_line(h) + "\n" for h in hypotheses)
    with open(os.path.join(output_dir, f"{name}.{kind}.json"), "w") as f:
        json.dump(scores, f, indent=2)
    return scores
