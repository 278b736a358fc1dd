"""The server side of a pod exec for the fake API server: the WebSocket handshake and framing
(RFC 6455, unfragmented frames as the client sends them) and Kubernetes' v5 channel protocol.

Every message is ``[channel byte] + data``: 0 stdin (client to server), 1 stdout, 2 stderr,
3 the final ``Status`` (JSON), and, in v5, ``[255, channel]`` closes a channel (the client
closes stdin this way). The command runs as a process on this host; its exit code goes on
channel 3 the way the API server reports it, then the socket is closed.
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import subprocess
import threading
from typing import IO, Any

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
V5 = "v5.channel.k8s.io"
STDIN, STDOUT, STDERR, ERROR, CLOSE = 0, 1, 2, 3, 255
TEXT, BINARY, CLOSE_FRAME, PING, PONG = 0x1, 0x2, 0x8, 0x9, 0xA


def serve_exec(handler: Any, query: dict[str, list[str]]) -> None:
    """Answer the upgrade, run ``command`` (repeated query parameter) and stream it."""
    offered = [p.strip() for p in handler.headers.get("Sec-WebSocket-Protocol", "").split(",")]
    if V5 not in offered:
        handler.send_error(400, "this fake speaks v5.channel.k8s.io only")
        return
    key = handler.headers["Sec-WebSocket-Key"]
    accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
    handler.send_response(101)
    handler.send_header("Upgrade", "websocket")
    handler.send_header("Connection", "Upgrade")
    handler.send_header("Sec-WebSocket-Accept", accept)
    handler.send_header("Sec-WebSocket-Protocol", V5)
    handler.end_headers()
    handler.close_connection = True
    Exec(handler.rfile, handler.wfile, query).run()


class Exec:
    def __init__(self, rfile: IO[bytes], wfile: IO[bytes], query: dict[str, list[str]]) -> None:
        self.rfile, self.wfile = rfile, wfile
        self.command = query.get("command", [])
        self.stdin = query.get("stdin", ["false"])[0] == "true"
        self.write_lock = threading.Lock()

    def run(self) -> None:
        try:
            proc = subprocess.Popen(
                self.command,
                stdin=subprocess.PIPE if self.stdin else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd="/",
            )
        except OSError as exc:  # what the API server says when the runtime cannot start it
            self._status(127, f"exec failed: {exc}")
            return
        threading.Thread(target=self._read_client, args=(proc,), daemon=True).start()
        pumps = [
            threading.Thread(target=self._pump, args=(stream, channel))
            for stream, channel in ((proc.stdout, STDOUT), (proc.stderr, STDERR))
        ]
        for pump in pumps:
            pump.start()
        for pump in pumps:
            pump.join()
        self._status(proc.wait(), "")

    def _pump(self, stream: IO[bytes], channel: int) -> None:
        for chunk in iter(lambda: stream.read1(65536), b""):  # type: ignore[attr-defined]
            self._send(BINARY, bytes([channel]) + chunk)

    def _read_client(self, proc: subprocess.Popen[bytes]) -> None:
        try:
            while True:
                opcode, payload = self._frame()
                if opcode == CLOSE_FRAME:
                    proc.kill()
                    return
                if opcode == PING:
                    self._send(PONG, payload)
                elif payload[:1] == bytes([STDIN]) and proc.stdin:
                    proc.stdin.write(payload[1:])
                    proc.stdin.flush()
                elif payload[:2] == bytes([CLOSE, STDIN]) and proc.stdin:
                    proc.stdin.close()
        except (OSError, ValueError, struct.error):
            return  # the client went away

    def _frame(self) -> tuple[int, bytes]:
        head = self._read(2)
        opcode, length = head[0] & 0x0F, head[1] & 0x7F
        if length == 126:
            length = struct.unpack(">H", self._read(2))[0]
        elif length == 127:
            length = struct.unpack(">Q", self._read(8))[0]
        mask = self._read(4) if head[1] & 0x80 else b"\0\0\0\0"
        data = self._read(length)
        if not length:
            return opcode, data
        key = (mask * (length // 4 + 1))[:length]
        plain = int.from_bytes(data, "big") ^ int.from_bytes(key, "big")
        return opcode, plain.to_bytes(length, "big")

    def _read(self, n: int) -> bytes:
        data = self.rfile.read(n)
        if len(data) < n:
            raise OSError("connection closed")
        return data

    def _send(self, opcode: int, payload: bytes) -> None:
        n = len(payload)
        if n < 126:
            head = struct.pack(">BB", 0x80 | opcode, n)
        elif n < 65536:
            head = struct.pack(">BBH", 0x80 | opcode, 126, n)
        else:
            head = struct.pack(">BBQ", 0x80 | opcode, 127, n)
        with self.write_lock:
            self.wfile.write(head + payload)
            self.wfile.flush()

    def _status(self, code: int, message: str) -> None:
        status: dict[str, Any] = {"metadata": {}, "status": "Success"}
        if code != 0:
            status = {
                "metadata": {},
                "status": "Failure",
                "message": message or f"command terminated with non-zero exit code: {code}",
                "reason": "NonZeroExitCode",
                "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
            }
        self._send(BINARY, bytes([ERROR]) + json.dumps(status).encode())
        self._send(CLOSE_FRAME, struct.pack(">H", 1000))
