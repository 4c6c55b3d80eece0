"""Chinese text as seqlab reads it: ``data.normalize: simplified``.

Tatoeba's Mandarin sentences come in both scripts as contributed (我爱你 and 我愛你), and users
type Chinese with whatever punctuation and spacing their keyboard gives. With ``simplified`` a
run reads every Chinese text (training pairs, the user's input, the references it is scored
against) one documented way:

1. **Script**: traditional characters become simplified ones, by OpenCC's ``t2s`` conversion
   (`OpenCC <https://github.com/BYVoid/OpenCC>`_, phrase-aware: 乾淨 → 干净 but 乾隆 stays).
2. **Width**: full-width ASCII letters and digits (``２０１２``, ``ＡＢＣ``) become ASCII; the
   ideographic space U+3000 is a space; zero-width spaces and joiners are dropped.
3. **Punctuation**: the ASCII ``, . ? ! : ;`` written right after a Chinese character become
   the full-width marks ``，。？！：；`` of Chinese text (我爱你. → 我爱你。); elsewhere, as in
   English sentences, they are kept.
4. **Spacing**: spaces between two Chinese characters (or a Chinese character and Chinese
   punctuation) are removed: Chinese separates no words by spaces, so 我 爱 你 is 我爱你;
   other runs of spaces become one, and the ends are trimmed.

English text passes unchanged through every step but the width one, so a translation run
applies the same normalisation to both sides. Nothing here is guessed from the text: the run's
config says ``simplified`` or it does not, and the change made to a user's input is reported
(:func:`seqlab.data.tokenizers.normalisation_messages`).
"""

from __future__ import annotations

import re
from functools import cache

#: CJK Unified Ideographs (with extension A and the compatibility block)
_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
#: Chinese punctuation: the CJK symbols block and the full-width forms of , . ? ! : ; ( )
_HAN_PUNCT = "\u3000-\u303f\uff01\uff08\uff09\uff0c\uff0e\uff1a\uff1b\uff1f\u201c\u201d"
_HAN_RE = re.compile(f"[{_HAN}]")
_SPACE_BETWEEN = re.compile(f"(?<=[{_HAN}{_HAN_PUNCT}])\\s+(?=[{_HAN}{_HAN_PUNCT}])")
_ASCII_PUNCT_AFTER_HAN = re.compile(f"(?<=[{_HAN}])\\s*([,.?!:;])")
_FULL_WIDTH_PUNCT = {",": "，", ".": "。", "?": "？", "!": "！", ":": "：", ";": "；"}
#: full-width digits and Latin letters -> ASCII
_ALNUM = [*range(0xFF10, 0xFF1A), *range(0xFF21, 0xFF3B), *range(0xFF41, 0xFF5B)]
_WIDTH: dict[int, int | None] = {c: c - 0xFEE0 for c in _ALNUM}
_WIDTH.update({0x3000: 0x20, 0x200B: None, 0x200C: None, 0x200D: None, 0xFEFF: None})
_SPACES = re.compile(r"\s+")


def has_han(text: str) -> bool:
    """Whether ``text`` holds a Chinese character."""
    return _HAN_RE.search(text) is not None


@cache
def _converter():  # type: ignore[no-untyped-def]
    try:
        import opencc
    except ImportError as exc:  # pragma: no cover - a dependency of seqlab
        raise ImportError(
            "data.normalize=simplified needs OpenCC: pip install opencc (a dependency of seqlab)"
        ) from exc
    return opencc.OpenCC("t2s")


def to_simplified(text: str) -> str:
    """Step 1 alone: OpenCC's traditional-to-simplified conversion."""
    return _converter().convert(text) if has_han(text) else text


def normalize_chinese(text: str) -> str:
    """All four steps of the module docstring."""
    text = text.translate(_WIDTH)
    if has_han(text):
        text = to_simplified(text)
        text = _ASCII_PUNCT_AFTER_HAN.sub(lambda m: _FULL_WIDTH_PUNCT[m.group(1)], text)
        text = _SPACE_BETWEEN.sub("", text)
    return _SPACES.sub(" ", text).strip()


def changed_characters(text: str) -> list[tuple[str, str]]:
    """What :func:`normalize_chinese` changes of ``text`` that a reader would see: the distinct
    ``(before, after)`` characters it replaces (愛 -> 爱, ２ -> 2, . -> 。), in order. Spacing is not
    counted (it changes no character); when a phrase conversion changes the length, the whole
    text is one pair."""
    before = "".join(c for c in text if not c.isspace() and _WIDTH.get(ord(c), 0) is not None)
    after = normalize_chinese(text).replace(" ", "")
    if before == after:
        return []
    if len(before) != len(after):
        return [(text, normalize_chinese(text))]
    return list(dict.fromkeys((a, b) for a, b in zip(before, after, strict=True) if a != b))
