"""RNN encoder–decoder specifics (the shared contract is in test_encoder_decoder.py)."""

import torch

from conftest import random_translation_batch
from seqlab.config import Seq2SeqConfig
from seqlab.models.seq2seq import Seq2Seq

SRC_V, TGT_V, E, H = 13, 11, 8, 12


def make_model(cell="gru", layers=2, dropout=0.0):
    cfg = Seq2SeqConfig(cell=cell, embed_dim=E, hidden_size=H, num_layers=layers, dropout=dropout)
    return Seq2Seq(SRC_V, TGT_V, cfg).eval()


def make_batch(b=4, s=7, t=6, seed=0):
    return random_translation_batch(SRC_V, TGT_V, b, s, t, seed)


def test_context_is_encoder_top_final_state_after_last_real_token():
    model, batch = make_model("gru", 2), make_batch()
    memory = model.encode(batch.src, batch.src_lengths)
    n = int(batch.src_lengths[1])
    _, h = model.encoder(model.src_embed(batch.src[1:2, :n]))  # unpadded, no packing
    torch.testing.assert_close(memory.context[1], h[-1, 0], atol=1e-6, rtol=0)
    torch.testing.assert_close(model.init_state(memory)[:, 1], h[:, 0], atol=1e-6, rtol=0)
