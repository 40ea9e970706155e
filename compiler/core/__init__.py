"""The values every stage shares: errors, the canonical JSON encoder, JSON paths,
canonical messages and the provider-independent ModelRequest. Imports nothing else of
prefixlock."""
