#!/usr/bin/env python3
"""hostile.py HOST PORT KEY_OTHER SECONDS - the misbehaving clients of the
soak test (bench/soak.sh), all at once against a Sluice gateway for SECONDS:

  idle      connections that open and send nothing (slot holders), reopened
  slowloris headers trickled one byte at a time
  preauth   4 MiB bodies sent to one byte short, with keys that do not exist
  badkey    requests with well-formed keys that do not exist, as fast as possible
  pipeline  a generation with 256 KiB of pipelined junk behind it
  noread    pipelined /api/tags with a tiny receive window, never read
  bigprompt 4 MiB prompts from a valid key of another tenant (KEY_OTHER)
  dupauth   two Authorization headers
  nul       a NUL byte in the request line

Prints one line per kind: attempts made.  SOAK_KINDS=a,b runs only those.  Never sleeps to synchronise; the
only waits pace the attack.  Not a test: bench/soak.sh measures what the
good clients see meanwhile."""
import os
import random
import socket
import ssl
import string
import sys
import threading
import time

host, port, key_other, seconds = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
end = time.time() + seconds
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
counts = {}
lock = threading.Lock()
B62 = string.digits + string.ascii_uppercase + string.ascii_lowercase


def count(kind):
    with lock:
        counts[kind] = counts.get(kind, 0) + 1


def crc_b62(b):
    import zlib
    c = zlib.crc32(b) & 0xffffffff
    out = ""
    for _ in range(6):
        out = B62[c % 62] + out
        c //= 62
    return out


def fake_key():
    body = "slk_" + "".join(random.choice(B62) for _ in range(12)) + "_" + \
        "".join(random.choice(B62) for _ in range(32))
    return body + crc_b62(body.encode())


def tls(rcvbuf=None):
    s = socket.socket()
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(10)
    s.connect((host, port))
    return ctx.wrap_socket(s)


def loop(kind, fn):
    def run():
        while time.time() < end:
            try:
                fn()
            except Exception:
                pass
            count(kind)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def idle():
    socks = []
    for _ in range(200):
        s = socket.socket()
        s.settimeout(5)
        s.connect((host, port))
        socks.append(s)
    time.sleep(2)  # pacing: hold them, then reopen
    for s in socks:
        s.close()


def slowloris():
    s = tls()
    for ch in "GET /api/tags HTTP/1.1\r\nHost: x\r\n":
        s.send(ch.encode())
        time.sleep(0.3)
    s.close()


def preauth():
    s = tls()
    n = 4 * 1024 * 1024
    s.send(("POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
            "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (fake_key(), n)).encode())
    chunk = b"a" * 65536
    sent = 0
    while sent < n - 1 and time.time() < end:
        sent += s.send(chunk[: min(len(chunk), n - 1 - sent)])
    time.sleep(1)
    s.close()


def badkey():
    s = tls()
    for _ in range(50):
        s.send(("GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n"
                % fake_key()).encode())
        s.recv(65536)
    s.close()


def pipeline():
    s = tls()
    body = '{"model":"m","prompt":"x","stream":true}'
    s.send(("POST /api/generate HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
            "Content-Length: %d\r\n\r\n%s" % (fake_key(), len(body), body)).encode())
    s.send(b"G" * 262144)
    time.sleep(1)
    s.close()


def noread():
    s = tls(rcvbuf=4096)
    for _ in range(300):
        s.send(b"GET /api/version HTTP/1.1\r\nHost: x\r\n\r\n")
    time.sleep(3)
    s.close()


def bigprompt():
    s = tls()
    prompt = "a" * (4 * 1024 * 1024 - 200)
    body = '{"model":"%s","prompt":"%s","stream":false,"options":{"num_predict":4}}' % (
        os.environ.get("SOAK_MODEL", "stories260K"), prompt)
    s.send(("POST /api/generate HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
            "Content-Length: %d\r\n\r\n" % (key_other, len(body))).encode() + body.encode())
    s.recv(65536)
    s.close()


def dupauth():
    s = tls()
    s.send(("GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
            "Authorization: Bearer %s\r\n\r\n" % (key_other, fake_key())).encode())
    s.recv(65536)
    s.close()


def nul():
    s = tls()
    s.send(b"GET /healthz HTTP/1.1\x00junk\r\nHost: x\r\n\r\n")
    s.recv(65536)
    s.close()


kinds = [("idle", idle), ("slowloris", slowloris), ("slowloris", slowloris),
         ("preauth", preauth), ("preauth", preauth), ("badkey", badkey),
         ("pipeline", pipeline), ("noread", noread), ("bigprompt", bigprompt),
         ("dupauth", dupauth), ("nul", nul)]
only = os.environ.get("SOAK_KINDS", "").split(",") if os.environ.get("SOAK_KINDS") else None
threads = [loop(k, f) for k, f in kinds if not only or k in only]
for t in threads:
    t.join(seconds + 30)
for k in sorted(counts):
    print("hostile %-10s %d attempts" % (k, counts[k]))
