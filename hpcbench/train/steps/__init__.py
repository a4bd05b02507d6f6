"""The step loop: the loop and its hooks, the plan of steps, what the loop is given (setup, context), the replica
that trains a step (real, emulated, pipelined) and its record, the compute profile and the modelled step clock."""
