"""A probe that reaches HOST:PORT through the runtime's proxies and prints one JSON line.

Run inside the sandbox as ``python3 -c SOURCE MODE HOST PORT PAYLOAD``. MODE is
``connect`` (HTTP CONNECT via HTTPS_PROXY), ``http`` (absolute-URI GET via
HTTP_PROXY) or ``socks`` (SOCKS5 via ALL_PROXY); PAYLOAD is sent once a tunnel
is up (``\\r\\n`` escapes allowed). Output: {"status": ..., "reply": ...}.
"""

import base64
import ipaddress
import json
import os
import socket
import sys
import urllib.parse

MODE, HOST, PORT = sys.argv[1], sys.argv[2], int(sys.argv[3])
PAYLOAD = sys.argv[4].encode().decode("unicode_escape").encode("latin-1")
AUTHORITY = f"[{HOST}]:{PORT}" if ":" in HOST else f"{HOST}:{PORT}"


def read_all(sock):
    data = b""
    try:
        while len(data) < 65536:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    except OSError as exc:
        data += f"[{exc}]".encode()
    return data


def read_reply(sock):
    # An HTTP/1.0 request ends when the server closes; any other service
    # (Redis, PostgreSQL) answers once and keeps the connection open.
    if PAYLOAD.startswith(b"GET "):
        return read_all(sock)
    try:
        return sock.recv(4096)
    except OSError as exc:
        return f"[{exc}]".encode()


def open_proxy(variable):
    url = urllib.parse.urlsplit(os.environ[variable])
    sock = socket.create_connection((url.hostname, url.port), timeout=60)
    return url, sock


def basic(url):
    return base64.b64encode(f"{url.username}:{url.password}".encode()).decode()


def via_connect():
    url, sock = open_proxy("HTTPS_PROXY")
    sock.sendall(
        f"CONNECT {AUTHORITY} HTTP/1.1\r\nHost: {AUTHORITY}\r\n"
        f"Proxy-Authorization: Basic {basic(url)}\r\n\r\n".encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1)
        if not chunk:
            break
        head += chunk
    status = head.split(b"\r\n")[0].decode("latin-1")
    if " 200 " not in status + " ":
        return status, read_all(sock)
    sock.sendall(PAYLOAD)
    return status, read_reply(sock)


def via_http():
    url, sock = open_proxy("HTTP_PROXY")
    sock.sendall(
        f"GET http://{AUTHORITY}/ HTTP/1.1\r\nHost: {AUTHORITY}\r\n"
        f"Proxy-Authorization: Basic {basic(url)}\r\nConnection: close\r\n\r\n".encode()
    )
    data = read_all(sock)
    return data.split(b"\r\n")[0].decode("latin-1"), data


def via_socks():
    url, sock = open_proxy("ALL_PROXY")
    sock.sendall(b"\x05\x01\x02")
    if sock.recv(2) != b"\x05\x02":
        return "socks: no user/password method", b""
    user, password = url.username.encode(), url.password.encode()
    sock.sendall(b"\x01" + bytes([len(user)]) + user + bytes([len(password)]) + password)
    if sock.recv(2) != b"\x01\x00":
        return "socks: authentication failed", b""
    try:
        address = ipaddress.ip_address(HOST)
        kind = b"\x01" if address.version == 4 else b"\x04"
        target = kind + address.packed
    except ValueError:
        target = b"\x03" + bytes([len(HOST)]) + HOST.encode()
    sock.sendall(b"\x05\x01\x00" + target + PORT.to_bytes(2, "big"))
    reply = sock.recv(4)
    if len(reply) < 2 or reply[1] != 0:
        return f"socks: reply {reply[1] if len(reply) > 1 else None}", b""
    sock.recv(6 if reply[3:4] == b"\x01" else 18)
    sock.sendall(PAYLOAD)
    return "socks: granted", read_reply(sock)


try:
    STATUS, REPLY = {"connect": via_connect, "http": via_http, "socks": via_socks}[MODE]()
except OSError as exc:
    STATUS, REPLY = f"error: {exc}", b""
print(json.dumps({"status": STATUS, "reply": REPLY.decode("latin-1")}))
