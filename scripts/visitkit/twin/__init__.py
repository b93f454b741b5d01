"""The local twin: the processes that stand in for Google Cloud (HAProxy, Toxiproxy, the push relay,
supervised instances), their latency profiles, chaos and resource sampling."""
