"""Tokenizer training and loading.

`train_tokenizer` builds a byte-level BPE with the `tokenizers` library: the ByteLevel
pre-tokenizer maps every byte to a printable symbol and the 256-symbol alphabet is always in the
vocabulary, so any string (any unicode, any bytes of a UTF-8 text) encodes and decodes back
exactly. Every chat special token (arcforge.chat.tokens) is a single added token.

`space_split` isolates some spaces before BPE sees them. Byte-level BPE glues a word's leading
space into its first token, so the name in "Where was Vofe born?" starts with the token " V"
while the same name after a JSON quote ('"entity": "Vofe') starts with "V": copying it into a
tool call means mapping one id to another, and the demo model gets that first token wrong (70
of the RL checkpoint's 72 failed lookups on 150 held-out tool tasks were "unknown entity",
mostly a mis-copied first letter). With "upper" a space before a capital letter is
its own token, so a name is the same ids wherever it appears (+7% tokens on the world corpus);
"letter" does the same for every word (+25%). Digits are already split from their space.
Off by default: in one demo run with "upper" failed lookups kept the first letter and invented
the rest, and SFT TIR fell 0.373 -> 0.020 while reasoning rose (docs/experiments.md, "Teaching
a tiny model to copy").

`load_tokenizer` opens any local HF tokenizer directory. A foreign tokenizer (a real checkpoint's)
gets the chat special tokens it lacks added, and the count is returned so the caller can resize
the model's embeddings (see arcforge.model.checkpoint.resize_for_tokenizer).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from arcforge.chat.jinja import CHAT_TEMPLATE
from arcforge.chat.tokens import BOS, EOS, PAD, SPECIAL_TOKENS

DEFAULT_MAX_LENGTH = 4096
CHAT_SETTINGS_FILE = "arcforge_chat.json"  # a native checkpoint's template kwargs and dialect
# space_split name -> the regex of spaces that become their own pre-token (None: none do)
SPACE_SPLITS = {"none": None, "upper": r" (?=\p{Lu})", "letter": r" (?=\p{L})"}


def train_tokenizer(
    texts: Iterable[str],
    vocab_size: int,
    special_tokens: list[str] = SPECIAL_TOKENS,
    model_max_length: int = DEFAULT_MAX_LENGTH,
    space_split: str = "none",
) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE tokenizer.

    Args:
        texts: the training corpus (any iterable of strings; consumed once).
        vocab_size: total vocabulary size including the 256 byte symbols and the special tokens.
        special_tokens: tokens that must each be one id; must contain PAD, BOS and EOS.
        model_max_length: the context length recorded on the tokenizer.
        space_split: "none", "upper" or "letter": which spaces are split off the word after
            them (see the module docstring).

    Returns:
        A transformers fast tokenizer with pad/bos/eos set; the rest of `special_tokens` are its
        extra special tokens.
    """
    missing = [t for t in (PAD, BOS, EOS) if t not in special_tokens]
    if missing:
        raise ValueError(f"special_tokens must include {missing}")
    floor = 256 + len(special_tokens)
    if vocab_size < floor:
        raise ValueError(f"vocab_size {vocab_size} < {floor} (256 bytes + special tokens)")
    if space_split not in SPACE_SPLITS:
        raise ValueError(f"space_split must be one of {sorted(SPACE_SPLITS)}, got {space_split!r}")
    tok = Tokenizer(models.BPE())
    # Digits are split one by one before the byte-level split (as Llama 3 / DeepSeek do), so
    # "589" is three tokens: arithmetic and copying numbers become learnable for tiny models.
    pre = [
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ]
    if SPACE_SPLITS[space_split]:
        pre.insert(0, pre_tokenizers.Split(Regex(SPACE_SPLITS[space_split]), "isolated"))
    tok.pre_tokenizer = pre_tokenizers.Sequence(pre)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    extra = [t for t in special_tokens if t not in (PAD, BOS, EOS)]
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        extra_special_tokens=extra,
        model_max_length=model_max_length,
        clean_up_tokenization_spaces=False,
    )


