"""``python -m memorysync_local._cli``: the ``memorysync-local`` command."""

from memorysync_local._cli import main

raise SystemExit(main())
