"""The TubeMQ front ends of the embedded broker: a master (`tubemq-master://host:port`: producer and consumer
registration, heartbeats, metadata, the server-side balancer) and a broker (`tubemq-broker://host:port`: send,
consumer register/unregister, heartbeat, getMessage, commit) on the store. The master finds the broker front end
of the same process through the core (Broker.front_end)."""
from __future__ import annotations

from fastmq.broker.frontends import register
from fastmq.broker.tubemq.data import TubeMQBrokerFrontEnd
from fastmq.broker.tubemq.master import TubeMQMasterFrontEnd

register("tubemq-master", TubeMQMasterFrontEnd)
register("tubemq-broker", TubeMQBrokerFrontEnd)
