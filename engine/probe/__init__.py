"""The live probe: a read-only Unix-socket stream of the journal, served from inside the agent.

`server` (the Probe an agent embeds), `loop` (its I/O thread), `agent_send` (the agent's thread sending
a Pipeline call's events itself; `fold_send` a fold client's turn, `agent_limits` the bounds of both; `journal_lane` the journal's events handed to it one call deep), `queues` (the ring and each client's fill), `client_state` (a
client's cursors and buffers), `handshake` (admitting clients), `endpoint` (the socket file),
`runtime_dir` (where sockets live), `redact`, `optin` (environment variables), `client` (the
inspector's side: attach) and `discover` (the agents serving a probe, for `ps`)."""
