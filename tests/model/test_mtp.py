"""The MTP head: its loss trains it through `train_lm`, the LM part of the joint loss is the plain
LM loss, and the head round-trips beside a stock `save_pretrained` checkpoint."""

import pytest
import torch
from safetensors.torch import load_file
from tiny_models import micro_llama_config
from torch.testing import assert_close
from transformers import AutoModelForCausalLM

from arcforge.config import OptimCfg
from arcforge.model.checkpoint import init_model, save_checkpoint
from arcforge.model.dsa import use_stable_topk
from arcforge.model.mtp import MTPHead, has_mtp, load_mtp, mtp_loss, save_mtp
from arcforge.model.presets import build_config
from arcforge.train.lm import lm_loss, lm_mtp_loss, train_lm
from arcforge.train.loop import Phase

V = 32


pytestmark = pytest.mark.usefixtures("one_thread")


def tiny_llama():
    return init_model(micro_llama_config(V), seed=0)


def stride_rows(n: int, length: int, seed: int) -> torch.Tensor:
    """(n, length) rows t_{i+1} = t_i + s mod V with a per-row stride s in {1, 2, 3}: the token
    two ahead depends on the stride, which only the context reveals."""
    g = torch.Generator().manual_seed(seed)
    start = torch.randint(0, V, (n, 1), generator=g)
    stride = torch.randint(1, 4, (n, 1), generator=g)
    return (start + stride * torch.arange(length)) % V  # (n, length)


def test_lm_part_of_joint_loss_is_the_lm_loss():
    model, batch = tiny_llama(), stride_rows(3, 17, seed=1)
    mtp = MTPHead(model.config, draft_steps=2)
    with torch.no_grad():
        joint0, n0 = lm_mtp_loss(model, batch, mtp, weight=0.0)
        plain, n1 = lm_loss(model, batch)
        joint, _ = lm_mtp_loss(model, batch, mtp, weight=0.5)
        aux = mtp_loss(model, mtp, batch)
    assert n0 == n1 == 3 * 16
    assert_close(joint0, plain, atol=1e-6, rtol=0)
    assert_close(joint, plain + 0.5 * aux, atol=1e-6, rtol=0)


def test_train_lm_trains_the_head_and_detaches_it(tmp_path):
    torch.manual_seed(0)
    model = tiny_llama()
    keys = set(model.state_dict())
    mtp = MTPHead(model.config, draft_steps=2)
    held = stride_rows(16, 24, seed=99)
    with torch.no_grad():
        before = mtp_loss(model, mtp, held).item()
    proj0 = mtp.proj.weight.detach().clone()
    phases = [Phase(40, lambda step: stride_rows(16, 24, seed=step))]
    optim = OptimCfg(lr=1e-2, warmup_steps=0, weight_decay=0.0)
    train_lm(
        model, phases, optim, tmp_path, mtp=mtp, mtp_weight=1.0, log_every=100, checkpoint_every=20
    )
    with torch.no_grad():
        after = mtp_loss(model, mtp, held).item()
    # ln(32) = 3.47 at chance; the strides make t_{i+2} predictable from the context
    assert before > 3.0 and after < 0.5 * before, (before, after)
    assert not torch.equal(proj0, mtp.proj.weight)
    assert not hasattr(model, "mtp") and set(model.state_dict()) == keys
    # the resumable state written at step 20 carries the head (a resumed run continues it)
    assert "mtp.proj.weight" in load_file(str(tmp_path / "state" / "model.safetensors"))


@pytest.mark.parametrize("preset", ["llama", "glm5-tiny"])
def test_checkpoint_round_trip_beside_stock_weights(tmp_path, preset):
    if preset == "llama":
        model = tiny_llama()
    else:
        cfg = build_config(preset, vocab_size=V, max_position_embeddings=64, index_topk=8)
        model = init_model(cfg, seed=0)
    model.eval()
    mtp = MTPHead(model.config, draft_steps=3).eval()
    out = save_checkpoint(model, None, tmp_path / "ckpt")
    save_mtp(mtp, out)
    assert has_mtp(out)
    stock, info = AutoModelForCausalLM.from_pretrained(
        str(out), local_files_only=True, output_loading_info=True
    )
    assert not info["unexpected_keys"] and not info["missing_keys"]
    back = load_mtp(out).eval()
    assert back.draft_steps == 3
    for k, v in mtp.state_dict().items():
        assert torch.equal(back.state_dict()[k], v), k
    ids = stride_rows(2, 20, seed=3)
    use_stable_topk(stock)  # transformers' own top-k orders tied indexer scores its own way
    with torch.no_grad():
        assert_close(mtp_loss(stock, back, ids), mtp_loss(model, mtp, ids), atol=1e-6, rtol=0)


def test_load_mtp_names_the_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no MTP head"):
        load_mtp(tmp_path)
