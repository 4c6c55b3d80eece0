"""Special tokens: the one place their strings and ids are defined.

Every vocabulary in seqlab starts with the same four reserved tokens, so their ids are constants
that models, search and data code share without importing each other.
"""

from __future__ import annotations

UNK_TOKEN, PAD_TOKEN, BOS_TOKEN, EOS_TOKEN = "<unk>", "<pad>", "<bos>", "<eos>"
SPECIAL_TOKENS = (UNK_TOKEN, PAD_TOKEN, BOS_TOKEN, EOS_TOKEN)

UNK, PAD, BOS, EOS = range(len(SPECIAL_TOKENS))  # 0, 1, 2, 3: ids of the tokens above
