"""Runs in .venv-vllm: vLLM's own tool parser (`--tool-call-parser NAME`) on a reply.

stdin: {"tokenizer": DIR, "parser": NAME, "text": REPLY, "tools": [OpenAI tool schemas]};
stdout: {"called", "calls": [{"name", "arguments"}], "content"}."""

import json
import sys

from transformers import AutoTokenizer
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.tool_parsers import ToolParserManager

job = json.load(sys.stdin)
tok = AutoTokenizer.from_pretrained(job["tokenizer"])
req = ChatCompletionRequest(
    model="m", messages=[{"role": "user", "content": "x"}], tools=job["tools"]
)
parser = ToolParserManager.get_tool_parser(job["parser"])(tok, req.tools)
info = parser.extract_tool_calls(job["text"], req)
print(
    json.dumps(
        {
            "called": info.tools_called,
            "calls": [
                {"name": c.function.name, "arguments": json.loads(c.function.arguments)}
                for c in info.tool_calls
            ],
            "content": info.content,
        }
    )
)
