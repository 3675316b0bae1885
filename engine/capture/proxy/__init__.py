"""`cp-inspect proxy`: a local reverse proxy that records any agent's model calls, with no change to the agent.

    routes.py         which API a path is, its upstream, which session a request belongs to
    forward.py        the forwarding core (aiohttp server + client): bytes in, bytes out, unbuffered
    exchange.py       one finished request/response pair, handed to the hook
    recording.py      the recording hook: sessions -> .cpsession + probe socket, off the forwarding path
    sse.py            SSE parsing and stream reassembly (Anthropic, OpenAI chat, Responses)
    responses_api.py  the Responses API in Chat Completions terms, for the journal
    server.py         running it: in a thread (tests, `cp-inspect run`) or in the foreground

aiohttp is imported by forward.py and server.py only, so `import engine` never needs it.
"""
