"""Google Cloud: the deployment target, its preflight and first apply, credentials and ID tokens, Cloud
Monitoring and the Locust fleet."""
