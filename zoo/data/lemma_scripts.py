"""Lemma edit scripts: the edit from a word form to its lemma, as a class a lemmatizer predicts.

A script records how to cut and extend the lowercased form and how to case the result, so one
script serves every word of the same pattern ("walked" -> "walk" also turns "jumped" into
"jump"), as in UDPipe 2 (Straka 2018) and UDify (Kondratyuk and Straka 2019).
"""

__all__ = ["apply_lemma_script", "lemma_script"]

_ABSOLUTE = "="  # the first character of a script that gives the lemma itself


def _lower(result, form):
    return result


def _title(result, form):
    return result[:1].upper() + result[1:]


def _upper(result, form):
    return result.upper()


def _keep(result, form):
    """Each character upper where the form's character at the same position is."""
    return "".join(c.upper() if i < len(form) and form[i].isupper() else c
                   for i, c in enumerate(result))  # fmt: skip


# The casing classes, in the order they are tried.
_CASINGS = {"l": _lower, "t": _title, "u": _upper, "k": _keep}


def _longest_common_substring(a, b):
    """``(start in a, start in b, length)`` of the longest common substring of ``a`` and ``b``;
    of equally long ones, the first in ``a``, then in ``b``."""
    best = (0, 0, 0)
    previous = [0] * (len(b) + 1)
    for i in range(len(a)):
        current = [0] * (len(b) + 1)
        for j in range(len(b)):
            if a[i] == b[j]:
                current[j + 1] = previous[j] + 1
                if current[j + 1] > best[2]:
                    best = (i + 1 - current[j + 1], j + 1 - current[j + 1], current[j + 1])
        previous = current
    return best


def lemma_script(form, lemma):
    """The edit script that turns ``form`` into ``lemma``.

    The edit is found on the lowercased strings: their longest common substring is kept, and
    the script says how many characters to cut from the start and from the end of the form and
    what to put before and after what is left. Its casing class then cases the result:

    - ``l``: as it is (a lowercase lemma, or one without cased letters),
    - ``t``: the first character upper ("Paris", "I"),
    - ``u``: all upper ("US"),
    - ``k``: upper where the form's character at the same position is upper ("eBay").

    The script is ``"{casing}:{cut start}:{cut end}:{len(prefix)}:{prefix}{suffix}"``. Where the
    two share no character ("went" -> "go"), or no class gives the lemma's case, it is the
    absolute script ``"=" + lemma``, which gives that lemma whatever the form.

    Args:
        form: the word form.
        lemma: its lemma (``"_"`` too).

    Returns:
        The script, a string, with ``apply_lemma_script(form, script) == lemma``.

    Example:
        >>> lemma_script("walked", "walk"), lemma_script("Dogs", "dog")
        ('l:0:2:0:', 'l:0:1:0:')
        >>> lemma_script("gemacht", "machen"), lemma_script("went", "go")
        ('l:2:1:0:en', '=go')
    """
    lowered_form, lowered_lemma = form.lower(), lemma.lower()
    start, lemma_start, length = _longest_common_substring(lowered_form, lowered_lemma)
    if length:
        cut_end = len(lowered_form) - start - length
        prefix = lowered_lemma[:lemma_start]
        suffix = lowered_lemma[lemma_start + length:]
        for casing in _CASINGS:
            script = f"{casing}:{start}:{cut_end}:{len(prefix)}:{prefix}{suffix}"
            if apply_lemma_script(form, script) == lemma:
                return script
    return _ABSOLUTE + lemma


def apply_lemma_script(form, script):
    """The lemma that ``script`` (from :func:`lemma_script`) makes of ``form``.

    Args:
        form: the word form.
        script: an edit script.

    Returns:
        The lemma, or None where the script does not apply to this form: it would cut all of
        the form's (lowercased) characters or more. The caller falls back to the form.

    Raises:
        ValueError: ``script`` is not an edit script.

    Example:
        >>> apply_lemma_script("jumped", lemma_script("walked", "walk"))
        'jump'
        >>> apply_lemma_script("Cats", lemma_script("Dogs", "Dog"))
        'Cat'
        >>> apply_lemma_script("is", "=be"), apply_lemma_script("ed", "l:0:2:0:")
        ('be', None)
    """
    if script.startswith(_ABSOLUTE):
        return script[len(_ABSOLUTE):]
    try:
        casing, start, cut_end, prefix_length, rest = script.split(":", 4)
        start, cut_end, prefix_length = int(start), int(cut_end), int(prefix_length)
        case = _CASINGS[casing]
    except (ValueError, KeyError):
        raise ValueError(f"{script!r} is not a lemma edit script") from None
    if min(start, cut_end, prefix_length) < 0 or prefix_length > len(rest):
        raise ValueError(f"{script!r} is not a lemma edit script")
    lowered = form.lower()
    if start + cut_end >= len(lowered):
        return None
    kept = lowered[start:len(lowered) - cut_end]
    return case(rest[:prefix_length] + kept + rest[prefix_length:], form)
