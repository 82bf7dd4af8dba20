"""Master/slave replication of the CommitLog (SmartGo-Store 1.6, RocketMQ's HAService / HAClient).

Over one TCP connection:
- slave -> master: its CommitLog max offset, [offset i64] (big-endian), at connect, after every applied
  transfer and every ha_send_heartbeat_interval_ms;
- master -> slave: [offset i64][size i32][size bytes of CommitLog data starting at offset]; size 0 is a heartbeat.
A slave that reports 0 (empty) gets the master's newest CommitLog file from its start; otherwise transfer starts
at the reported offset. The slave writes the bytes at exactly that offset, so its CommitLog stays byte-identical
to the master's, then dispatches them to its own ConsumeQueues and index. A transfer never crosses a CommitLog
file boundary and never exceeds ha_transfer_batch_size bytes.
"""
from __future__ import annotations

import logging
import socket
import struct
import threading
import time
from typing import TYPE_CHECKING

from fastmq.io.readiness import wait_readable
from fastmq.store.errors import HAProtocolError
from fastmq.store.service_thread import ServiceThread

if TYPE_CHECKING:  # pragma: no cover
    from fastmq.store.store import MessageStore

log = logging.getLogger(__name__)

TRANSFER_HEADER = struct.Struct(">qi")
REPORT = struct.Struct(">q")
POLL_SECONDS = 0.1
RECONNECT_DELAY_SECONDS = 0.2


class HAStreamParser:
    """Splits the master's stream into (offset, data) transfers; forged sizes raise before anything is buffered."""

    def __init__(self, max_frame_size: int) -> None:
        self.max_frame_size = max_frame_size
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        self._buffer += data
        transfers = []
        buffer = self._buffer
        start = 0
        while len(buffer) - start >= TRANSFER_HEADER.size:
            offset, size = TRANSFER_HEADER.unpack_from(buffer, start)
            if offset < 0 or not 0 <= size <= self.max_frame_size:
                raise HAProtocolError(f"transfer header (offset {offset}, size {size}) is out of range "
                                      f"(sizes up to {self.max_frame_size})")
            end = start + TRANSFER_HEADER.size + size
            if len(buffer) < end:
                break
            transfers.append((offset, bytes(buffer[start + TRANSFER_HEADER.size:end])))
            start = end
        del buffer[:start]
        return transfers


class SlaveReportParser:
    """The slave's 8-byte offset reports; only the newest complete one matters."""

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, data: bytes) -> int | None:
        data = self._pending + data
        usable = len(data) - len(data) % REPORT.size
        self._pending = data[usable:]
        if not usable:
            return None
        offset: int = REPORT.unpack_from(data, usable - REPORT.size)[0]
        if offset < 0:
            raise HAProtocolError(f"slave reported a negative offset {offset}")
        return offset


