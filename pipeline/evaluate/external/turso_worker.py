"""The libsql client for a remote Turso database, in a process of its own.

Run as a script (``python turso_worker.py URL``, never imported by the package, so it
starts without polars): the remote client blocks inside its native code, holding the GIL,
for as long as a server keeps a request open, so only a process that can be killed gives
:mod:`pipeline.evaluate.external.turso_remote` a deadline. The token comes in the
environment (``PIPELINE_TURSO_TOKEN``), never in the arguments that ``ps`` shows.

Frames both ways are a 4-byte big-endian length and a msgpack array. In: ``[sql, params,
batch_rows]``. Out: ``["ready"]`` once connected, then per statement ``["rows", rows]`` in
batches and ``["end"]``, or ``["error", type name, text]``.
"""

import os
import struct
import sys

import msgspec

HEADER = struct.Struct(">I")


def main() -> None:
    url = sys.argv[1]
    token = os.environ.pop("PIPELINE_TURSO_TOKEN", "")
    reader, writer = sys.stdin.buffer, sys.stdout.buffer
    encode, decode = msgspec.msgpack.Encoder().encode, msgspec.msgpack.Decoder().decode

    def send(message: list) -> None:
        data = encode(message)
        writer.write(HEADER.pack(len(data)) + data)
        writer.flush()

    try:
        import libsql

        connection = libsql.connect(url, auth_token=token)
        connection.execute("SELECT 1").fetchall()
    except Exception as e:  # noqa: BLE001 - every failure goes back as one frame
        send(["error", type(e).__name__, str(e)])
        return
    send(["ready"])
    while header := reader.read(HEADER.size):
        sql, params, batch = decode(reader.read(HEADER.unpack(header)[0]))
        try:
            cursor = connection.execute(sql, tuple(params))
            while rows := cursor.fetchmany(batch):
                send(["rows", [list(row) for row in rows]])
            send(["end"])
        except Exception as e:  # noqa: BLE001
            send(["error", type(e).__name__, str(e)])


if __name__ == "__main__":
    main()
