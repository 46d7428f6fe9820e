"""The NAT's training objectives (CMLM masking, CTC targets), read through the generic pipeline."""

import doctest

import numpy as np
import pytest
import sentencepiece as spm
import tensorflow as tf

from zoo.data import (
    EOS_ID,
    PAD_ID,
    SentencePieceTokenizer,
    load_multi30k,
    make_translation_dataset,
    train_sentencepiece,
)
from zoo.models.nat import MASK_ID, get_config, objectives
from zoo.models.nat.objectives import CMLMObjective, CTCObjective, nat_objective

PAIRS = load_multi30k("val")[:600]


@pytest.fixture(scope="module")
def sp_model_path(tmp_path_factory):
    texts = [s for pair in load_multi30k("train")[:2000] for s in pair]
    return train_sentencepiece(texts, tmp_path_factory.mktemp("sp") / "sp", vocab_size=500)


@pytest.fixture(scope="module")
def tokenizer(sp_model_path):
    return SentencePieceTokenizer(sp_model_path)


@pytest.fixture(scope="module")
def reference_ids(sp_model_path):
    """The ids of each pair from the Python sentencepiece package, independent of tf-text."""
    processor = spm.SentencePieceProcessor(model_file=sp_model_path)
    return [(processor.encode(src), processor.encode(tgt)) for src, tgt in PAIRS]


def _unpad(row):
    """A padded row without its trailing pads (no real token is PAD_ID)."""
    nonzero = np.flatnonzero(row != PAD_ID)
    return row[: nonzero[-1] + 1].tolist() if nonzero.size else []


def _cmlm_examples(ds):
    """Each example of a CMLM dataset, unpadded: ``(source, target_in, tokens, length)``."""
    for features, labels in ds:
        rows = zip(
            features["source"].numpy(), features["target_in"].numpy(),
            labels["tokens"].numpy(), labels["length"].numpy(),
        )
        for source, target_in, tokens, length in rows:
            source, target_in = _unpad(source), np.array(_unpad(target_in))
            yield source, target_in, tokens[: len(target_in)], length


def test_cmlm_masks_one_to_all_target_tokens_and_labels_them(reference_ids, tokenizer):
    """Each target is target + EOS, with 1..T of its tokens masked anew at every reading; the
    labels are the masked tokens and the clipped length offset, and nothing else changes."""
    max_offset, mask_id, max_length = 3, 1, 40
    objective = CMLMObjective(max_length, tokenizer.eos_id, mask_id=mask_id,
                              max_offset=max_offset)  # fmt: skip
    ds = make_translation_dataset(PAIRS, tokenizer, batch_tokens=512, max_length=max_length,
                                  objective=objective, seed=0)  # fmt: skip
    targets = {
        tuple(src[:max_length]): tuple(tgt[: max_length - 1]) + (EOS_ID,)
        for src, tgt in reference_ids
    }
    fractions, seen = [], 0
    for _ in range(2):  # two epochs: new masks each time
        for source, target_in, tokens, length in _cmlm_examples(ds):
            target = targets[tuple(source)]
            masked = target_in == mask_id
            assert len(target_in) == len(target) and 1 <= masked.sum() <= len(target)
            np.testing.assert_array_equal(np.where(masked, tokens, target_in), target)
            assert np.all(tokens[~masked] == PAD_ID)
            offset = np.clip(len(target) - len(source), -max_offset, max_offset)
            assert length == offset + max_offset
            fractions.append(masked.mean())
            seen += 1
    assert seen == 2 * len(PAIRS)
    assert 0.3 < np.mean(fractions) < 0.7 and min(fractions) < 0.2 and max(fractions) == 1.0


def test_cmlm_mask_all_makes_every_position_a_label(reference_ids, tokenizer):
    """The objective of a decoder that reads no target tokens (decoder_input="copy")."""
    objective = CMLMObjective(40, tokenizer.eos_id, mask_all=True)
    ds = make_translation_dataset(PAIRS, tokenizer, batch_tokens=512, max_length=40,
                                  objective=objective)  # fmt: skip
    targets = {tuple(s[:40]): tuple(t[:39]) + (EOS_ID,) for s, t in reference_ids}
    seen = 0
    for source, target_in, tokens, _ in _cmlm_examples(ds):
        np.testing.assert_array_equal(tokens, targets[tuple(source)])
        assert np.all(target_in == MASK_ID)  # only the length is read
        seen += 1
    assert seen == len(PAIRS)


