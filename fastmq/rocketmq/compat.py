"""The public API of PyPI `rocketmq` (rocketmq.client, 0.4.x) on fastmq's client, without its native library:
switch with `from fastmq.rocketmq.compat import Producer, Message, PushConsumer, PullConsumer`.

Producer(group_id): set_namesrv_addr, start, send_sync, send_async(msg, on_success, on_exception), send_oneway,
send_orderly(msg, arg, retry_times, queue_selector) and send_oneway_orderly (queue_selector(mq_size, msg, arg)
returns a queue index; the default is arg % mq_size), shutdown. Message(topic) with set_keys, set_tags, set_body,
set_property, set_delay_time_level. SendResult(status, msg_id, offset) with SendStatus OK / FLUSH_DISK_TIMEOUT /
FLUSH_SLAVE_TIMEOUT / SLAVE_NOT_AVAILABLE. PushConsumer(group_id, orderly, message_model): subscribe(topic,
callback, expression), start, shutdown; the callback gets a RecvMessage and an exception (or a returned
ConsumeStatus.RECONSUME_LATER) consumes it again later. PullConsumer(group_id).pull(topic, expression, max_num)
yields every message of every queue from its first offset. As in that library, RecvMessage.tags, .keys and
get_property() are bytes. set_session_credentials(access_key, secret_key, channel) signs requests as RocketMQ's ACL
wants (the channel, Aliyun's, is not sent); namesrv domains are not supported (they raise).
"""
from __future__ import annotations

import enum
from collections import namedtuple
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from fastmq.rocketmq.acl import Credentials

from fastmq.rocketmq._native.messages import MessageExt, decode_messages
from fastmq.rocketmq import message as _message
from fastmq.rocketmq import producer as _producer
from fastmq.rocketmq import push_consumer as _push
from fastmq.rocketmq.client import ClientInstance, check_success
from fastmq.rocketmq.errors import RocketMQError
from fastmq.rocketmq.fetcher import pull_fields
from fastmq.rocketmq.protocol import MessageModel as _Model
from fastmq.rocketmq.protocol import RequestCode, ResponseCode
from fastmq.rocketmq.subscription import Subscription

__all__ = ["ConsumeStatus", "Message", "MessageModel", "Producer", "ProducerSendAsyncFailed", "PullConsumer",
           "PushConsumer", "RecvMessage", "SendResult", "SendStatus"]

SendResult = namedtuple("SendResult", ["status", "msg_id", "offset"])


class SendStatus(enum.IntEnum):
    OK = 0
    FLUSH_DISK_TIMEOUT = 1
    FLUSH_SLAVE_TIMEOUT = 2
    SLAVE_NOT_AVAILABLE = 3


class ConsumeStatus(enum.IntEnum):
    CONSUME_SUCCESS = 0
    RECONSUME_LATER = 1


class MessageModel(enum.IntEnum):
    BROADCASTING = 0
    CLUSTERING = 1


class ProducerSendAsyncFailed(RocketMQError):
    """An asynchronous send failed (given to send_async's exception callback)."""


_STATUS = {_message.SendStatus.SEND_OK: SendStatus.OK,
           _message.SendStatus.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
           _message.SendStatus.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
           _message.SendStatus.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE}


def _text(value: str | bytes) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _unsupported(what: str) -> None:
    raise RocketMQError(f"{what} is not supported by fastmq.rocketmq.compat (use set_namesrv_addr)")


class Message:
    def __init__(self, topic: str | bytes) -> None:
        self._message = _message.Message(_text(topic), b"")

    def set_keys(self, keys: str | bytes) -> None:
        self._message.keys = _text(keys)

    def set_tags(self, tags: str | bytes) -> None:
        self._message.tags = _text(tags)

    def set_body(self, body: str | bytes) -> None:
        self._message.body = body.encode("utf-8") if isinstance(body, str) else bytes(body)

    def set_property(self, key: str | bytes, value: str | bytes) -> None:
        if self._message.properties is None:
            self._message.properties = {}
        self._message.properties[_text(key)] = _text(value)

    def set_delay_time_level(self, delay_time_level: int) -> None:
        self._message.delay_level = delay_time_level


def _bytes_or_none(value: str | None) -> bytes | None:
    return value.encode("utf-8") if value is not None else None


