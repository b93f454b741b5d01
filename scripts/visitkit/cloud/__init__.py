"""Google Cloud: the deployment target, its preflight and first apply, credentials and ID tokens, Cloud Monitoring, the Locust fleet and list prices."""
