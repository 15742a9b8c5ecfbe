"""A hostile instance of an application actor, for test_hostile: an nng
pair1 socket (the system's libnng.so.1 through ctypes, as wire_actor.py)
that dials the actor's URL as any instance would, then sends whatever it is
told to, byte for byte, and reads what the host sends it (the REQUESTs it is
given as an instance, with their ids).

    p = Pair1(url)          # dialed; raises OSError if it cannot be
    p.send(b"...")          # one nng message, as given
    p.recv(0.5)             # one message within 0.5 s, or None
    p.close()

`request_ids(payload)` reads a REQUEST batch's record ids: wire_actor.py's,
written from service/wire.h alone.
"""
import ctypes
import struct

from wire_actor import request_ids  # noqa: F401 (offered from here too)

NNG_FLAG_ALLOC = 1

BATCH = struct.Struct("<HHI")  # version (1) flags (0) count
REPLY = struct.Struct("<QHHI")  # id status nheaders body


class _Sock(ctypes.Structure):
    _fields_ = [("id", ctypes.c_uint32)]


_lib = None


def lib():
    global _lib
    if _lib is None:
        l = ctypes.CDLL("libnng.so.1")
        l.nng_pair1_open.argtypes = [ctypes.POINTER(_Sock)]
        l.nng_dial.argtypes = [_Sock, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int]
        l.nng_recv.argtypes = [_Sock, ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t), ctypes.c_int]
        l.nng_send.argtypes = [_Sock, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int]
        l.nng_free.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        l.nng_free.restype = None
        l.nng_close.argtypes = [_Sock]
        l.nng_socket_set_ms.argtypes = [_Sock, ctypes.c_char_p, ctypes.c_int32]
        l.nng_socket_set_size.argtypes = [_Sock, ctypes.c_char_p, ctypes.c_size_t]
        l.nng_strerror.argtypes = [ctypes.c_int]
        l.nng_strerror.restype = ctypes.c_char_p
        _lib = l
    return _lib


class Pair1:
    def __init__(self, url):
        l = lib()
        self.sock = _Sock()
        self.open = False
        rv = l.nng_pair1_open(ctypes.byref(self.sock))
        if rv != 0:
            raise OSError(f"nng_pair1_open: {l.nng_strerror(rv).decode()}")
        self.open = True
        l.nng_socket_set_size(self.sock, b"recv-size-max", 0)  # whatever the host sends is read
        l.nng_socket_set_ms(self.sock, b"send-timeout", 5000)
        rv = l.nng_dial(self.sock, url.encode(), None, 0)
        if rv != 0:
            self.close()
            raise OSError(f"nng_dial {url}: {l.nng_strerror(rv).decode()}")

    def send(self, data):
        rv = lib().nng_send(self.sock, data, len(data), 0)
        if rv != 0:
            raise OSError(f"nng_send: {lib().nng_strerror(rv).decode()}")

    def recv(self, timeout):
        """One message within `timeout` seconds (bytes), or None."""
        l = lib()
        l.nng_socket_set_ms(self.sock, b"recv-timeout", max(1, int(timeout * 1000)))
        buf, size = ctypes.c_void_p(), ctypes.c_size_t()
        rv = l.nng_recv(self.sock, ctypes.byref(buf), ctypes.byref(size), NNG_FLAG_ALLOC)
        if rv != 0:
            return None
        try:
            return ctypes.string_at(buf, size.value)
        finally:
            l.nng_free(buf, size)

    def close(self):
        if self.open:
            self.open = False
            lib().nng_close(self.sock)


def replies(records, version=1, flags=0, count=None, tail=b""):
    """A reply batch: records [(id, status, body)], its head as given."""
    body = b"".join(REPLY.pack(rid, status, 0, len(b)) + b for rid, status, b in records)
    return BATCH.pack(version, flags, len(records) if count is None else count) + body + tail
