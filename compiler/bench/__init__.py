"""``prefixlock bench``: seeded synthetic conversations, measurements and the report."""
