"""MoE routing (arcforge.model.moe): aux-loss-free balancing moves a skewed router's load toward
uniform through the selection bias alone, expert-load counts, and routing replay."""

import pytest
import torch
from tiny_models import glm5_two_layers
from torch.testing import assert_close
from transformers.models.glm_moe_dsa.modeling_glm_moe_dsa import GlmMoeDsaTopkRouter

from arcforge.model.checkpoint import init_model
from arcforge.model.moe import (
    AuxFreeBalancer,
    ExpertLoad,
    RoutingRecord,
    bias_update,
    load_stats,
    record_routing,
    replay_routing,
    routers,
)

V = 64


pytestmark = pytest.mark.usefixtures("one_thread")


def test_bias_update_and_load_stats_by_hand():
    load = torch.tensor([6, 2, 0, 4])  # mean 3
    assert bias_update(load, 0.1).tolist() == pytest.approx([-0.1, 0.1, 0.1, -0.1])
    assert bias_update(torch.tensor([3, 3]), 0.1).tolist() == [0.0, 0.0]
    s = load_stats(torch.tensor([[6, 2, 0, 4], [3, 3, 3, 3]]))
    # layer 0: max 6 / mean 3 = 2.0; layer 1 balanced: 1.0; one idle expert
    assert s["moe_imbalance_l0"] == 2.0 and s["moe_imbalance_l1"] == 1.0
    assert s["moe_imbalance_max"] == 2.0 and s["moe_imbalance_mean"] == 1.5
    assert s["moe_idle_experts"] == 1.0


def test_aux_free_bias_balances_a_skewed_router_without_touching_gate_weights():
    router = GlmMoeDsaTopkRouter(glm5_two_layers(V)).train()  # 8 experts, top-2
    g = torch.Generator().manual_seed(0)
    mu = torch.randn(128, generator=g)  # every token shares a mean direction ...
    with torch.no_grad():
        router.weight.normal_(0, 0.02, generator=g)
        router.weight[:2] += 0.5 * mu / mu.norm()  # ... that experts 0 and 1 are aligned with
    holder = torch.nn.ModuleList([router])
    balancer = AuxFreeBalancer(holder, gamma=0.005)
    window = ExpertLoad(holder)  # the load summed over a window of steps
    imbalance = []
    for step in range(200):
        if step in (10, 150):
            imbalance.append(window.stats()["moe_imbalance_l0"])
            window.reset()
        x = mu + torch.randn(256, 128, generator=g)  # (N, d)
        logits, w, idx = router(x)
        balancer.step()
        # the gate weights are the unbiased sigmoid scores of the picked experts (normalised,
        # scaled): the bias changes which experts, never how much they weigh
        ref = logits.sigmoid().gather(1, idx)
        assert_close(w, ref / ref.sum(-1, keepdim=True) * router.routed_scaling_factor)
    imbalance.append(window.stats()["moe_imbalance_l0"])
    # steps 0-9: experts 0 and 1 take every token (max/mean = E/k = 4); steps 150-199: near 1
    first, _, last = imbalance
    assert first > 3.5 and last < 1.2, imbalance
    assert router.e_score_correction_bias[:2].max() < router.e_score_correction_bias[2:].min()


def test_expert_load_counts_every_routed_token():
    model = init_model(glm5_two_layers(V), seed=0).train()
    ids = torch.randint(1, V, (3, 10), generator=torch.Generator().manual_seed(0))
    with ExpertLoad(model) as load:
        model(input_ids=ids)
        assert load.counts.shape == (1, 8)
        assert int(load.counts.sum()) == 3 * 10 * 2  # B * T tokens, top-2 each
        model.eval()
        with ExpertLoad(model, train_only=True) as train_load:
            model(input_ids=ids)
        assert int(train_load.counts.sum()) == 0  # eval forwards are not training load
    s = load.stats()
    assert s["moe_imbalance_l0"] >= 1.0


def test_replayed_routing_reproduces_the_recorded_forward():
    model = init_model(glm5_two_layers(V), seed=0).eval()
    ids = torch.randint(1, V, (2, 16), generator=torch.Generator().manual_seed(1))
    with torch.no_grad(), record_routing(model) as rec:
        ref = model(input_ids=ids).logits  # the rollout's forward
    (router,) = routers(model)
    (picked,) = rec.experts[0]
    assert picked.shape == (2 * 16, 2)

    with torch.no_grad():
        with replay_routing(model, rec):  # same weights: bit-identical to the recorded forward
            assert torch.equal(model(input_ids=ids).logits, ref)

        # a bias update between rollout and training changes the selection, not the weights
        router.e_score_correction_bias += torch.randn(8, generator=torch.Generator().manual_seed(2))
        with record_routing(model) as now:
            plain = model(input_ids=ids).logits
        assert not torch.equal(now.experts[0][0].sort(-1).values, picked.sort(-1).values)
        assert (plain - ref).abs().max() > 1e-3
        with replay_routing(model, rec), record_routing(model) as forced:
            replayed = model(input_ids=ids).logits
        assert torch.equal(forced.experts[0][0], picked)
        assert_close(replayed, ref, atol=1e-6, rtol=0)

        # the router's weights move slightly: without replay some tokens change experts;
        # with replay the experts are the recorded ones and only the gate weights move
        router.e_score_correction_bias.zero_()
        g = torch.Generator().manual_seed(3)
        router.weight += 0.01 * torch.randn(router.weight.shape, generator=g)  # init std 0.02
        with record_routing(model) as now:
            plain = model(input_ids=ids).logits
        assert not torch.equal(now.experts[0][0].sort(-1).values, picked.sort(-1).values)
        with replay_routing(model, rec), record_routing(model) as forced:
            replayed = model(input_ids=ids).logits
        assert torch.equal(forced.experts[0][0], picked)
        assert (replayed - ref).abs().max() < (plain - ref).abs().max()

    with pytest.raises(ValueError, match="recorded 32 tokens"):
        with replay_routing(model, rec), torch.no_grad():
            model(input_ids=ids[:1])


def test_replay_per_row_in_a_different_batch():
    # rows recorded in one batch (the rollout) and replayed in another (a training minibatch
    # with other rows, right padding): each row's tokens get the experts recorded for them
    model = init_model(glm5_two_layers(V), seed=0).eval()
    ids = torch.randint(1, V, (3, 12), generator=torch.Generator().manual_seed(4))
    with torch.no_grad(), record_routing(model) as rec:
        ref = model(input_ids=ids).logits  # (3, 12, V)
    rows = rec.sequences(batch_size=3)
    assert rows[1][0].shape == (12, 2) and torch.equal(rows[1][0], rec.experts[0][0][12:24])
    (router,) = routers(model)
    with torch.no_grad():
        router.e_score_correction_bias += torch.randn(8, generator=torch.Generator().manual_seed(5))
    batch = torch.stack([ids[2], torch.cat([ids[0, :7], torch.zeros(5, dtype=torch.long)])])
    replay = RoutingRecord.from_sequences([rows[2], [r[:7] for r in rows[0]]], seq_len=12)
    with torch.no_grad():
        plain = model(input_ids=batch).logits  # the bias picks other experts without replay
        with replay_routing(model, replay):
            out = model(input_ids=batch).logits  # (2, 12, V)
    assert (plain[0] - ref[2]).abs().max() > 1e-3
    assert_close(out[0], ref[2], atol=1e-6, rtol=0)
    assert_close(out[1, :7], ref[0, :7], atol=1e-6, rtol=0)  # causal: padding comes after
