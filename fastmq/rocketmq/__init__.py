"""fastmq.rocketmq: a RocketMQ remoting client (the codec now; the client follows)."""
