"""Lemma edit scripts: every script gives its lemma back, and a script serves its whole pattern."""

import doctest

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zoo.data import lemma_scripts
from zoo.data.lemma_scripts import apply_lemma_script, lemma_script

PAIRS = [
    ("running", "run"),
    ("Dogs", "dog"),
    ("went", "go"),
    ("I", "I"),
    ("US", "US"),
    ("better", "good"),
    ("New York", "New York"),
    ("children", "child"),
    ("eBay", "eBay"),
    ("gemacht", "machen"),
    ("книги", "книга"),  # Russian: books -> book
    ("Λόγους", "λόγος"),  # Greek: words (acc.) -> word
    ("n't", "not"),
    (",", "_"),
    ("_", "_"),
    ("İstanbul", "İstanbul"),  # its lowercase is one character longer
    ("STRASSE", "Straße"),
]


@pytest.mark.parametrize("form, lemma", PAIRS)
def test_a_script_gives_its_lemma_back(form, lemma):
    assert apply_lemma_script(form, lemma_script(form, lemma)) == lemma


@given(st.text(max_size=12), st.text(max_size=12))
def test_a_script_gives_its_lemma_back_on_any_strings(form, lemma):
    assert apply_lemma_script(form, lemma_script(form, lemma)) == lemma


@given(st.text(alphabet="abAB_=:0", max_size=8), st.text(alphabet="abAB_=:0", max_size=8))
def test_a_script_gives_its_lemma_back_on_close_strings(form, lemma):
    assert apply_lemma_script(form, lemma_script(form, lemma)) == lemma


def test_the_scripts_as_documented():
    assert lemma_script("walked", "walk") == "l:0:2:0:"  # cut "ed"
    assert lemma_script("running", "run") == "l:0:4:0:"
    assert lemma_script("Dogs", "dog") == "l:0:1:0:"  # lowercase lemma
    assert lemma_script("paris", "Paris") == "t:0:0:0:"
    assert lemma_script("US", "US") == "u:0:0:0:"
    assert lemma_script("New York", "New York") == "k:0:0:0:"  # the form's casing
    assert lemma_script("gemacht", "machen") == "l:2:1:0:en"  # cut "ge" and "t", add "en"
    assert lemma_script("unmade", "remake") == "l:2:2:2:reke"  # keep "ma"; "re" + ma + "ke"
    assert lemma_script("went", "go") == "=go"  # nothing shared: the lemma itself
    assert lemma_script("better", "good") == "=good"
    assert lemma_script(",", "_") == "=_"


@pytest.mark.parametrize(
    "learned, form, lemma",
    [
        (("walked", "walk"), "jumped", "jump"),
        (("running", "run"), "sitting", "sit"),
        (("Dogs", "dog"), "Cats", "cat"),
        (("Paris", "Paris"), "London", "London"),
        (("gemacht", "machen"), "gesagt", "sagen"),
        (("книги", "книга"), "лампы", "лампа"),
        (("went", "go"), "goes", "go"),  # an absolute script gives its lemma to any form
    ],
)
def test_a_script_learned_on_one_word_serves_its_pattern(learned, form, lemma):
    assert apply_lemma_script(form, lemma_script(*learned)) == lemma


def test_a_script_that_cuts_the_whole_form_does_not_apply():
    script = lemma_script("walked", "walk")  # cuts two characters from the end
    assert apply_lemma_script("ed", script) is None
    assert apply_lemma_script("d", script) is None
    assert apply_lemma_script("", script) is None
    assert apply_lemma_script("gesagt", lemma_script("gemacht", "machen")) == "sagen"
    assert apply_lemma_script("get", lemma_script("gemacht", "machen")) is None


@pytest.mark.parametrize("script", ["", "x:0:0:0:", "l:0:0", "l:a:0:0:", "l:0:-1:0:", "l:0:0:3:ab"])
def test_a_malformed_script_is_refused(script):
    with pytest.raises(ValueError, match="not a lemma edit script"):
        apply_lemma_script("word", script)


def test_docstring_examples():
    assert doctest.testmod(lemma_scripts, raise_on_error=True).attempted > 0
