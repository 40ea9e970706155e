"""Provider prompt-cache rules, the cache simulator and token counting."""
