"""zoo.data: corpus readers, vocabularies and tokenizers, tf.data pipelines.

The Multi30k task 1 corpus (English–German) ships inside this package, in ``zoo/data/multi30k/``,
and the UD English-EWT r2.16 treebank (CC BY-SA 4.0) in ``zoo/data/ud_english_ewt/``.
"""

from zoo.data.conllu import (
    UD_ENGLISH_EWT_SIZES,
    UD_ENGLISH_EWT_SPLITS,
    UPOS_TAGS,
    Sentence,
    load_ud_english_ewt,
    read_conllu,
)
from zoo.data.epoch_order import (
    DataCounts,
    DataPart,
    DataPosition,
    epoch_shuffled,
    resumable_pass,
    skip_done,
)
from zoo.data.lemma_scripts import apply_lemma_script, lemma_script
from zoo.data.multi30k import (
    MULTI30K_LANGUAGES,
    MULTI30K_SPLITS,
    batched,
    load_multi30k,
    multi30k_files,
    one_line,
    read_lines,
    read_parallel,
)
from zoo.data.parallel_corpus import (
    CorpusFiles,
    ParallelCorpus,
    data_error,
    fingerprint_change,
)
from zoo.data.sentencepiece_vocab import (
    BOS_ID,
    BOS_PIECE,
    EOS_ID,
    EOS_PIECE,
    PAD_ID,
    PAD_PIECE,
    UNK_ID,
    UNK_PIECE,
    SentencePieceTokenizer,
    train_sentencepiece,
)
from zoo.data.tagger_vocabulary import TaggerVocabulary
from zoo.data.tagging_pipeline import make_tagging_dataset, split_long_sentences
from zoo.data.treebank import Treebank
from zoo.data.translation_pipeline import TeacherForcing, bucket_spec, make_translation_dataset
from zoo.data.transliteration import load_transliteration, transliterate

__all__ = [
    "BOS_ID",
    "BOS_PIECE",
    "CorpusFiles",
    "DataCounts",
    "DataPart",
    "DataPosition",
    "ParallelCorpus",
    "data_error",
    "fingerprint_change",
    "multi30k_files",
    "EOS_ID",
    "EOS_PIECE",
    "MULTI30K_LANGUAGES",
    "MULTI30K_SPLITS",
    "PAD_ID",
    "PAD_PIECE",
    "Sentence",
    "SentencePieceTokenizer",
    "TaggerVocabulary",
    "TeacherForcing",
    "Treebank",
    "UD_ENGLISH_EWT_SIZES",
    "UD_ENGLISH_EWT_SPLITS",
    "UNK_ID",
    "UNK_PIECE",
    "UPOS_TAGS",
    "apply_lemma_script",
    "batched",
    "bucket_spec",
    "epoch_shuffled",
    "lemma_script",
    "load_multi30k",
    "load_transliteration",
    "one_line",
    "load_ud_english_ewt",
    "make_tagging_dataset",
    "make_translation_dataset",
    "read_conllu",
    "read_lines",
    "read_parallel",
    "resumable_pass",
    "skip_done",
    "split_long_sentences",
    "train_sentencepiece",
]
