"""Provider wire formats: serialization of a finished ModelRequest only."""
