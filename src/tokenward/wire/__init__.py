"""The wire format both the pipeline and the upstream client stand on: server-sent events and the typed view of a streamed chunk. Sans-IO: bytes in, values out."""
