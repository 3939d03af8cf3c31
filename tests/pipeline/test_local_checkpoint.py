"""`model.path` starts a run from any local HF checkpoint: its own tokenizer (chat tokens added,
embeddings resized), a jsonl SFT source with one bad line reported and skipped, and a
save_pretrained result. Also `arcforge chat` driven through stdin."""

import json
from pathlib import Path

import pytest
from child_runs import run_cli
from tiny_models import micro_llama_config
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
)


def foreign_checkpoint(path: Path) -> int:
    """A Llama checkpoint whose tokenizer knows none of our chat tokens."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        ["hello world, how are you today?"] * 50,
        trainers.BpeTrainer(
            vocab_size=300,
            special_tokens=["</s>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="</s>")
    conf = micro_llama_config(len(fast), num_hidden_layers=1, max_position_embeddings=512)
    LlamaForCausalLM(conf).save_pretrained(path)
    fast.save_pretrained(path)
    return len(fast)


@pytest.mark.slow  # over 10 s: `make test-all` runs it (make test stays under 10 minutes)
def test_run_from_local_checkpoint_with_jsonl_sft(tmp_path):
    ck = tmp_path / "foreign"
    n_foreign = foreign_checkpoint(ck)
    data = tmp_path / "sft.jsonl"
    good = {
        "messages": [{"role": "user", "content": "Say hi."}, {"role": "assistant", "content": "hi"}]
    }
    data.write_text(json.dumps(good) + "\n{not json\n" + json.dumps(good) + "\n")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"""
name: local
world: {{scale: 0.05}}
model: {{path: {ck}}}
stages:
  - name: tune
    kind: sft
    sources: [{{source: "jsonl:{data}"}}]
    max_len: 64
    batch_size: 2
    epochs: 2
eval: {{suites: [reasoning], n: 4, max_new_tokens: 8}}
""")
    r = run_cli("run", str(cfg), "--run-dir", str(tmp_path / "run"), timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"{data}:2" in r.stderr  # the bad line is reported with its file and line
    out = tmp_path / "run" / "tune" / "checkpoint"
    tok = AutoTokenizer.from_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out)
    assert len(tok) == n_foreign + 12  # all 12 chat special tokens were missing
    assert tok.convert_tokens_to_ids("<|assistant|>") >= n_foreign
    assert model.get_input_embeddings().weight.shape[0] >= len(tok)
    assert json.loads((tmp_path / "run" / "tune" / "DONE").read_text())["examples"] == 2

    # the interactive chat reads stdin: one turn, then quit
    chat = ["chat", str(out), "--no-think", "--max-new-tokens", "4"]
    r = run_cli(*chat, stdin="hello\n/quit\n", timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "arcforge chat" in r.stdout and "you>" in r.stdout
