"""Reading untrusted attachments (PDF text) in sandboxed child processes."""
