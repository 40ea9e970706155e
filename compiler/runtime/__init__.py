"""The conversation runtime: AgentRunRequest, request-context and runtime compilation
with redaction, the append-only History and the Conversation entry point."""
