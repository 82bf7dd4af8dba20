"""The admin back end of the command line for Kafka brokers (fastmq.cli.endpoint.BACKENDS["kafka"]): the work of
`fastmq metadata`, `fastmq topics ...` and `fastmq groups ...`, done with fastmq.kafka.Admin. Every answer is
plain data (dicts, lists), which the verbs print as a table or as JSON."""
from __future__ import annotations

import time
from typing import Any

from fastmq.cli.failure import CommandError, ExitCode, unreachable
from fastmq.closeable import Closeable
from fastmq.kafka import errors as kerrors
from fastmq.kafka.admin import Admin, ConfigResource, ConfigResourceType, AlterConfigOp, NewTopic
from fastmq.kafka import protocol as kp
from fastmq.kafka.client import CLIENT_OPTIONS
from fastmq.kafka.consumer_protocol import Assignment
from fastmq.kafka.structs import OffsetAndMetadata, TopicPartition

# A group whose members are connected refuses commits from outside it (Kafka's own tool refuses too).
_INACTIVE_GROUP_STATES = ("Empty", "Dead")
# How long a topic asked for may take to appear on a broker that creates topics on first use.
AUTO_CREATE_GRACE_S = 3.0


class KafkaAdmin(Closeable):
    def __init__(self, servers: str, timeout: float, client_options: dict[str, Any]) -> None:
        self.servers = servers
        self.timeout = timeout
        # Only connection settings: -X may carry producer or consumer settings as well.
        self.client_options = {name: value for name, value in client_options.items() if name in CLIENT_OPTIONS}
        self.client_options["request_timeout_ms"] = timeout * 1000
        self.admin = Admin(servers, **self.client_options)
        try:
            self.cluster = self.admin.describe_cluster(timeout=timeout)
        except (kerrors.KafkaTimeoutError, kerrors.NoBrokersAvailable) as exc:
            self.admin.close()
            raise unreachable(servers, timeout) from exc

    def close(self) -> None:
        self.admin.close()

    # ---- cluster and topics ---------------------------------------------------------------------------------

    def metadata(self, topics: list[str] | None = None) -> dict[str, Any]:
        return {"cluster_id": self.cluster.cluster_id, "controller": self.cluster.controller_id,
                "brokers": [{"id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
                            for b in self.cluster.brokers],
                "topics": self.describe_topics(topics)}

    def list_topics(self) -> list[str]:
        return self.admin.list_topics(timeout=self.timeout)

    def describe_topics(self, names: list[str] | None = None, configs: bool = False) -> list[dict[str, Any]]:
        topics = []
        for name, info in self.admin.describe_topics(names, timeout=self.timeout).items():
            topic: dict[str, Any] = {"topic": name, "partitions": [
                {"partition": p.partition, "leader": p.leader, "replicas": list(p.replicas), "isr": list(p.isr)}
                for p in sorted(info.partitions, key=lambda p: p.partition)]}
            if configs:
                topic["configs"] = self.topic_configs(name)
            topics.append(topic)
        return topics

    def topic_configs(self, name: str) -> dict[str, str | None]:
        """The topic's settings that differ from the broker's defaults."""
        resource = ConfigResource(ConfigResourceType.TOPIC, name)
        entries = self.admin.describe_configs([resource], timeout=self.timeout)[resource.key].entries
        return {key: entry.value for key, entry in sorted(entries.items()) if not entry.is_default}

    def create_topic(self, name: str, partitions: int, replication_factor: int, configs: dict[str, str]) -> None:
        self.admin.create_topics([NewTopic(name, partitions, replication_factor, topic_configs=configs)],
                                 timeout=self.timeout)
        self.admin.wait_for_topics([name], timeout=self.timeout)

    def alter_topic(self, name: str, partitions: int | None, set_configs: dict[str, str],
                    delete_configs: list[str]) -> None:
        self.describe_topics([name])                   # an unknown topic fails here, with its name
        if set_configs or delete_configs:
            changes: dict[str, Any] = dict(set_configs)
            changes.update({key: (AlterConfigOp.DELETE, None) for key in delete_configs})
            self.admin.incremental_alter_configs([ConfigResource(ConfigResourceType.TOPIC, name, changes)],
                                                 timeout=self.timeout)
        if partitions is not None:
            self.admin.create_partitions({name: partitions}, timeout=self.timeout)

    def delete_topics(self, names: list[str]) -> None:
        self.admin.delete_topics(names, timeout=self.timeout)

    def topic_exists(self, name: str) -> bool:
        try:
            self.admin.describe_topics([name], timeout=self.timeout)
        except kerrors.UnknownTopicOrPartitionError:
            return False
        return True

    def create_on_first_use(self, name: str) -> bool:
        """Ask for the topic as a producer does, with a Metadata request that may create it: whether the broker
        created it (auto.create.topics.enable). A broker that does not create topics answers that it does not
        know the topic; one that does answers with the topic, or that its leader is not there yet."""
        request = kp.MetadataRequest(topics=[kp.MetadataRequest.MetadataRequestTopic(name=name)],
                                     allow_auto_topic_creation=True)
        # Apache Kafka (KRaft) answers the request that starts the creation with UNKNOWN_TOPIC_OR_PARTITION too,
        # and knows the topic a moment later: ask again for a little while before concluding it does not create.
        deadline = time.monotonic() + min(self.timeout, AUTO_CREATE_GRACE_S)
        while True:
            response = self.admin.client.request(None, request, self.timeout)
            codes = [t.error_code for t in response.topics if t.name == name]
            if codes and codes[0] != kerrors.UnknownTopicOrPartitionError.errno:
                break
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.2)
        self.admin.wait_for_topics([name], timeout=self.timeout)
        return True

    # ---- consumer groups -------------------------------------------------------------------------------------

    def list_groups(self) -> list[dict[str, Any]]:
        return [{"group": g.group_id, "protocol_type": g.protocol_type, "state": g.state}
                for g in sorted(self.admin.list_groups(timeout=self.timeout), key=lambda g: g.group_id)]

    def _group(self, group: str) -> Any:
        description = self.admin.describe_groups([group], timeout=self.timeout)[group]
        committed = self.admin.list_group_offsets(group, timeout=self.timeout)
        if description.state == "Dead" and not committed:
            raise CommandError(f"no such group: {group!r} at {self.servers} (fastmq groups list shows the groups)",
                               ExitCode.NOT_FOUND)
        return description, committed

    def describe_group(self, group: str) -> dict[str, Any]:
        description, committed = self._group(group)
        owners = {}
        for member in description.members:
            if description.protocol_type == "consumer":
                for tp in Assignment.decode(member.assignment).partitions:
                    owners[tp] = f"{member.client_id} ({member.client_host})"
        partitions = sorted(set(committed) | set(owners))
        ends = self._offsets(partitions, "latest")
        rows = []
        for tp in partitions:
            offset = committed[tp].offset if tp in committed and committed[tp].offset >= 0 else None
            end = ends.get(tp)
            rows.append({"topic": tp.topic, "partition": tp.partition, "committed": offset, "end": end,
                         "lag": None if offset is None or end is None else max(0, end - offset),
                         "member": owners.get(tp)})
        return {"group": group, "state": description.state, "protocol": description.protocol,
                "members": len(description.members), "partitions": rows}

    def reset_offsets(self, group: str, topics: list[str], target: tuple[str, Any],
                      execute: bool) -> list[dict[str, Any]]:
        """New committed offsets for the group's partitions (of `topics`, or of every topic it committed):
        target ("earliest" | "latest", None), ("datetime", ms) or ("shift", n). Commits them when `execute`."""
        if topics:      # the group may be new: offsets can be set before its first member joins
            description = self.admin.describe_groups([group], timeout=self.timeout)[group]
            committed = self.admin.list_group_offsets(group, timeout=self.timeout)
            partitions = [TopicPartition(t["topic"], p["partition"])
                          for t in self.describe_topics(topics) for p in t["partitions"]]
        else:
            description, committed = self._group(group)
            partitions = sorted(committed)
        if execute and description.state not in _INACTIVE_GROUP_STATES:
            raise CommandError(f"group {group!r} is {description.state} with {len(description.members)} member(s): "
                               "stop its consumers first, then reset")
        kind, value = target
        starts, ends = self._offsets(partitions, "earliest"), self._offsets(partitions, "latest")
        if kind == "datetime":
            found = self._offsets(partitions, value)
        rows = []
        for tp in partitions:
            current = committed[tp].offset if tp in committed and committed[tp].offset >= 0 else None
            if kind == "earliest":
                new = starts[tp]
            elif kind == "latest":
                new = ends[tp]
            elif kind == "datetime":
                new = found[tp] if found[tp] is not None else ends[tp]
            else:
                new = (current if current is not None else ends[tp]) + value
            new = min(max(new, starts[tp]), ends[tp])
            rows.append({"topic": tp.topic, "partition": tp.partition, "current": current, "new": new})
        if execute and rows:
            self._commit(group, {TopicPartition(r["topic"], r["partition"]): OffsetAndMetadata(r["new"], "", -1)
                                 for r in rows})
        return rows

    def delete_groups(self, groups: list[str]) -> None:
        self.admin.delete_groups(groups, timeout=self.timeout)

    # ---- offsets (through a consumer: ListOffsets and OffsetCommit are consumer requests) ------------------

    def _consumer(self, group: str | None) -> Any:
        from fastmq.kafka import Consumer

        return Consumer(bootstrap_servers=self.servers, group_id=group, enable_auto_commit=False,
                        allow_auto_create_topics=False, **self.client_options)

    def _offsets(self, partitions: list[TopicPartition], at: str | int) -> dict[TopicPartition, int | None]:
        """Per partition: its log start ("earliest"), its end ("latest"), or the first offset at or after a
        time in ms (None where no record is that recent)."""
        if not partitions:
            return {}
        with self._consumer(None) as consumer:
            if at == "earliest":
                return consumer.beginning_offsets(partitions, self.timeout)
            if at == "latest":
                return consumer.end_offsets(partitions, self.timeout)
            found = consumer.offsets_for_times({tp: at for tp in partitions}, self.timeout)
            return {tp: None if found[tp] is None else found[tp].offset for tp in partitions}

    def _commit(self, group: str, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        consumer = self._consumer(group)
        try:
            consumer.commit(offsets, self.timeout)
        finally:
            consumer.close(autocommit=False)
