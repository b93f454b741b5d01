"""The whole study in one command (scripts/run-study): its plan, running it iteration by iteration through the
runner, and one report beside the reference study's figures."""
