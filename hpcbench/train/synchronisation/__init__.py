"""The synchronisation of a step: gradient buckets and their order (priority schedule), the alpha-beta prediction
of a step, the `sync` config section, and the one sequence that (re)builds the run's synchroniser and replica."""