class RecvMessage:
    """A received message, with the attribute names (and the bytes values) of `rocketmq.client.RecvMessage`."""

    def __init__(self, message: MessageExt) -> None:
        self._message = message

    topic = property(lambda self: self._message.real_topic)
    tags = property(lambda self: _bytes_or_none(self._message.tags))
    keys = property(lambda self: _bytes_or_none(self._message.keys))
    body = property(lambda self: self._message.body)
    id = property(lambda self: self._message.msg_id)
    delay_time_level = property(lambda self: int(self._message.properties.get("DELAY", 0)))
    queue_id = property(lambda self: self._message.queue_id)
    reconsume_times = property(lambda self: self._message.reconsume_times)
    store_size = property(lambda self: self._message.store_size)
    born_timestamp = property(lambda self: self._message.born_timestamp)
    store_timestamp = property(lambda self: self._message.store_timestamp)
    queue_offset = property(lambda self: self._message.queue_offset)
    commit_log_offset = property(lambda self: self._message.commitlog_offset)
    prepared_transaction_offset = property(lambda self: self._message.prepared_transaction_offset)

    def get_property(self, prop: Any) -> bytes | None:
        name = prop.value if isinstance(prop, enum.Enum) else _text(prop)
        return _bytes_or_none(self._message.properties.get(name))

    def __getitem__(self, key: Any) -> bytes | None:
        return self.get_property(key)

    def __str__(self) -> str:
        return self._message.body.decode("utf-8")

    def __bytes__(self) -> bytes:
        return self._message.body

    def __repr__(self) -> str:
        return f"<RecvMessage topic={self.topic!r} id={self.id!r} body={self.body!r}>"


def hashing_queue_selector(mq_size: int, msg: RecvMessage | Message, arg: int) -> int:
    return arg % mq_size


def _result(result: _message.SendResult) -> SendResult:
    return SendResult(_STATUS[result.status], result.msg_id, result.queue_offset)


class _Configured:
    """The setters every client of that library has; the client itself is made at start()."""

    def __init__(self, group_id: str | bytes) -> None:
        self._group = _text(group_id)
        self._namesrv: str | None = None
        self._instance_name: str | None = None
        self._credentials: Credentials | None = None

    if TYPE_CHECKING:  # what each client defines, declared for the type checker only
        def start(self) -> None: ...

        def shutdown(self) -> None: ...

    def set_group(self, group_id: str | bytes) -> None:
        self._group = _text(group_id)

    def set_namesrv_addr(self, addr: str | bytes) -> None:
        self._namesrv = _text(addr).replace(";", ",")

    def set_namesrv_domain(self, domain: str | bytes) -> None:
        _unsupported("set_namesrv_domain")

    def set_session_credentials(self, access_key: Any, access_secret: Any, channel: Any) -> None:
        self._credentials = Credentials(_text(access_key), _text(access_secret))

    def set_instance_name(self, name: str | bytes) -> None:
        self._instance_name = _text(name)

    def _namesrv_addr(self) -> str:
        if not self._namesrv:
            raise RocketMQError("call set_namesrv_addr() before start()")
        return self._namesrv

    def __enter__(self) -> Any:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()


class Producer(_Configured):
    def __init__(self, group_id: str | bytes, timeout: int | None = None, compress_level: int | None = None,
                 max_message_size: int | None = None) -> None:
        super().__init__(group_id)
        self._timeout_ms = timeout or 3000
        self._max_message_size = max_message_size or _producer.DEFAULT_MAX_MESSAGE_SIZE
        self._producer: _producer.Producer | None = None

    def set_timeout(self, timeout: int) -> None:
        self._timeout_ms = timeout

    def set_compress_level(self, level: int) -> None:
        """Accepted for compatibility: bodies over 4 KiB are zlib-compressed at level 5, as Java does."""

    def set_max_message_size(self, max_size: int) -> None:
        self._max_message_size = max_size

    def start(self) -> None:
        if self._producer is None:
            self._producer = _producer.Producer(self._group, self._namesrv_addr(),
                                                send_timeout=self._timeout_ms / 1000.0,
                                                max_message_size=self._max_message_size,
                                                credentials=self._credentials)

    def shutdown(self) -> None:
        if self._producer is not None:
            self._producer.close()
            self._producer = None

    def _started(self) -> _producer.Producer:
        if self._producer is None:
            raise RocketMQError("the producer is not started: call start()")
        return self._producer

    def send_sync(self, msg: Message) -> SendResult:
        return _result(self._started().send(msg._message))

    def send_async(self, msg: Message, success_callback: Callable[..., Any] | None,
                   exception_callback: Callable[..., Any] | None) -> None:
        def done(future: Any) -> None:
            error = future.exception()
            if error is None:
                if success_callback:
                    success_callback(_result(future.result()))
            elif exception_callback:
                failure = ProducerSendAsyncFailed(str(error))
                failure.__cause__ = error
                exception_callback(failure)

        self._started().send_async(msg._message).add_done_callback(done)

    def send_oneway(self, msg: Message) -> None:
        self._started().send_oneway(msg._message)

    @staticmethod
    def _selector(queue_selector: Callable[..., int]) -> _producer.QueueSelector:
        return lambda queues, message, arg: queues[queue_selector(len(queues), message, arg) % len(queues)]

    def send_orderly(self, msg: Message, arg: int, retry_times: int = 3,
                     queue_selector: Callable[..., Any] = hashing_queue_selector) -> SendResult:
        return _result(self._started().send(msg._message, selector=self._selector(queue_selector), arg=arg))

    def send_oneway_orderly(self, msg: Message, arg: int, queue_selector: Callable[..., Any] = hashing_queue_selector
                            ) -> None:
        self._started().send_oneway(msg._message, selector=self._selector(queue_selector), arg=arg)


