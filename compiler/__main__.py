"""``python -m compiler``: the ``prefixlock`` command line."""

from __future__ import annotations

from .cli import main

raise SystemExit(main())
