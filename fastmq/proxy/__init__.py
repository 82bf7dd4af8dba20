"""The HTTP proxy: produce and consume over HTTP from any language, consumer offsets and locks in Redis.

`fastmq proxy` runs it (fastmq/cli/proxy.py); ProxyApp (app.py) is the ASGI application, ConsumerState
(state.py) the Redis structures and scripts, Backend (backend.py) the broker behind it.
"""
