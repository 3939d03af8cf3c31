"""Native chat formats on real templates: render, mask, parse and token-in-token-out per family.

Templates are the real ones (llama.cpp's copies in PyPI's llama-cpp-python sdist,
arcforge.model.families), and so are the vocabularies of Qwen (qwen2) and Llama 3
(llama-bpe). GLM-4.6, MiniMax-M2 and Kimi-K2 have no vocabulary in that package: they run on
SmolLM2's vocabulary as a declared stand-in with the family's special tokens added. SmolLM2 is
the real imported checkpoint (template without tool support: the default tool block).

The episodes' "model" is either a random nano model through the real LocalEngine (what it
writes is noise: its replies become error observations), or, where a reply must be a
well-formed call, a scripted engine that writes the family's own rendering of the call: it
stands in for a trained model, which a unit test cannot afford.
"""

from __future__ import annotations

import json

import pytest
import torch
from tiny_models import end_biased_nano

from arcforge.chat.formats import NativeFormat, attach_format, scripted_reply
from arcforge.model.families import FAMILIES, family_tokenizer
from arcforge.rollout.agent import AgentConfig, run_episode
from arcforge.rollout.engines.base import Completion
from arcforge.rollout.engines.local import LocalEngine
from arcforge.train.rollout_batch import pad_trajectories
from arcforge.types import Message, Reward, Task, Tool, ToolCall

FAMILY_NAMES = sorted(FAMILIES)


def lookup(entity: str, limit: int = 1) -> str:
    """Look up an entity.

    Args:
        entity: the entity's name.
        limit: how many facts.
    """
    return json.dumps({"entity": entity, "born": "Keld", "limit": limit})


TOOLS = [Tool.from_function(lookup)]
CALLS = [
    [ToolCall("lookup", {"entity": "Vofe", "limit": 2})],
    [ToolCall("lookup", {"entity": "Keld"}), ToolCall("lookup", {"entity": "Arn", "limit": 3})],
]


def calls(fmt: NativeFormat, k: int) -> list[ToolCall]:
    """Turn k's calls; one call a turn for templates that refuse several (Llama 3.1's)."""
    single = "only supports single tool-calls" in fmt.tokenizer.chat_template
    return CALLS[k % 2][:1] if single else CALLS[k % 2]


@pytest.fixture(scope="module", params=FAMILY_NAMES)
def fmt(request) -> NativeFormat:
    tok = family_tokenizer(request.param)
    out = attach_format(tok, "native")
    assert isinstance(out, NativeFormat)
    return out


def conversation(fmt: NativeFormat) -> list[Message]:
    second = calls(fmt, 1)
    results = [
        Message("tool", lookup(**c.arguments), tool_call_id=f"call_{1 + j}", name="lookup")
        for j, c in enumerate(second)
    ]
    return [
        Message("system", "You answer questions about people."),
        Message("user", "Where was Vofe born?"),
        Message("assistant", "", reasoning="Look it up.", tool_calls=calls(fmt, 0)),
        Message("tool", lookup("Vofe", 2), tool_call_id="call_0", name="lookup"),
        Message("assistant", "", reasoning="More.", tool_calls=second),
        *results,
        Message("assistant", "Vofe was born in Keld.", reasoning="Done."),
    ]


def trained_pieces(fmt: NativeFormat, ids: list[int], mask: list[int]) -> list[str]:
    pieces, cur = [], []
    for i, m in zip(ids, mask):
        if m:
            cur.append(i)
        elif cur:
            pieces.append(fmt.decode(cur))
            cur = []
    if cur:
        pieces.append(fmt.decode(cur))
    return pieces


def test_render_equals_apply_chat_template_and_masks_only_assistant_text(fmt):
    msgs = conversation(fmt)
    enc = fmt.encode(msgs, TOOLS)
    assert enc.text == fmt.render_text(msgs, TOOLS)
    assert fmt.decode(enc.input_ids) == enc.text  # piecewise tokenization loses nothing
    pieces = trained_pieces(fmt, enc.input_ids, enc.loss_mask)
    assert len(pieces) == 3  # every assistant message of the last turn, nothing else
    stops = [fmt.decode([i]) for i in fmt.stop_ids()]
    for piece in pieces[:2]:
        assert piece.rstrip().endswith(tuple(stops)), piece  # a reply learns to stop
    for m in msgs:
        if m.role in ("system", "user", "tool"):
            assert all(m.content not in p for p in pieces)
    # each trained piece parses back to the message it renders
    for piece, m in zip(pieces, [m for m in msgs if m.role == "assistant"]):
        parsed = fmt.parse(piece, TOOLS)
        assert not parsed.errors, parsed.errors
        assert [(c.name, c.arguments) for c in parsed.tool_calls] == [
            (c.name, c.arguments) for c in m.tool_calls
        ]
        assert parsed.content == m.content


