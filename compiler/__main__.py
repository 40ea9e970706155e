"""``python -m compiler``: the ``prefixlock`` command line."""

from __future__ import annotations

from compiler.cli import main

raise SystemExit(main())
