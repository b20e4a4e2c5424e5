"""``python -m memorysync_local._cli``: the ``memorysync-local`` command."""

from memorysync_local._cli.commands import main

raise SystemExit(main())