def test_no_token_added_and_the_template_is_kept(fmt):
    before = len(fmt.tokenizer)
    template = fmt.tokenizer.chat_template
    fmt.encode(conversation(fmt), TOOLS)
    assert len(fmt.tokenizer) == before and fmt.tokenizer.chat_template == template


@pytest.mark.parametrize("k", [0, 1])
def test_the_dialect_parses_what_the_template_writes(fmt, k):
    want = calls(fmt, k)
    text = scripted_reply(fmt, "Think.", "", want)
    parsed = fmt.parse(text, TOOLS)
    assert not parsed.errors
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [
        (c.name, c.arguments) for c in want
    ]
    if fmt.dialect.think_open and fmt.has_reasoning:
        assert parsed.reasoning == "Think."
    # the dialect's own renderer writes calls the parser reads the same way
    again = fmt.dialect.parse(fmt.dialect.render_calls(want), TOOLS)
    assert [(c.name, c.arguments) for c in again.tool_calls] == [
        (c.name, c.arguments) for c in want
    ]


@pytest.mark.parametrize(
    "bad",
    [
        "<tool_call>\n{not json}\n</tool_call>",
        "<tool_call>lookup\n<arg_key>entity</arg_key>",
        '<minimax:tool_call>\n<invoke name="lookup">\n<parameter name="x">1',
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.lookup:0"
        "<|tool_call_argument_begin|>{bad<|tool_call_end|><|tool_calls_section_end|>",
        '{"name": "lookup", "parameters": [1, 2]}',
    ],
)
def test_malformed_replies_become_errors_not_exceptions(fmt, bad):
    parsed = fmt.parse(bad, TOOLS)
    assert not parsed.tool_calls or parsed.errors == []  # never a half-parsed call with errors
    if fmt.dialect.call_open and fmt.dialect.call_open in bad:
        assert parsed.errors


class ToolEnv:
    """Three turns of lookups: every reply gets the lookup results, or the parse errors."""

    def __init__(self) -> None:
        self.tools = TOOLS
        self.steps = 0

    def reset(self, task: Task) -> list[Message]:
        return [Message("system", "Use the tools."), Message("user", task.instruction)]

    def step(self, message: Message):
        from arcforge.envs.base import StepResult

        self.steps += 1
        obs = [
            Message("tool", lookup(**c.arguments), tool_call_id=c.id, name=c.name)
            for c in message.tool_calls
        ]
        return StepResult(obs, done=False)

    def verify(self) -> Reward:
        return Reward(0.0, {"steps": self.steps})

    def close(self) -> None:
        pass


class ScriptedCalls:
    """An engine whose turn k writes CALLS[k % 2] in the family's dialect (see the module
    docstring): the ids of the family's own rendering of the call, plus its stop id."""

    version = 0

    def __init__(self, fmt: NativeFormat) -> None:
        self.fmt, self.turn, self.fed = fmt, 0, []

    def generate(self, prompts, params):
        self.fed.append([list(p) for p in prompts])
        text = scripted_reply(self.fmt, "Check.", "", calls(self.fmt, self.turn))
        self.turn += 1
        ids = self.fmt.tokenizer(text, add_special_tokens=False)["input_ids"]
        ids = list(ids) + [self.fmt.stop_ids()[0]]
        return [Completion(ids, [-0.5] * len(ids), "stop") for _ in prompts]


def _check_tito(traj, fed: list[list[int]]) -> None:
    ids = traj.token_ids
    model = [
        (s, sum(len(x.token_ids) for x in traj.segments[:k]))
        for k, s in enumerate(traj.segments)
        if s.source == "model"
    ]
    assert len(model) == len(fed) == 3
    for (_, start), prompt in zip(model, fed):
        assert ids[:start] == prompt  # every turn was fed exactly the stream so far
    batch = pad_trajectories([traj], pad_id=0)
    full = torch.tensor(ids)
    assert torch.equal(batch.input_ids[0], full[:-1]) and torch.equal(batch.targets[0], full[1:])
    trained = [ids[i + 1] for i, m in enumerate(batch.mask[0].tolist()) if m]
    assert trained == [t for s, _ in model for t in s.token_ids]  # trainer ids = engine ids


