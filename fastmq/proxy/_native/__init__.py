"""The proxy's compiled part: produce answers written as JSON straight from the producer's records. Not a public
API: use fastmq.proxy."""
