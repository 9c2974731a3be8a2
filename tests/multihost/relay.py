"""A TCP relay process: ``python -m tests.multihost.relay LISTEN_HOST LISTEN_PORT TARGET_HOST
TARGET_PORT``. PostgreSQL and Redis listen on 127.0.0.1 only; relayed on the bridge's address,
they are servers the hosts in network namespaces reach over the network, as they would reach
another machine. Prints ``listening`` once it accepts connections."""

from __future__ import annotations

import asyncio
import contextlib
import sys

CHUNK = 256 * 1024


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        # one side gone: the connection is over both ways (PostgreSQL, Redis need no half-close)
        with contextlib.suppress(Exception):
            writer.close()


async def _serve(listen: tuple[str, int], target: tuple[str, int]) -> None:
    async def connect(client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter) -> None:
        try:
            server_in, server_out = await asyncio.open_connection(*target)
        except OSError:
            client_out.close()
            return
        await asyncio.gather(_pump(client_in, server_out), _pump(server_in, client_out))

    server = await asyncio.start_server(connect, *listen, reuse_address=True)
    print("listening", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str]) -> None:
    listen_host, listen_port, target_host, target_port = argv
    asyncio.run(_serve((listen_host, int(listen_port)), (target_host, int(target_port))))


if __name__ == "__main__":
    main(sys.argv[1:])
