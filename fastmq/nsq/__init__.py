"""fastmq.nsq: an NSQ client (nsqd's TCP protocol V2, with Youzan's partition, ordering and trace extensions)."""
