"""The ``contextlab`` command: ``upload``, ``hook`` and ``watch`` talk to a server, the rest is the
engine.

The engine's commands (``replay``, ``fidelity``) run offline on a transcript; ``upload`` and
``hook session-end`` send one to a ContextLab server. Neither side imports Django.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

CLIENT_COMMANDS = ("upload", "hook")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "watch":
        from contextlab import watch_client

        return watch_client.main(args[1:])
    if args and args[0] in CLIENT_COMMANDS:
        from contextlab import upload_client

        return upload_client.main(args)
    from contextlab.engine import cli

    return cli.main(args)


if __name__ == "__main__":
    sys.exit(main())
