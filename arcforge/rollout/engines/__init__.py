"""Inference engines: token ids in, sampled token ids and their logprobs out.

- base.py: the `Engine` protocol, `SamplingParams`, `Completion` and the logprob convention;
- local.py: `LocalEngine`, in-process PyTorch, over decoder.py's decode loops, with speculative
  decoding (spec_decode.py) and its MTP head alignment (mtp_align.py);
- http.py: `ServerEngine`, any OpenAI-compatible `/v1/completions` server;
- server_process.py: what the engines that start an inference server share (`ServerProcess`,
  `export_checkpoint`); vllm.py (`VLLMEngine`) and sglang.py (`SGLangEngine`) build on it;
- factory.py: `make_engine`, the engine a config's `engine:` names.
"""
