"""The NSQ client's compiled part: the protocol codec (commands, frames, messages). Not a public API: use fastmq.nsq."""
