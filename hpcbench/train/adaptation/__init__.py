"""The adaptation of a run between steps: the policies' hook that makes decisions collective, the appliers of the
agreed decisions and the elastic worker set."""