def save_tokenizer(tok: PreTrainedTokenizerFast, out_dir: str | Path) -> Path:
    """Write the tokenizer as a `save_pretrained` directory; returns the directory.

    The tokenizer's `chat_template` is set to arcforge's (arcforge.chat.jinja), so
    `apply_chat_template` and any server's chat endpoint render the format the model was trained
    on; transformers 5 writes it to `chat_template.jinja`, and it is also kept under
    `chat_template` in tokenizer_config.json for readers that only look there.

    transformers 5 writes `tokenizer_class: TokenizersBackend` and a list under
    `extra_special_tokens`, which transformers 4.x (what many vLLM builds pin) cannot read. We
    rewrite both to the spelling every version understands: `PreTrainedTokenizerFast` and
    `additional_special_tokens` (transformers 5 maps the latter back on load).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    native = getattr(getattr(tok, "arcforge_chat_format", None), "name", "") == "native"
    if not native:
        tok.chat_template = CHAT_TEMPLATE
    tok.save_pretrained(str(out))
    cfg_path = out / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    if cfg.get("tokenizer_class") == "TokenizersBackend":
        cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    if isinstance(cfg.get("extra_special_tokens"), list):
        cfg["additional_special_tokens"] = cfg.pop("extra_special_tokens")
    cfg["chat_template"] = tok.chat_template
    cfg_path.write_text(json.dumps(cfg, indent=2, ensure_ascii=False) + "\n")
    if native:
        fmt = tok.arcforge_chat_format
        settings = {
            "format": "native",
            "template_kwargs": dict(fmt.template_kwargs),
            "dialect": fmt.dialect.name,
        }
        (out / CHAT_SETTINGS_FILE).write_text(json.dumps(settings, indent=2) + "\n")
    return out


def saved_chat_settings(path: str | Path) -> dict[str, Any]:
    """The chat format a checkpoint was trained in (`arcforge_chat.json`, written by
    `save_tokenizer` for a native-format tokenizer); {} for a checkpoint without one."""
    f = Path(path) / CHAT_SETTINGS_FILE
    if not f.is_file():
        return {}
    try:
        data = json.loads(f.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{f}: not valid JSON ({e})") from None
    if not isinstance(data, dict) or not isinstance(data.get("template_kwargs", {}), dict):
        raise ValueError(f"{f}: expected {{format, template_kwargs: {{...}}, dialect}}")
    return data


def add_chat_tokens(
    tok: PreTrainedTokenizerFast, special_tokens: list[str] = SPECIAL_TOKENS
) -> int:
    """Add the chat special tokens `tok` lacks (pad too, if it has none); returns how many."""
    vocab = tok.get_vocab()
    before = len(tok)
    missing = [t for t in special_tokens if t not in vocab]
    to_add: dict[str, object] = {}
    if tok.pad_token is None:
        to_add["pad_token"] = PAD
    extra = [t for t in missing if t != PAD or "pad_token" not in to_add]
    if extra:
        to_add["extra_special_tokens"] = extra
    if to_add:
        tok.add_special_tokens(to_add, replace_extra_special_tokens=False)
    return len(tok) - before


def generation_eos_ids(path: str | Path) -> list[int]:
    """The eos ids of a checkpoint's `generation_config.json` (int or list), [] without one."""
    f = Path(path) / "generation_config.json"
    if not f.is_file():
        return []
    eos = json.loads(f.read_text()).get("eos_token_id")
    if eos is None:
        return []
    return [int(e) for e in (eos if isinstance(eos, list) else [eos])]


def load_tokenizer(
    path: str | Path,
    chat_format: str = "auto",
    template_kwargs: dict | None = None,
    dialect: str | None = None,
) -> tuple[PreTrainedTokenizerFast, int]:
    """Load a tokenizer from a local directory and attach its chat format.

    Args:
        path: a directory written by `save_pretrained` (ours or any HF checkpoint's).
        chat_format: "arcforge" adds arcforge's chat special tokens the tokenizer lacks (the
            model's embeddings must then grow); "native" keeps the checkpoint's own template,
            tokens and dialect untouched; "auto" is arcforge for a tokenizer that carries
            arcforge's template (or none at all) and native otherwise (arcforge.chat.formats).
        template_kwargs, dialect: the native format's template kwargs and tool-call dialect.
            A checkpoint arcforge saved in the native format carries the ones it was trained
            with (`arcforge_chat.json`): they apply unless given here (given kwargs are merged
            over the saved ones), so `arcforge eval`, `chat` and `serve` on a stage checkpoint
            render what training rendered.

    Returns:
        (tokenizer, n_added): n_added > 0 means the model's embeddings must be resized.
    """
    from arcforge.chat.formats import attach_format, is_arcforge_tokenizer

    p = Path(path)
    if not p.is_dir():
        raise FileNotFoundError(f"tokenizer directory not found: {p}")
    tok = AutoTokenizer.from_pretrained(str(p), local_files_only=True)
    saved = saved_chat_settings(p)
    if chat_format == "auto" and saved.get("format") in ("native", "arcforge"):
        chat_format = saved["format"]
    if chat_format == "native":
        template_kwargs = {**saved.get("template_kwargs", {}), **(template_kwargs or {})}
        dialect = dialect or saved.get("dialect")
    if chat_format == "auto":
        native = not is_arcforge_tokenizer(tok) and bool(getattr(tok, "chat_template", None))
        chat_format = "native" if native else "arcforge"
    n_added = 0
    if chat_format == "arcforge":
        n_added = add_chat_tokens(tok)
        attach_format(tok, "arcforge")
    else:
        attach_format(tok, "native", template_kwargs, dialect, generation_eos_ids(p))
    return tok, n_added
