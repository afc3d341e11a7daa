"""Artifacts from the launch spec: compose.yaml, the multi-host compose file, Kubernetes LeaderWorkerSets."""
