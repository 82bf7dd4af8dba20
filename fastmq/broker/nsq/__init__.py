"""The NSQ front end of the embedded broker: nsqd's TCP protocol (vanilla and Youzan's partition and trace commands)
on the core's topics; channels are consumer groups with their own read positions (channels.py)."""
from fastmq.broker.frontends import register
from fastmq.broker.nsq.frontend import NSQFrontEnd

register("nsq", NSQFrontEnd)
