"""Review tooling: scenarios, replay, the invariant checker, verify, calls.md rendering,
body comparison and diff, source locations and store inspection."""