def test_tool_episode_tito_with_calls_in_the_family_dialect(fmt):
    engine = ScriptedCalls(fmt)
    cfg = AgentConfig(max_turns=3, max_new_tokens=64, context_budget=8192)
    traj = run_episode(
        engine, fmt.tokenizer, ToolEnv(), Task("t", "chat", "Where was Vofe born?"), cfg
    )
    assert traj.finish_reason == "max_turns"
    _check_tito(traj, [p[0] for p in engine.fed])
    replies = [m for m in traj.messages if m.role == "assistant"]
    assert [[(c.name, c.arguments) for c in m.tool_calls] for m in replies] == [
        [(c.name, c.arguments) for c in calls(fmt, k)] for k in range(3)
    ]
    n_results = len(calls(fmt, 0)) + len(calls(fmt, 1))  # the first two turns' results
    assert sum(m.role == "tool" for m in traj.messages) == n_results
    # within one user turn the template renders the history as it was sampled: a re-render
    # of the messages holds the TITO stream's observation tokens verbatim
    rerender = fmt.render_text(traj.messages, TOOLS)
    assert fmt.decode(traj.segments[0].token_ids) in rerender


class Recording:
    def __init__(self, engine) -> None:
        self.engine, self.fed = engine, []

    @property
    def version(self):
        return self.engine.version

    def generate(self, prompts, params):
        self.fed.append([list(p) for p in prompts])
        return self.engine.generate(prompts, params)


@pytest.mark.parametrize("family", ["smollm2", "glm46"])
def test_tool_episode_tito_through_the_local_engine(family):
    tok = family_tokenizer(family)
    fmt = attach_format(tok, "native")
    model = end_biased_nano(
        tok, max_position_embeddings=4096, end_bias=12.0, end_id=fmt.stop_ids()[0]
    ).eval()
    engine = Recording(LocalEngine(model, pad_token_id=0))
    cfg = AgentConfig(max_turns=3, max_new_tokens=8, context_budget=4096, seed=0)
    traj = run_episode(engine, tok, ToolEnv(), Task("t", "chat", "Where was Vofe born?"), cfg)
    # random text is no call: each turn gets an error observation and the episode goes on
    assert traj.finish_reason == "max_turns"
    _check_tito(traj, [p[0] for p in engine.fed])


def test_arcforge_serve_returns_the_dialects_calls_to_the_openai_client(fmt):
    """`arcforge serve`'s chat endpoint (the FastAPI app in-process, reached by the `openai`
    client through starlette's test transport) renders in the family's template and returns the
    family's calls as OpenAI `tool_calls`."""
    import openai
    from starlette.testclient import TestClient

    from arcforge.rollout.serve import create_app

    engine = ScriptedCalls(fmt)
    app = create_app(engine, "m", tokenizer=fmt.tokenizer)
    client = openai.OpenAI(base_url="http://test/v1", api_key="x", http_client=TestClient(app))
    resp = client.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": "Where was Vofe born?"}],
        tools=[t.schema() for t in TOOLS],
        max_tokens=64,
    )
    msg = resp.choices[0].message
    assert resp.choices[0].finish_reason == "tool_calls"
    got = [(c.function.name, json.loads(c.function.arguments)) for c in msg.tool_calls]
    assert got == [(c.name, c.arguments) for c in calls(fmt, 0)]
    fed = fmt.decode(engine.fed[0][0])
    assert fed == fmt.render_text([Message("user", "Where was Vofe born?")], TOOLS, True)


def test_scripted_expert_replies_in_the_family_format(fmt):
    """World expert episodes on a native checkpoint: the scripted engine finds the script by
    the rendered opening, counts turns by the template's generation prompts and writes each
    turn as the family's dialect does, ending with its stop token."""
    from arcforge.rollout.policies import ScriptedEngine

    opening = "Who was born in Vofe?"
    script = [Message("assistant", "", tool_calls=calls(fmt, 0)), Message("assistant", "Keld.")]
    engine = ScriptedEngine(fmt.tokenizer, {opening: script, "Another question?": script[1:]})
    params = SamplingParamsFor(fmt)
    first = [Message("user", opening)]
    (out,) = engine.generate([fmt.prompt_ids(first, TOOLS)], params)
    assert out.finish_reason == "stop"
    parsed = fmt.parse_ids(list(out.token_ids), TOOLS)
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [
        (c.name, c.arguments) for c in calls(fmt, 0)
    ]
    obs = [Message("tool", lookup("Vofe"), tool_call_id="call_0", name="lookup")]
    history = [*first, Message("assistant", "", tool_calls=calls(fmt, 0)), *obs]
    (out2,) = engine.generate([fmt.prompt_ids(history, TOOLS)], params)
    assert fmt.parse_ids(list(out2.token_ids), TOOLS).content.strip() == "Keld."


def SamplingParamsFor(fmt: NativeFormat):
    from arcforge.rollout.engines.base import SamplingParams

    return SamplingParams(max_new_tokens=256, stop_token_ids=tuple(fmt.stop_ids()))
