"""Scripted Kafka brokers: brokers on 127.0.0.1 that speak Kafka's real wire protocol and answer from per-test
scripts, for what no real broker does on demand (move a controller, coordinator or leaders; answer NOT_CONTROLLER;
speak old API versions; leave partitions out of a Produce answer)."""
from __future__ import annotations

import functools
import threading
import uuid
from typing import Any, Callable

from fastmq._native.frames import KafkaFrameSplitter
from fastmq.io import IOLoop, Listener, ServerHandler
from fastmq.kafka import errors as kerrors
from fastmq.kafka import protocol as kp


class ScriptedCluster:
    """Brokers on 127.0.0.1 speaking Kafka's wire protocol. ApiVersions and Metadata answer from the cluster's
    state (brokers, controller, topics with their ids and their partitions' leaders, API version limits); every
    other API calls handlers[api_key](node_id, request, version) for the response body. Every request other
    than ApiVersions and Metadata is recorded as (node_id, api name, request)."""

    def __init__(self, loop: IOLoop, node_ids: tuple[int, ...] = (1, 2),
                 max_versions: dict[int, int | None] | None = None) -> None:
        self.controller = node_ids[0]
        self.topics: dict[str, list[int]] = {}
        self.topic_ids: dict[str, uuid.UUID] = {}     # made on first mention
        self.handlers: dict[int, Callable[[int, Any, int], Any]] = {}
        self.requests: list[tuple[int, str, Any]] = []
        self.versions = dict(kp.SUPPORTED_VERSIONS)
        for key, limit in (max_versions or {}).items():
            if limit is None:
                del self.versions[key]
            else:
                self.versions[key] = (self.versions[key][0], limit)
        self.lock = threading.Lock()
        self.listeners = {node_id: Listener(loop, functools.partial(KafkaFrameSplitter, max_frame_size=1 << 20),
                                            _ScriptedHandler(self, node_id))
                          for node_id in node_ids}

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{listener.address[1]}" for listener in self.listeners.values())

    def calls(self, api: str) -> list[tuple[int, Any]]:
        with self.lock:
            return [(node_id, request) for node_id, name, request in self.requests if name == api]

    def answer(self, node_id: int, api_key: int, version: int, request: Any) -> Any:
        if api_key == kp.ApiKey.API_VERSIONS:
            V = kp.ApiVersionsResponse.ApiVersion
            return kp.ApiVersionsResponse(error_code=0, api_keys=[
                V(api_key=key, min_version=lo, max_version=hi) for key, (lo, hi) in sorted(self.versions.items())])
        if api_key == kp.ApiKey.METADATA:
            return self._metadata(request)
        with self.lock:
            self.requests.append((node_id, kp.APIS[api_key].name, request))
        return self.handlers[api_key](node_id, request, version)

    def _metadata(self, request: Any) -> Any:
        M = kp.MetadataResponse
        names = list(self.topics) if request.topics is None else [t.name for t in request.topics]
        topics = []
        for name in names:
            leaders = self.topics.get(name)
            if leaders is None:
                topics.append(M.MetadataResponseTopic(error_code=kerrors.UnknownTopicOrPartitionError.errno,
                                                      name=name))
                continue
            topic_id = self.topic_ids.setdefault(name, uuid.uuid4())
            topics.append(M.MetadataResponseTopic(name=name, topic_id=topic_id, partitions=[
                M.MetadataResponsePartition(partition_index=i, leader_id=leader, replica_nodes=[leader],
                                            isr_nodes=[leader])
                for i, leader in enumerate(leaders)]))
        return M(brokers=[M.MetadataResponseBroker(node_id=node_id, host="127.0.0.1", port=listener.address[1])
                          for node_id, listener in self.listeners.items()],
                 cluster_id="scripted", controller_id=self.controller, topics=topics)

    def close(self) -> None:
        for listener in self.listeners.values():
            listener.close()


class _ScriptedHandler(ServerHandler):
    def __init__(self, cluster: ScriptedCluster, node_id: int) -> None:
        self.cluster = cluster
        self.node_id = node_id

    def frame_received(self, conn: Any, frame: Any, reply: Any) -> None:
        header, request = kp.decode_request(frame)
        api_key, version = header.request_api_key, header.request_api_version
        response = self.cluster.answer(self.node_id, api_key, version, request)
        reply(kp.encode_response(api_key, version, header.correlation_id, response))
