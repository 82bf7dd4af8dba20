"""The compiled part of the broker's RocketMQ front end: SEND_BATCH_MESSAGE bodies into store batches."""
