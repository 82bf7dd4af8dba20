"""The RocketMQ client's compiled part: remoting commands (remoting) and messages (messages). Not a public API:
use fastmq.rocketmq."""
