"""Request dialects other than chat completions, sans-IO (issue 29).

Each dialect (OpenAI's Responses API, Anthropic's Messages API) has one strict parser
(``*_schema``), one translation of its request into the chat-completions request the
pipeline understands and of a chat answer back (``*_translate``), one stateful stream
translator (``*_stream``), and its own error envelope and rate-limit headers
(``envelopes``, ``ratelimit``). Everything here is bytes or Structs in, bytes or dicts
out: no I/O, no clock read unless passed in, nothing from the pipeline's stages.
"""
