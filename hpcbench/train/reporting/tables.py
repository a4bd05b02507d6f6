"""The HDF5 tables of a training run (schema in docs/results-schema.md)."""

from __future__ import annotations

__all__ = ["make_tables", "STEP_FIELDS"]

#: the per-rank step numbers gathered to rank 0 (order of ``StepRecord.vector``)
STEP_FIELDS = ("compute_s", "comm_span_s", "exposed_s", "monitor_s", "step_s", "loss", "local_sq_norm", "sent_bytes",
               "link_busy_s", "policy_calls_s", "policy_agree_s", "telemetry_s")


def make_tables(results, monitor_columns: list[str]) -> dict:
    """Create the ``steps``, ``iterations``, ``clock_profile``, ``summary``, ``buckets``, ``profile``, ``decisions`` and ``resizes`` tables;
    returns them by name."""
    from hpcbench.results import Column as C

    steps = results.table("steps", [
        C("sync", "str", "", "synchroniser"),
        C("variant", "str", "", "monitors active in this step ('none', a monitor name, or names joined by +)"),
        C("iteration", "int64", "1", "measured iteration (-1: warm-up)"),
        C("step", "int64", "1", "step of this synchroniser's run, from 0"),
        C("warmup", "bool", "1", "a warm-up step (not in the summaries)"),
        C("step_s", "float64", "s", "slowest rank's step time (modelled seconds)"),
        C("compute_s", "float64", "s", "forward + backward + optimizer, mean over ranks (NaN: wrapped)"),
        C("comm_span_s", "float64", "s", "first bucket started to last completed, mean over ranks"),
        C("comm_exposed_s", "float64", "s", "communication not hidden by backward, less the wait for "
                                            "slower peers, mean over ranks"),
        C("wait_s", "float64", "s", "wait for the slowest rank's compute (max compute - own), mean over ranks"),
        C("hidden_fraction", "float64", "1", "1 - (exposed / span): share of communication hidden, mean"),
        C("monitor_s", "float64", "s", "time in monitors, mean over ranks"),
        C("policy_s", "float64", "s", "the policies' machinery of the previous step: the slowest rank's hook calls "
                                      "plus the quickest rank's agreement exchange (0: no policies)"),
        C("telemetry_s", "float64", "s", "time in the telemetry hook (records, table rows), slowest rank "
                                         "(0: no telemetry)"),
        C("workers", "int64", "1", "workers that trained the step (an elastic run's active set)"),
        C("global_batch", "int64", "1", "samples of the step over all workers (the batch sizes in effect then)"),
        C("batch_size", "float64", "1", "global_batch / workers (each worker's, when all are equal)"),
        C("samples_per_s_worker", "float64", "1/s", "batch_size / step_s"),
        C("samples_per_s_total", "float64", "1/s", "global_batch / step_s"),
        C("loss", "float64", "1", "training loss, mean over ranks (NaN: emulated)"),
        C("local_sq_norm", "float64", "1", "rank 0's |g_local|^2 before synchronisation (NaN: not measured)"),
        C("modelled_step_s", "float64", "s", "step_clock modelled: the profiled compute at the step's largest "
                                             "per-worker batch plus the priced synchronisation (NaN: measured clock)"),
        *[C(name, "float64", "1", "monitor output (NaN: not observed this step)") for name in monitor_columns],
    ], "one row per training step")
    iters = results.table("iterations", [
        C("sync", "str", "", ""), C("variant", "str", "", ""),
        C("iteration", "int64", "1", "measured iteration, from 0"),
        C("img_per_s_worker", "float64", "1/s", "sum of the steps' batch_size / sum of their step_s (KungFu's "
                                                 "'img/sec per worker')"),
        C("accuracy", "float64", "1", "rank 0 replica's held-out accuracy after the iteration (digits)"),
    ], "one row per measured iteration")
    summary = results.table("summary", [
        C("sync", "str", "", ""), C("variant", "str", "", ""),
        C("status", "str", "", "'ok' or 'skipped: reason'"),
        C("workers", "int64", "1", ""),
        C("img_per_s_worker", "float64", "1/s", "mean over iterations"),
        C("img_per_s_worker_ci", "float64", "1/s", "1.96 x std over iterations (KungFu's +-)"),
        C("img_per_s_total", "float64", "1/s", "workers x img_per_s_worker"),
        C("step_s", "float64", "s", "mean measured step"),
        C("compute_s", "float64", "s", "mean compute per step"),
        C("ideal_img_per_s_total", "float64", "1/s", "workers x batch / compute without communication "
                                                     "(profiled when emulated, measured in the run when real)"),
        C("efficiency", "float64", "1", "img_per_s_total / ideal_img_per_s_total"),
        C("hidden_fraction", "float64", "1", "mean share of communication hidden behind backward"),
        C("predicted_step_s", "float64", "s", "alpha-beta model with bucket overlap (NaN: no link model)"),
        C("predicted_efficiency", "float64", "1", "profiled compute / predicted_step_s"),
        C("comm_span_s", "float64", "s", "mean communication span per step (first start to last completion)"),
        C("predicted_comm_s", "float64", "s", "alpha-beta time of the step's reductions one after the other "
                                              "(compare with comm_span_s when overlap is off)"),
        C("policy_s", "float64", "s", "mean policy machinery per measured step (steps.policy_s)"),
        C("telemetry_s", "float64", "s", "mean telemetry time per measured step (steps.telemetry_s)"),
        C("monitor_overhead", "float64", "1", "1 - img/s of this variant / img/s of variant 'none' "
                                              "(interleaved runs)"),
        C("monitor_s", "float64", "s", "mean time per measured step in the monitors (steps.monitor_s: the "
                                       "synchronised gradients' views, the monitors' observations)"),
        C("monitor_cost", "float64", "1", "(monitor_s of this variant - monitor_s of variant 'none') / step_s of "
                                          "'none': the monitor's own time, timed directly, as a share of the step "
                                          "without it (interleaved runs)"),
        C("final_accuracy", "float64", "1", "held-out accuracy at the end (digits)"),
        C("schedule", "str", "", "'fifo', or 'priority' and the buckets' start order (e.g. 'priority 3 2 0 1')"),
    ], "one row per synchroniser and monitor variant")
    buckets = results.table("buckets", [
        C("bucket", "int64", "1", "bucket index (0 holds the last layers)"),
        C("bytes", "int64", "B", "float32 gradient bytes"),
        C("params", "int64", "1", "parameter tensors in the bucket"),
        C("ready_s", "float64", "s", "profiled time the bucket is complete, from the start of backward"),
        C("need_s", "float64", "s", "profiled time the forward first uses the bucket's parameters, from its start"),
    ], "gradient buckets of the model")
    profile = results.table("profile", [
        C("param", "int64", "1", "parameter index (registration order)"),
        C("numel", "int64", "1", "elements"),
        C("ready_s", "float64", "s", "gradient accumulated, from the start of backward (as replayed)"),
        C("need_s", "float64", "s", "first used by forward, from its start (as replayed)"),
    ], "the compute profile the run replayed, per parameter (profile_file: of a later run)")
    decisions = results.table("decisions", [
        C("sync", "str", "", "the entry whose run it changed"),
        C("step", "int64", "1", "the step it took effect before (from 0)"),
        C("decided_step", "int64", "1", "the step after which the ranks agreed on it (-1: before training)"),
        C("policy", "str", "", "the policy that decided"),
        C("batch_size", "str", "", "new per-worker batch size ('' unchanged; per worker: comma-separated)"),
        C("learning_rate", "float64", "1", "new learning rate (NaN: unchanged)"),
        C("synchroniser", "str", "", "new synchroniser ('' unchanged)"),
        C("algorithm", "str", "", "new allreduce algorithm ('' unchanged)"),
        C("workers", "int64", "1", "new worker count (-1: unchanged)"),
        C("ratio", "float64", "1", "new fraction of gradient elements kept (NaN: unchanged)"),
        C("reason", "str", "", "the policy's reason"),
    ], "one row per decision a policy made and the loop applied")
    resizes = results.table("resizes", [
        C("sync", "str", "", "the entry whose run it changed"),
        C("step", "int64", "1", "the first step on the new worker set"),
        C("old", "int64", "1", "active workers before"), C("new", "int64", "1", "active workers after"),
        C("kind", "str", "", "'grow' or 'shrink'"),
        C("mode", "str", "", "'warm_pool' (ranks started by mpirun, waiting) or 'spawn' (new processes)"),
        C("decision_ms", "float64", "ms", "the policies' calls in the step that decided (max over ranks)"),
        C("agreement_ms", "float64", "ms", "the policies' agreement exchange of that step (max over ranks)"),
        C("notify_ms", "float64", "ms", "waking the warm pool (grow; max over ranks)"),
        C("process_start_ms", "float64", "ms", "starting new processes (spawn; 0 in the warm pool)"),
        C("communicator_ms", "float64", "ms", "splitting the new communicator (max over ranks)"),
        C("state_ms", "float64", "ms", "context and model + optimizer state to the new workers (grow)"),
        C("rebuild_ms", "float64", "ms", "transport, synchroniser and replica on the new communicator"),
        C("resize_ms", "float64", "ms", "agreement + notify + process start + communicator + state + rebuild"),
        C("first_step_ms", "float64", "ms", "the first step on the new set (slowest rank)"),
        C("bytes_moved", "int64", "B", "state and context bytes sent to new workers"),
    ], "one row per resize of an elastic run's worker set")
    clock = results.table("clock_profile", [
        C("batch", "int64", "1", "per-worker batch"),
        C("forward_s", "float64", "s", "forward with the loss, one worker alone"),
        C("backward_s", "float64", "s", "backward"), C("optimizer_s", "float64", "s", "SGD step"),
    ], "step_clock modelled: the compute per step the modelled clock interpolates (empty: measured clock)")
    return {"clock_profile": clock, "steps": steps, "iterations": iters, "summary": summary, "buckets": buckets, "profile": profile,
            "decisions": decisions, "resizes": resizes}