class PushConsumer(_Configured):
    def __init__(self, group_id: str | bytes, orderly: bool = False,
                 message_model: MessageModel = MessageModel.CLUSTERING) -> None:
        super().__init__(group_id)
        self._orderly = orderly
        self._model = message_model
        self._threads = 4
        self._batch = 1
        self._subscriptions: list[tuple[str, Callable[[RecvMessage], Any], str]] = []
        self._consumer: _push.PushConsumer | None = None

    def set_message_model(self, model: MessageModel) -> None:
        self._model = model

    def set_thread_count(self, thread_count: int) -> None:
        self._threads = thread_count

    def set_message_batch_max_size(self, max_size: int) -> None:
        self._batch = max_size

    def subscribe(self, topic: str | bytes, callback: Callable[[RecvMessage], Any], expression: str = "*") -> None:
        self._subscriptions.append((_text(topic), callback, _text(expression)))

    def start(self) -> None:
        if self._consumer is not None:
            return
        callbacks = {topic: callback for topic, callback, _ in self._subscriptions}

        def listener(messages: list[MessageExt]) -> _push.ConsumeStatus:
            for message in messages:
                callback = callbacks.get(message.real_topic)
                if callback is not None and callback(RecvMessage(message)) == ConsumeStatus.RECONSUME_LATER:
                    return _push.ConsumeStatus.RECONSUME_LATER
            return _push.ConsumeStatus.CONSUME_SUCCESS

        model = _Model.BROADCASTING if self._model == MessageModel.BROADCASTING else _Model.CLUSTERING
        self._consumer = _push.PushConsumer(self._group, self._namesrv_addr(), listener=listener,
                                            orderly=self._orderly, consume_threads=self._threads,
                                            consume_batch_size=self._batch, message_model=model,
                                            credentials=self._credentials)
        for topic, _, expression in self._subscriptions:
            self._consumer.subscribe(topic, expression)
        self._consumer.start()

    def shutdown(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


class PullConsumer(_Configured):
    def __init__(self, group_id: str | bytes) -> None:
        super().__init__(group_id)
        self._instance: ClientInstance | None = None

    def start(self) -> None:
        if self._instance is None:
            self._instance = ClientInstance(self._namesrv_addr(), instance_name=self._instance_name,
                                            credentials=self._credentials)

    def shutdown(self) -> None:
        if self._instance is not None:
            self._instance.close()
            self._instance = None

    def pull(self, topic: str | bytes, expression: str = "*", max_num: int = 32) -> Iterator[RecvMessage]:
        """Every message of every queue of the topic, from offset 0 to the end as it is now."""
        if self._instance is None:
            raise RocketMQError("the consumer is not started: call start()")
        instance = self._instance
        topic = _text(topic)
        subscription = Subscription(topic, expression)
        for queue in instance.route(topic).read_queues:
            address = instance.master_address(queue.broker_name, topic)
            offset = 0
            while True:
                response = instance.remoting.call(address, RequestCode.PULL_MESSAGE, pull_fields(
                    self._group, queue, offset, max_num, subscription.expression, subscription.version, 0))
                if response.code != ResponseCode.SUCCESS:
                    if response.code not in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY,
                                             ResponseCode.PULL_OFFSET_MOVED):
                        check_success(response, f"pulling {queue}")
                    next_offset = int(response.ext_fields.get("nextBeginOffset", offset))
                    if response.code == ResponseCode.PULL_NOT_FOUND or next_offset == offset:
                        break
                    offset = next_offset
                    continue
                offset = int(response.ext_fields["nextBeginOffset"])
                for message in decode_messages(response.body or b""):
                    if subscription.all or message.tags in subscription.tags:
                        yield RecvMessage(message)
