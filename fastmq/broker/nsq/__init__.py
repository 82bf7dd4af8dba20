"""The NSQ front end of the embedded broker: nsqd's TCP protocol (vanilla and Youzan's partition and trace commands)
on the core's topics, channels as consumer groups with their own read positions (channels.py), and the HTTP APIs
of nsqd and nsqlookupd (http.py) on `nsq-http` and `nsqlookupd-http` listeners."""
from fastmq.broker.frontends import register
from fastmq.broker.nsq.frontend import NSQFrontEnd
from fastmq.broker.nsq.http import NSQHTTPFrontEnd

register("nsq", NSQFrontEnd)
register("nsq-http", NSQHTTPFrontEnd)
register("nsqlookupd-http", NSQHTTPFrontEnd)
