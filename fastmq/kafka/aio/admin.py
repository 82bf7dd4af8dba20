"""AIOKafkaAdminClient: aiokafka's admin client on fastmq.kafka.Admin.

Every call waits for the broker, so each runs fastmq's Admin method on a worker thread and the event loop
stays free. Results are fastmq's (e.g. create_topics returns {name: CreateTopicResult} and raises the first
refusal), not aiokafka's raw protocol responses.
"""
from __future__ import annotations

import asyncio
from typing import Any, Iterable, Mapping

from fastmq.kafka.admin import Admin, ConfigResource, NewPartitions, NewTopic
from fastmq.kafka.aio.config import REQUEST_TIMEOUT_MS, bound_loop, client_options
from fastmq.kafka.aio.lifetime import Lifetime, start_engine
from fastmq.kafka.structs import TopicPartition

__all__ = ["AIOKafkaAdminClient", "ConfigResource", "NewPartitions", "NewTopic"]


class AIOKafkaAdminClient(Lifetime[Admin]):
    """aiokafka.admin.AIOKafkaAdminClient's constructor and methods (see the module docstring). close() is
    aiokafka's name for stop()."""

    what = "admin client"

    def __init__(self, *, loop: asyncio.AbstractEventLoop | None = None,
                 bootstrap_servers: str | list[str] = "localhost", client_id: str | None = None,
                 request_timeout_ms: int = REQUEST_TIMEOUT_MS, connections_max_idle_ms: int = 540000,
                 retry_backoff_ms: int = 100, metadata_max_age_ms: int = 300000,
                 security_protocol: str = "PLAINTEXT", ssl_context: Any = None, api_version: Any = None,
                 sasl_mechanism: str = "PLAIN", sasl_plain_username: str | None = None,
                 sasl_plain_password: str | None = None, sasl_kerberos_service_name: str = "kafka",
                 sasl_kerberos_domain_name: str | None = None, sasl_oauth_token_provider: Any = None) -> None:
        arguments = dict(locals())             # before any other local: the settings as given
        super().__init__()
        bound_loop(loop)
        self._options = client_options(arguments)
        self._request_timeout = request_timeout_ms / 1000.0

    async def start(self) -> None:
        if self._engine is None:
            self._engine = await start_engine(lambda: Admin(**self._options), self._request_timeout, Admin.close)

    async def close(self) -> None:
        await self.stop()

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(getattr(self.engine(), method), *args, **kwargs)

    # ---- topics -------------------------------------------------------------------------------------------

    async def create_topics(self, new_topics: list[NewTopic], timeout_ms: int | None = None,
                            validate_only: bool = False) -> Any:
        return await self._call("create_topics", new_topics, timeout=_seconds(timeout_ms),
                                validate_only=validate_only)

    async def delete_topics(self, topics: list[str], timeout_ms: int | None = None) -> Any:
        return await self._call("delete_topics", topics, timeout=_seconds(timeout_ms))

    async def list_topics(self) -> list[str]:
        return await asyncio.to_thread(self.engine().list_topics)

    async def describe_topics(self, topics: list[str] | None = None) -> Any:
        return await self._call("describe_topics", topics)

    async def create_partitions(self, topic_partitions: Mapping[str, NewPartitions], timeout_ms: int | None = None,
                                validate_only: bool = False) -> Any:
        return await self._call("create_partitions", topic_partitions, timeout=_seconds(timeout_ms),
                                validate_only=validate_only)

    async def delete_records(self, records_to_delete: Mapping[TopicPartition, Any],
                             timeout_ms: int | None = None) -> dict[TopicPartition, int]:
        """Delete records before the given offsets (ints, or objects with before_offset as aiokafka's
        RecordsToDelete); returns each partition's new low watermark."""
        offsets = {tp: getattr(value, "before_offset", value) for tp, value in records_to_delete.items()}
        results = await self._call("delete_records", offsets, timeout=_seconds(timeout_ms))
        return {tp: result.low_watermark for tp, result in results.items()}

    # ---- cluster and configs ---------------------------------------------------------------------------

    async def describe_cluster(self) -> Any:
        return await self._call("describe_cluster")

    async def describe_configs(self, config_resources: list[ConfigResource], include_synonyms: bool = False) -> Any:
        return await self._call("describe_configs", config_resources, include_synonyms=include_synonyms)

    async def alter_configs(self, config_resources: list[ConfigResource]) -> Any:
        return await self._call("alter_configs", config_resources)

    # ---- groups -----------------------------------------------------------------------------------------

    async def list_consumer_groups(self, broker_ids: list[int] | None = None) -> Any:
        return await self._call("list_groups")

    async def describe_consumer_groups(self, group_ids: list[str], group_coordinator_id: int | None = None,
                                       include_authorized_operations: bool = False) -> Any:
        return await self._call("describe_groups", group_ids,
                                include_authorized_operations=include_authorized_operations)

    async def list_consumer_group_offsets(self, group_id: str, group_coordinator_id: int | None = None,
                                          partitions: Iterable[TopicPartition] | None = None) -> Any:
        return await self._call("list_group_offsets", group_id, partitions)

    async def delete_consumer_groups(self, group_ids: list[str]) -> Any:
        return await self._call("delete_groups", group_ids)


def _seconds(timeout_ms: int | None) -> float | None:
    return None if timeout_ms is None else timeout_ms / 1000.0