def test_cmlm_gold_input_masks_nothing_and_labels_every_position():
    """Glancing training reads the gold target and masks it inside the model."""
    features, labels = CMLMObjective(8, EOS_ID, gold_input=True).example(
        tf.constant([5, 6, 7]), tf.constant([8, 9]))
    assert features["target_in"].numpy().tolist() == [8, 9, EOS_ID]
    assert labels["tokens"].numpy().tolist() == [8, 9, EOS_ID]


def test_cmlm_max_length_mode_fills_the_widest_target_with_eos(reference_ids, tokenizer):
    """The label row is the target, EOS, then EOS up to min(max(S + K, 2), max_length)."""
    max_offset, max_length = 3, 24
    objective = CMLMObjective(max_length, tokenizer.eos_id, max_offset=max_offset,
                              length_mode="max")  # fmt: skip
    ds = make_translation_dataset(PAIRS, tokenizer, batch_tokens=512, max_length=max_length,
                                  objective=objective)  # fmt: skip
    targets = {tuple(s[:max_length]): t for s, t in reference_ids}
    cut = filled = seen = 0
    for source, target_in, tokens, length in _cmlm_examples(ds):
        width = min(max(len(source) + max_offset, 2), max_length)
        target = targets[tuple(source)][: width - 1]
        expected = target + [EOS_ID] * (width - len(target))
        masked = target_in == MASK_ID
        assert len(target_in) == width and 1 <= masked.sum() <= width
        np.testing.assert_array_equal(np.where(masked, tokens, target_in), expected)
        assert np.all(tokens[~masked] == PAD_ID)
        offset = np.clip(len(target) + 1 - len(source), -max_offset, max_offset)
        assert length == offset + max_offset  # the length of the target and its first EOS
        cut += len(targets[tuple(source)]) > width - 1
        filled += width - len(target) > 1
        seen += 1
    assert seen == len(PAIRS) and cut > 0 and filled > 0
    with pytest.raises(ValueError, match="Unknown length_mode 'widest'"):
        CMLMObjective(max_length, EOS_ID, length_mode="widest")


@pytest.mark.parametrize("gold_input", [False, True])
def test_ctc_reads_the_cut_source_and_labels_the_whole_target(reference_ids, tokenizer,
                                                              gold_input):  # fmt: skip
    """No BOS, no EOS; the source cut to what the upsampling fits; "skip" keeps targets of up
    to max_length tokens (not max_length - 1)."""
    max_length, sources = 24, 8
    objective = CTCObjective(max_length, max_source_length=sources, gold_input=gold_input)
    ds = make_translation_dataset(PAIRS, tokenizer, batch_tokens=512, max_length=max_length,
                                  objective=objective, long_pairs="skip")  # fmt: skip
    assert sorted(ds.element_spec[0]) == ["source", "target_in"][: 1 + gold_input]
    expected = sorted((tuple(s[:sources]), tuple(t)) for s, t in reference_ids
                      if len(s) <= max_length and len(t) <= max_length)  # fmt: skip
    seen = []
    for features, labels in ds:
        for i, (source, tokens) in enumerate(zip(features["source"].numpy(),
                                                 labels["tokens"].numpy())):  # fmt: skip
            seen.append((tuple(_unpad(source)), tuple(_unpad(tokens))))
            if gold_input:
                assert _unpad(features["target_in"].numpy()[i]) == _unpad(tokens)
    assert sorted(seen) == expected
    assert any(len(t) == max_length for _, t in expected)  # one over max_length - 1 was kept


@pytest.mark.parametrize(
    "fields, kind, options",
    [
        ({}, CMLMObjective, {"mask_all": False, "gold_input": False, "length_mode": "predict"}),
        ({"decoder_input": "copy", "length_mode": "max"}, CMLMObjective,
         {"mask_all": True, "length_mode": "max", "mask_id": MASK_ID}),
        ({"glancing_ratio": 0.5}, CMLMObjective, {"gold_input": True, "max_offset": 24}),
        ({"decoder": "ctc", "ctc_upsample": 3}, CTCObjective,
         {"max_source_length": 48 // 3, "gold_input": False}),
        ({"decoder": "ctc", "glancing_ratio": 0.3}, CTCObjective, {"gold_input": True}),
    ],
)  # fmt: skip
def test_the_config_picks_the_objective(fields, kind, options):
    config = get_config("tiny", vocab_size=50, max_length=48, max_offset=24, **fields)
    objective = nat_objective(config, EOS_ID)
    assert type(objective) is kind and objective.max_length == 48
    assert {name: getattr(objective, name) for name in options} == options
    assert objective.target_limit == (48 if kind is CTCObjective else 47)


def test_docstring_examples_run():
    result = doctest.testmod(objectives, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
