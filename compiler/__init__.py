"""prefixlock's provider-independent pipeline: specs, bundle, history, checkpoints."""
