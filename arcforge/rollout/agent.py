"""The agent loop (ReAct with interleaved thinking): episodes -> token-in-token-out Trajectories.

    env.reset -> render (+ generation prompt) -> engine.generate (stops at <|end|>) -> decode
    -> parse_assistant -> env.step -> observation tokens -> ... until done / max_turns / budget

`run_episodes` steps every active episode together: each turn is ONE batched
`engine.generate` call over all episodes still running (the RL throughput path);
`run_episode` is the same loop for one episode.

TITO. The Trajectory's segments are the exact token stream the engine saw and produced:
- the first prompt is rendered once (`render` + `encode_spans`), split into "env" segments
  (system, tool schemas, user text) and "template" segments (headers, separators), loss 0;
- each completion is appended exactly as sampled, as one "model" segment with loss 1, the
  engine's logprobs and `policy_version` = `engine.version` read just before that generate call
  (so a weight update between turns shows up as segments with different versions), or the
  `Completion.version` the engine reports (exact when other threads update the weights);
- after each step only the new text is tokenized: `observation_spans` of the tool/user
  messages plus the next generation prompt, again as env/template segments with loss 0.
So `trajectory.token_ids[:k]` is, at every turn, exactly the prompt that turn was fed.
Every segment records the engine version current when it was appended.

Thinking. Interleaved: every assistant step of the episode may think. An episode is one user
turn, and the template keeps the current turn's thinking in both preserved and dropped mode,
so within an episode nothing sampled is ever dropped and the TITO stream equals a re-render
of `Trajectory.messages` (given canonical tokenization). If an environment sends a new user
message mid-episode and `thinking.preserve` is False, the TITO stream still keeps what was
sampled (a re-render would drop it); see arcforge.chat.encoding. `cfg.turn_thinking` forces the
per-turn switch (`Message.thinking`) on every user message of the episode: False puts the empty
think block in each generation prompt, True forces thinking, None keeps the env's setting.

Context budget and compaction. Before each generation, prompt + max_new_tokens must fit
`context_budget`. If not, `context.compact` folds / discards old observations (lazily: only
when over budget, since each compaction breaks the token prefix) and the context is
re-rendered. The honest record chosen here: the Trajectory's segments are always exactly the
final model input plus what was sampled after it. The re-rendered prefix (including earlier
assistant messages, now plain context) is loss 0 with no logprobs; model tokens sampled before
the compaction are no longer in the stream and so are not trained (their count is reported in
`reward_details["agent"]["untrained_model_tokens"]`). `Trajectory.messages` keeps the whole
uncompacted episode; `episode_to_messages` rebuilds what the model last saw from the tokens.

Bad model output never raises: parse errors become an `error: ...` tool observation (and the
assistant message is kept with train=False in `messages`, for SFT export); a reply with parse
errors and no well-formed call is not sent to an environment that has tools (the model gets the
error and another turn), while a tool-less environment (math) takes any reply as the answer.
finish_reason: "answer" (env done), "max_turns", "context" (nothing more fits), "length" (a
reply cut by max_new_tokens, for overlong masking), "error" (the environment raised in step or
verify; the message is in reward_details["error"]).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from arcforge.chat.encoding import encode, encode_spans, observation_spans
from arcforge.chat.formats import ChatFormat, chat_format
from arcforge.chat.parse import parse_assistant, to_message
from arcforge.chat.template import (
    TOOLS_HEADER,
    Span,
    ThinkingConfig,
    last_user_index,
    render,
    turn_thinking,
)
from arcforge.chat.tokens import END, ROLE_TOKENS
from arcforge.envs.base import Environment
from arcforge.rollout.context import ContextConfig, compact
from arcforge.rollout.engines.base import Completion, Engine, SamplingParams
from arcforge.rollout.prompts import stop_token_ids
from arcforge.types import Message, Reward, Segment, Task, Tool, Trajectory

_ENV_KINDS = frozenset({"system", "tools", "user", "observation"})


@dataclass(frozen=True)
class AgentConfig:
    """How episodes run.

    max_turns: assistant replies per episode. max_new_tokens: per reply.
    context_budget: the most tokens the model may see: prompt + max_new_tokens must fit.
    thinking: the template's thinking config. turn_thinking: force Message.thinking on user
    messages (None: keep the env's). keep_recent_observations, fold_chars, note_chars: context
    management (arcforge.rollout.context). temperature, top_p, top_k, seed,
    tempered_logprobs: SamplingParams.
    """

    max_turns: int = 8
    max_new_tokens: int = 256
    context_budget: int = 4096
    thinking: ThinkingConfig = ThinkingConfig()
    turn_thinking: bool | None = None
    keep_recent_observations: int = 2
    fold_chars: int = 80
    note_chars: int = 160
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    tempered_logprobs: bool = False

    def __post_init__(self) -> None:
        if self.max_turns < 1 or self.max_new_tokens < 1:
            raise ValueError("max_turns and max_new_tokens must be >= 1")
        if self.context_budget <= self.max_new_tokens:
            raise ValueError(
                f"context_budget ({self.context_budget}) must exceed "
                f"max_new_tokens ({self.max_new_tokens})"
            )

    def sampling(self, stop_token_ids: Sequence[int], step: int = 0) -> SamplingParams:
        """SamplingParams for batched step `step` (the seed moves on every step)."""
        seed = None if self.seed is None else self.seed + 100_003 * step
        return SamplingParams(
            self.max_new_tokens,
            self.temperature,
            self.top_p,
            self.top_k,
            tuple(stop_token_ids),
            seed,
            1,
            self.tempered_logprobs,
        )

    @property
    def context(self) -> ContextConfig:
        return ContextConfig(self.keep_recent_observations, self.fold_chars, self.note_chars)


@dataclass
class _Episode:
    """The running state of one episode. `context` renders to the current model input."""

    task: Task
    env: Environment
    group_id: str
    tools: list[Tool]
    context: list[Message]
    history: list[Message]
    segments: list[Segment] = field(default_factory=list)
    turns: int = 0
    n_calls: int = 0
    finish: str = ""
    parse_errors: int = 0
    compactions: int = 0
    untrained: int = 0  # sampled tokens dropped from the stream by compaction
    error: str | None = None

    @property
    def ids(self) -> list[int]:
        return [t for s in self.segments for t in s.token_ids]


def _segments(spans: list[Span], tokenizer: Any, version: int) -> list[Segment]:
    """Untrained segments of rendered spans: adjacent spans of one source merged."""
    out: list[Segment] = []
    for span, ids in zip(spans, encode_spans(spans, tokenizer)):
        if not ids:
            continue
        src = "env" if span.kind in _ENV_KINDS else "template"
        if out and out[-1].source == src:
            out[-1].token_ids.extend(ids)
            out[-1].loss_mask.extend([0] * len(ids))
        else:
            out.append(Segment(list(ids), src, [0] * len(ids), None, version))
    return out


def _force_thinking(msgs: list[Message], cfg: AgentConfig) -> list[Message]:
    if cfg.turn_thinking is None:
        return list(msgs)
    return [replace(m, thinking=cfg.turn_thinking) if m.role == "user" else m for m in msgs]


def _think_now(context: list[Message], cfg: AgentConfig) -> bool:
    i = last_user_index(context)
    return turn_thinking(context[i] if i >= 0 else None, cfg.thinking)


def _opening(task: Task, env: Environment, cfg: AgentConfig) -> tuple[list[Message], list[Span]]:
    """Reset `env` for `task`: its opening messages and their rendered first prompt."""
    msgs = _force_thinking(env.reset(task), cfg)
    return msgs, render(msgs, list(env.tools), cfg.thinking, True)


def _native(tok: Any) -> ChatFormat | None:
    """The tokenizer's native chat format, or None for arcforge's own."""
    fmt = chat_format(tok)
    return fmt if fmt.name == "native" else None


def _prompt_segment(ids: list[int], version: int) -> list[Segment]:
    return [Segment(list(ids), "template", [0] * len(ids), None, version)] if ids else []


def _start(task: Task, env: Environment, tok: Any, cfg: AgentConfig, version: int) -> _Episode:
    fmt = _native(tok)
    if fmt is not None:
        msgs = _force_thinking(env.reset(task), cfg)
        ep = _Episode(task, env, task.id, list(env.tools), msgs, list(msgs))
        ep.segments = _prompt_segment(fmt.prompt_ids(msgs, ep.tools), version)
        return ep
    msgs, spans = _opening(task, env, cfg)
    ep = _Episode(task, env, task.id, list(env.tools), msgs, list(msgs))
    ep.segments = _segments(spans, tok, version)
    return ep


def first_prompt_ids(
    task: Task, env: Environment, tokenizer: Any, cfg: AgentConfig = AgentConfig()
) -> list[int]:
    """The ids an episode's first reply is sampled after: `env.reset(task)`'s messages with the
    environment's tools, rendered as `run_episodes` renders them (one-turn users of agent tasks,
    such as distillation, prompt the model exactly as the agent loop does)."""
    fmt = _native(tokenizer)
    if fmt is not None:
        msgs = _force_thinking(env.reset(task), cfg)
        return fmt.prompt_ids(msgs, list(env.tools))
    return list(encode(_opening(task, env, cfg)[1], tokenizer).input_ids)


def _fit(ep: _Episode, tok: Any, cfg: AgentConfig, version: int) -> None:
    """Make the next prompt + reply fit the budget (compacting), or finish with "context"."""
    if len(ep.ids) + cfg.max_new_tokens <= cfg.context_budget:
        return

    fmt = _native(tok)

    def measure(msgs: list[Message]) -> int:
        if fmt is not None:
            return len(fmt.prompt_ids(msgs, ep.tools)) + cfg.max_new_tokens
        spans = render(msgs, ep.tools, cfg.thinking, True)
        return len(encode(spans, tok).input_ids) + cfg.max_new_tokens

    done = compact(ep.context, measure, cfg.context_budget, cfg.context)
    if done.size > cfg.context_budget:
        ep.finish = "context"
        return
    ep.untrained += sum(len(s.token_ids) for s in ep.segments if s.source == "model")
    ep.compactions += 1
    ep.context = done.messages
    if fmt is not None:
        ep.segments = _prompt_segment(fmt.prompt_ids(ep.context, ep.tools), version)
        return
    ep.segments = _segments(render(ep.context, ep.tools, cfg.thinking, True), tok, version)


def _step_env(ep: _Episode, msg: Message, errors: list[str]) -> tuple[list[Message], bool]:
    """The observations a reply causes and whether the episode is done."""
    err_obs = [Message("tool", f"error: {e}", name="parser") for e in errors]
    if errors and not msg.tool_calls and ep.tools:
        return err_obs, False  # not an action: tell the model what was wrong
    try:
        result = ep.env.step(msg)
    except Exception as exc:  # an environment bug must not take down the whole batch
        ep.error = f"step raised {type(exc).__name__}: {exc}"
        return [], True
    return err_obs + list(result.observations), result.done


def _act(ep: _Episode, out: Completion, tok: Any, cfg: AgentConfig, version: int) -> None:
    """Append one sampled reply, run it in the environment, append the observation tokens."""
    n = len(out.token_ids)
    version = version if out.version is None else out.version  # exact under concurrent updates
    ep.segments.append(Segment(list(out.token_ids), "model", [1] * n, list(out.logprobs), version))
    ep.turns += 1
    fmt = _native(tok)
    if fmt is not None:
        parsed = fmt.parse_ids(list(out.token_ids), ep.tools)
    else:
        parsed = parse_assistant(tok.decode(out.token_ids, skip_special_tokens=False))
    msg = to_message(parsed)
    for call in msg.tool_calls:
        call.id, ep.n_calls = f"call_{ep.n_calls}", ep.n_calls + 1
    if out.finish_reason == "length":
        ep.history.append(replace(msg, train=False))
        ep.finish = "length"
        return
    if parsed.errors:
        ep.parse_errors += len(parsed.errors)
        msg.train = False
    obs, done = _step_env(ep, msg, parsed.errors)
    ep.history.append(msg)
    ep.context.append(msg)
    if ep.error is not None:
        ep.finish = "error"
    elif done:
        ep.finish = "answer"
    elif ep.turns >= cfg.max_turns:
        ep.finish = "max_turns"
    if ep.finish:
        return
    obs = _force_thinking(obs, cfg)
    if fmt is not None:
        ids = fmt.observation_ids(ep.context, obs, ep.tools)
        ep.history += obs
        ep.context += obs
        ep.segments.append(Segment(ids, "env", [0] * len(ids), None, version))
        return
    ep.history += obs
    ep.context += obs
    spans = observation_spans(obs, cfg.thinking, next_turn_thinking=_think_now(ep.context, cfg))
    ep.segments += _segments(spans, tok, version)


def _trajectory(ep: _Episode) -> Trajectory:
    reward = Reward(0.0, {})
    if ep.error is None:
        try:
            reward = ep.env.verify()
        except Exception as exc:
            ep.error, ep.finish = f"verify raised {type(exc).__name__}: {exc}", "error"
    details = dict(reward.details)
    if ep.error is not None:
        details["error"] = ep.error
    details["agent"] = {
        "turns": ep.turns,
        "parse_errors": ep.parse_errors,
        "compactions": ep.compactions,
        "untrained_model_tokens": ep.untrained,
    }
    return Trajectory(
        ep.segments, ep.history, float(reward.score), details, ep.task.id, ep.group_id, ep.finish
    )


def _run(
    engine: Engine, tok: Any, pairs: list[tuple[Task, Environment]], cfg: AgentConfig
) -> list[Trajectory]:
    eps = [_start(task, env, tok, cfg, engine.version) for task, env in pairs]
    stops = stop_token_ids(tok)
    step = 0
    while True:
        for ep in eps:
            if not ep.finish:
                _fit(ep, tok, cfg, engine.version)
        active = [ep for ep in eps if not ep.finish]
        if not active:
            break
        version = engine.version  # the weights these replies are sampled with
        outs = engine.generate([ep.ids for ep in active], cfg.sampling(stops, step))
        for ep, out in zip(active, outs):
            _act(ep, out, tok, cfg, version)
        step += 1
    return [_trajectory(ep) for ep in eps]


def run_episode(
    engine: Engine, tokenizer: Any, env: Environment, task: Task, cfg: AgentConfig = AgentConfig()
) -> Trajectory:
    """Run one episode of `task` in `env` (the caller owns and closes `env`).

    Returns:
        The Trajectory (TITO segments, messages, reward from env.verify(), finish_reason).
    """
    return _run(engine, tokenizer, [(task, env)], cfg)[0]


def run_episodes(
    engine: Engine,
    tokenizer: Any,
    env_factory: Callable[[Task], Environment],
    tasks: Sequence[Task],
    cfg: AgentConfig = AgentConfig(),
    group_size: int = 1,
) -> list[Trajectory]:
    """Run `group_size` episodes per task, all stepped together (one generate call per turn).

    Args:
        engine: any Engine (LocalEngine, ServerEngine, a scripted policy).
        tokenizer: the tokenizer of the engine's model (with the chat special tokens).
        env_factory: task -> a fresh environment (e.g. arcforge.envs.registry.env_factory).
        tasks: the tasks.
        cfg: the agent config.
        group_size: episodes per task (a GRPO group); they share `group_id` = task.id.

    Returns:
        Trajectories in task order, each task's group adjacent. Every environment is closed.
    """
    pairs = [(t, env_factory(t)) for t in tasks for _ in range(group_size)]
    try:
        return _run(engine, tokenizer, pairs, cfg)
    finally:
        for _, env in pairs:
            env.close()


def episode_to_messages(trajectory: Trajectory, tokenizer: Any) -> list[Message]:
    """The conversation the trajectory's token stream holds (what the model last saw).

    Blocks are split at role-token ids outside model segments (so text the model or a tool
    wrote cannot fake a boundary); assistant blocks are parsed with `parse_assistant` from
    their sampled tokens (or from the rendered text when they were re-rendered context). The
    tools section of the system block is left out, as are ids and train flags. Without a
    compaction this equals `trajectory.messages` in role, content, reasoning and tool calls.
    In a checkpoint's native format the block boundaries are the template's, so the episode's
    messages are returned.
    """
    if _native(tokenizer) is not None:
        return [replace(m, train=True) for m in trajectory.messages]
    roles = {int(tokenizer.convert_tokens_to_ids(t)): r for r, t in ROLE_TOKENS.items()}
    end_id = int(tokenizer.convert_tokens_to_ids(END))
    blocks: list[tuple[str, list[int], list[int]]] = []  # (role, all ids, model ids)
    for seg in trajectory.segments:
        for t in seg.token_ids:
            if seg.source != "model" and t in roles:
                blocks.append((roles[t], [], []))
            elif blocks:
                blocks[-1][1].append(t)
                if seg.source == "model":
                    blocks[-1][2].append(t)
    out: list[Message] = []
    for role, ids, model_ids in blocks:
        if role == "assistant":
            if ids == [] or (not model_ids and end_id not in ids):
                continue  # a generation prompt nothing was sampled after
            text = tokenizer.decode(model_ids or ids, skip_special_tokens=False)
            out.append(to_message(parse_assistant(text.removeprefix("\n"))))
            continue
        body = ids[: ids.index(end_id)] if end_id in ids else ids
        text = tokenizer.decode(body, skip_special_tokens=False).removeprefix("\n")
        if role == "system":
            if text.startswith(TOOLS_HEADER):
                continue  # a block holding only the tools
            text = text.split("\n\n" + TOOLS_HEADER, 1)[0]
        out.append(Message(role, text))  # type: ignore[arg-type]
    return out
