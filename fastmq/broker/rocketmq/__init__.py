"""The broker's RocketMQ front ends, registered as "rocketmq" (a RocketMQ broker endpoint on the store:
frontend.py, handlers in send.py, pull.py, consumers.py, admin.py) and "namesrv" (a name server: namesrv.py on
routes.py). The remoting listener both use is remoting.py; the broker-side services are clients.py (heartbeats),
locks.py (orderly queue locks), hold.py (long-polling pulls) and schedule.py (delay levels)."""
from fastmq.broker.frontends import register
from fastmq.broker.rocketmq.frontend import RocketMQFrontEnd
from fastmq.broker.rocketmq.namesrv import NamesrvFrontEnd

register("rocketmq", RocketMQFrontEnd)
register("namesrv", NamesrvFrontEnd)