class HAConnection:
    """The master's side of one slave: a reader of offset reports and a writer of CommitLog data."""

    def __init__(self, service: HAService, sock: socket.socket,
                 address: tuple[str, int] | tuple[str, int, int, int]) -> None:
        self.service = service
        self.sock = sock
        self.address = address
        self.slave_request_offset = -1
        self.slave_ack_offset = -1
        self.next_transfer_from = -1    # CommitLog offset of the next byte to send (-1: not decided yet)
        self._closed = threading.Event()
        self._reader = threading.Thread(target=self._read_loop, name=f"HAConnection-read-{address}", daemon=True)
        self._writer = threading.Thread(target=self._write_loop, name=f"HAConnection-write-{address}", daemon=True)

    def start(self) -> None:
        self._reader.start()
        self._writer.start()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self.service.remove_connection(self)

    def join(self, timeout: float) -> None:
        for thread in (self._reader, self._writer):
            if thread is not threading.current_thread():
                thread.join(timeout)

    def _read_loop(self) -> None:
        parser = SlaveReportParser()
        housekeeping = self.service.config.ha_housekeeping_interval_ms / 1000
        last_read = time.monotonic()
        try:
            while not self.closed:
                readable = wait_readable(self.sock, POLL_SECONDS)
                if not readable:
                    if time.monotonic() - last_read > housekeeping:
                        log.warning("slave %s silent for %.1f s; closing", self.address, housekeeping)
                        break
                    continue
                data = self.sock.recv(4096)
                if not data:
                    break
                last_read = time.monotonic()
                offset = parser.feed(data)
                if offset is not None:
                    if self.slave_request_offset < 0:
                        self.slave_request_offset = offset
                        log.info("slave %s requests data from offset %d", self.address, offset)
                    self.slave_ack_offset = offset
                    self.service.notify_slave_ack(offset)
        except (OSError, ValueError, HAProtocolError) as exc:
            if not self.closed:
                log.warning("slave %s: %s", self.address, exc)
        finally:
            self.close()

    def _write_loop(self) -> None:
        store = self.service.store
        config = self.service.config
        heartbeat = config.ha_send_heartbeat_interval_ms / 1000
        last_write = time.monotonic()
        try:
            while not self.closed:
                if self.slave_request_offset < 0:
                    self.service.wait_for_data(POLL_SECONDS)
                    continue
                if self.next_transfer_from < 0:
                    if self.slave_request_offset == 0:
                        master_offset = store.commit_log.get_max_offset()
                        self.next_transfer_from = max(0, master_offset - master_offset % store.commit_log.file_size)
                    else:
                        self.next_transfer_from = self.slave_request_offset
                    log.info("transferring to slave %s from offset %d", self.address, self.next_transfer_from)
                data = store.commit_log.get_data(self.next_transfer_from)
                if data is not None and len(data):
                    chunk = data[:config.ha_transfer_batch_size]
                    self.sock.sendall(TRANSFER_HEADER.pack(self.next_transfer_from, len(chunk)))
                    self.sock.sendall(chunk)
                    self.next_transfer_from += len(chunk)
                    chunk.release()
                    data.release()
                    last_write = time.monotonic()
                    continue
                if data is not None:
                    data.release()
                if time.monotonic() - last_write >= heartbeat:
                    self.sock.sendall(TRANSFER_HEADER.pack(self.next_transfer_from, 0))
                    last_write = time.monotonic()
                self.service.wait_for_data(POLL_SECONDS)
        except OSError as exc:
            if not self.closed:
                log.warning("slave %s: %s", self.address, exc)
        finally:
            self.close()


class HAService(ServiceThread):
    """The master: accepts slaves on ha_listen_host:ha_listen_port and serves each one an HAConnection."""

    def __init__(self, store: MessageStore) -> None:
        super().__init__("HAService")
        self.store = store
        self.config = store.config
        self.connections: list[HAConnection] = []
        # The largest offset any slave confirmed having (SYNC_MASTER puts wait for it).
        self.push_to_slave_max_offset = 0
        self._lock = threading.Lock()
        self._acks = threading.Condition(self._lock)
        self._data = threading.Condition(threading.Lock())
        self._server = socket.create_server((self.config.ha_listen_host, self.config.ha_listen_port))
        self._server.settimeout(POLL_SECONDS)

    @property
    def address(self) -> tuple[str, int]:
        address: tuple[str, int] = self._server.getsockname()[:2]
        return address

    def run(self) -> None:
        while not self.stopped:
            try:
                sock, address = self._server.accept()
            except socket.timeout:
                continue
            except OSError:
                if not self.stopped:
                    log.exception("HA accept failed")
                break
            sock.settimeout(None)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            connection = HAConnection(self, sock, address)
            with self._lock:
                self.connections.append(connection)
            log.info("slave connected from %s", address)
            connection.start()

    def remove_connection(self, connection: HAConnection) -> None:
        with self._lock:
            if connection in self.connections:
                self.connections.remove(connection)

    def notify_data(self) -> None:
        """New CommitLog data: wake the writers."""
        with self._data:
            self._data.notify_all()

    def wait_for_data(self, timeout: float) -> None:
        with self._data:
            self._data.wait(timeout)

    def notify_slave_ack(self, offset: int) -> None:
        with self._acks:
            if offset > self.push_to_slave_max_offset:
                self.push_to_slave_max_offset = offset
                self._acks.notify_all()

    def is_slave_ok(self, master_put_where: int) -> bool:
        with self._lock:
            connected = bool(self.connections)
        return connected and master_put_where - self.push_to_slave_max_offset < self.config.ha_slave_fall_behind_max

    def wait_for_slave(self, offset: int, timeout: float) -> bool:
        """Block until a slave confirmed the CommitLog up to `offset`; False on timeout."""
        with self._acks:
            return self._acks.wait_for(lambda: self.push_to_slave_max_offset >= offset, timeout)

    def shutdown(self, timeout: float = 10.0) -> None:
        self._stopped.set()
        self._server.close()
        super().shutdown(timeout)
        with self._lock:
            connections = list(self.connections)
        for connection in connections:
            connection.close()
            connection.join(timeout)


