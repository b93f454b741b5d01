"""An offline rehearsal of the Google Cloud run: everything of ours real, Google's control plane stood in for."""
