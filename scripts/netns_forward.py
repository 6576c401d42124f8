"""Relay TCP connections across a network namespace through a Unix socket (test setup only).

``unix-to-tcp SOCKET HOST PORT``: accept on the Unix socket SOCKET, connect to HOST:PORT.
``tcp-to-unix HOST PORT SOCKET``: accept on HOST:PORT, connect to the Unix socket SOCKET.
A Unix socket is a file, visible from every network namespace: one relay in the host's namespace
and one inside a test namespace let commands there reach a service on the host's loopback
(scripts/start_sshd.sh uses it so that Slurm's commands on the login host reach slurmctld).
"""

from __future__ import annotations

import asyncio
import sys


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.close()


async def main(argv: list[str]) -> None:
    """Serve one relay until killed."""
    mode = argv[0]

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            if mode == "unix-to-tcp":
                r2, w2 = await asyncio.open_connection(argv[2], int(argv[3]))
            else:
                r2, w2 = await asyncio.open_unix_connection(argv[3])
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, w2), _pipe(r2, writer))

    if mode == "unix-to-tcp":
        server = await asyncio.start_unix_server(handle, argv[1])
    elif mode == "tcp-to-unix":
        server = await asyncio.start_server(handle, argv[1], int(argv[2]))
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
