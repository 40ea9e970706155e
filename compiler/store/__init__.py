"""Durable conversations: checkpoint records (encode, hash chain, decode), the store
contract with the in-memory store, the SQLite store and JSONL export/import."""