class HAClient(ServiceThread):
    """The slave: connects to the master, reports its max offset and applies the transfers."""

    def __init__(self, store: MessageStore, master_address: tuple[str, int]) -> None:
        super().__init__("HAClient")
        self.store = store
        self.config = store.config
        self.master_address = master_address
        self.connected = threading.Event()
        self._sock: socket.socket | None = None

    def run(self) -> None:
        while not self.stopped:
            try:
                self._sock = socket.create_connection(self.master_address, timeout=1.0)
            except OSError as exc:
                log.debug("cannot reach master %s: %s", self.master_address, exc)
                self.wait_for_running(RECONNECT_DELAY_SECONDS)
                continue
            try:
                self._serve(self._sock)
            except (OSError, HAProtocolError) as exc:
                if not self.stopped:
                    log.warning("replication from %s interrupted: %s", self.master_address, exc)
            finally:
                self.connected.clear()
                self._sock.close()
                self._sock = None
            if not self.stopped:
                self.wait_for_running(RECONNECT_DELAY_SECONDS)

    def _serve(self, sock: socket.socket) -> None:
        sock.settimeout(None)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        parser = HAStreamParser(self.config.ha_max_frame_size)
        heartbeat = self.config.ha_send_heartbeat_interval_ms / 1000
        housekeeping = self.config.ha_housekeeping_interval_ms / 1000
        commit_log = self.store.commit_log
        reported = commit_log.get_max_offset()
        sock.sendall(REPORT.pack(reported))
        last_report = last_read = time.monotonic()
        self.connected.set()
        log.info("replicating from master %s, slave max offset %d", self.master_address, reported)
        while not self.stopped:
            readable = wait_readable(sock, POLL_SECONDS)
            now = time.monotonic()
            if readable:
                data = sock.recv(256 * 1024)
                if not data:
                    raise HAProtocolError("master closed the connection")
                last_read = now
                for offset, body in parser.feed(data):
                    self._apply(offset, body)
            elif now - last_read > housekeeping:
                raise HAProtocolError(f"master silent for {housekeeping:.1f} s")
            max_offset = commit_log.get_max_offset()
            if max_offset > reported or now - last_report >= heartbeat:
                sock.sendall(REPORT.pack(max_offset))
                reported, last_report = max_offset, now

    def _apply(self, offset: int, body: bytes) -> None:
        slave_offset = self.store.commit_log.get_max_offset()
        if slave_offset and slave_offset != offset:
            raise HAProtocolError(f"master pushed offset {offset}, the slave's CommitLog ends at {slave_offset}")
        if body:
            self.store.append_to_commit_log(offset, body)

    def shutdown(self, timeout: float = 10.0) -> None:
        self._stopped.set()
        sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        super().shutdown(timeout)
