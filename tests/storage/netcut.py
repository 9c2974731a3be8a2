"""A TCP relay that cuts a real connection once, mid-body: what a dropped Wi-Fi does to an
upload. Every connection after the cut is relayed whole."""

from __future__ import annotations

import contextlib
import socket
import threading


class CuttingProxy:
    """Relays 127.0.0.1:<port> to ``upstream``; the connection that carries client byte
    number ``cut_after`` is closed at once (both ways, with a reset), once."""

    def __init__(self, upstream: tuple[str, int], cut_after: int) -> None:
        self.upstream = upstream
        self.cut_after = cut_after
        self.sent = 0  # client → server bytes relayed, all connections
        self.cuts = 0
        self.lock = threading.Lock()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket, upstream: bool) -> None:
        try:
            while data := source.recv(65536):
                if upstream:
                    with self.lock:
                        cut = not self.cuts and self.sent + len(data) >= self.cut_after
                        if cut:
                            self.cuts += 1
                            # half of this read goes through, then the line drops
                            data = data[: max(0, self.cut_after - self.sent)]
                        self.sent += len(data)
                    if cut:
                        target.sendall(data)
                        for sock in (source, target):
                            sock.setsockopt(
                                socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0"
                            )
                            # close() alone sends nothing while the other direction's thread
                            # is blocked in recv() on the same socket (it holds the file): the
                            # server would wait for the rest of the body for good, holding its
                            # request thread and database connection. shutdown() ends both
                            # directions at once and wakes that recv().
                            with contextlib.suppress(OSError):
                                sock.shutdown(socket.SHUT_RDWR)
                            sock.close()
                        return
                target.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, target):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.closed = True
        self.listener.close()
